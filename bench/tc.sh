#!/usr/bin/env bash
# Tensor comprehensions against the built-in kernels, in the same run:
#   bash bench/tc.sh [OUT_DIR] [ROUNDS]
# For each pair (a tc block and the primitive it spells), `kgrad bench` times the
# forward pass and the training step (value and gradient) of each, rounds
# interleaved; the table gives the medians over rounds and tc / built-in, and
# the same ratio of each round's fastest run ("best ratio").
#   matmul   C(i,j) +=! A(i,k) * B(k,j)                       vs matmul, 512^3
#   conv2d   3x3, padding 1 by guards, the suite's conv net's second layer
#            (64 x 32 x 14 x 14 -> 64 channels)                vs conv2d{padding=[1,1]}
#   maxpool  2x2 stride 2, the conv net's first pooling
#            (64 x 32 x 28 x 28)                              vs max_pool2d{kernel=[2,2]}
set -euo pipefail
out=${1:-/tmp/kgrad-tc-bench}
rounds=${2:-3}
repeat=${REPEAT:-10}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
kgrad="$root/bazel-bin/tools/kgrad"
(cd "$root" && ./bazelw build //tools:kgrad >/dev/null 2>&1) || { echo "build failed" >&2; exit 1; }

# graph NAME PARAMS NODE_CONSTANT INPUTS: a one-application graph file.
graph() {
  local name=$1 params=$2 prim=$3 inputs=$4
  cat > "$out/$name.pbtxt" <<EOF
format_version: 1
producer: "bench/tc.sh"
entry: "$name"
graphs {
  name: "$name"
$params
  nodes { name: "op" constant { primitive { $prim } } }
  nodes { name: "out" apply { inputs: ["op", $inputs] } }
  output: "out"
}
EOF
}
param() {  # param NAME DIMS...
  local name=$1; shift
  local dims=""
  for d in "$@"; do dims="$dims dims: $d"; done
  echo "  parameters { name: \"$name\" type { tensor { dtype: DT_FLOAT32$dims } } }"
}
tc() { echo "name: \"tc\" attrs { key: \"def\" value { s: \"$1\" } }"; }

graph matmul_tc "$(param A 512 512; param B 512 512)" \
  "$(tc 'def mm(float(M,K) A, float(K,N) B) -> (C) { C(i,j) +=! A(i,k) * B(k,j) }')" '"A", "B"'
graph matmul_builtin "$(param A 512 512; param B 512 512)" 'name: "matmul"' '"A", "B"'
graph conv2d_tc "$(param I 64 32 14 14; param Wt 64 32 3 3)" \
  "$(tc 'def conv(float(N,C,H,W) I, float(F,C,KH,KW) Wt) -> (O) { O(n,f,h,w) +=! I(n,c,h + kh - 1,w + kw - 1) * Wt(f,c,kh,kw) where h in 0:H, w in 0:W, h + kh - 1 in 0:H, w + kw - 1 in 0:W }')" \
  '"I", "Wt"'
graph conv2d_builtin "$(param I 64 32 14 14; param Wt 64 32 3 3)" \
  'name: "conv2d" attrs { key: "padding" value { ints { values: 1 values: 1 } } }' '"I", "Wt"'
graph maxpool_tc "$(param I 64 32 28 28)" \
  "$(tc 'def pool(float(B,C,H,W) I) -> (O) { O(b,c,i,j) max=! I(b,c,2*i + kh,2*j + kw) where kh in 0:2, kw in 0:2 }')" '"I"'
graph maxpool_builtin "$(param I 64 32 28 28)" \
  'name: "max_pool2d" attrs { key: "kernel" value { ints { values: 2 values: 2 } } }' '"I"'

# median FILE KEY: the median `kgrad bench` printed for `forward` or `step`;
# best FILE KEY: the fastest run it printed (on a shared machine the noise only
# adds time, so the fastest runs' ratio moves less between rounds).
median() { awk -v k="$2" '$1 == k { print $3 }' "$1"; }
best() { awk -v k="$2" '$1 == k { gsub(",", "", $6); print $6 }' "$1"; }
for r in $(seq 1 "$rounds"); do
  for pair in matmul conv2d maxpool; do
    for side in tc builtin; do
      "$kgrad" bench "$out/${pair}_$side.pbtxt" --grad --repeat "$repeat" > "$out/${pair}_${side}_$r.txt"
    done
  done
done

mid() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-8s %-8s %12s %12s %8s %10s\n' pair pass "tc ms" "built-in ms" ratio "best ratio"
for pair in matmul conv2d maxpool; do
  for pass in forward step; do
    t=$(for r in $(seq 1 "$rounds"); do median "$out/${pair}_tc_$r.txt" "$pass"; done | mid)
    b=$(for r in $(seq 1 "$rounds"); do median "$out/${pair}_builtin_$r.txt" "$pass"; done | mid)
    tb=$(for r in $(seq 1 "$rounds"); do best "$out/${pair}_tc_$r.txt" "$pass"; done | mid)
    bb=$(for r in $(seq 1 "$rounds"); do best "$out/${pair}_builtin_$r.txt" "$pass"; done | mid)
    printf '%-8s %-8s %12.3f %12.3f %8.2f %10.2f\n' "$pair" "$pass" "$t" "$b" \
      "$(echo "$t / $b" | bc -l)" "$(echo "$tb / $bb" | bc -l)"
  done
done
