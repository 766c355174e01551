#!/usr/bin/env bash
# The optimised gradient graphs of the fixtures, exported with `kgrad export-onnx`,
# and the elementwise table's one-node graphs (write_elementwise_cases), run in
# ONNX Runtime 1.30 (CPU) and give kgrad's numbers. ONNX Runtime comes from
# npm (tools/ort/install_ort.sh, cached); without node or npm, or when the install
# fails (no network), the test says so plainly and passes as skipped.
set -uo pipefail
kgrad="$1"; data="$2"; tools="$3"; cases="$4"; shift 4

if ! command -v node >/dev/null; then
  echo "SKIPPED: node is not installed (apt-get install nodejs npm to run this test)"
  exit 0
fi
if ! ort_dir=$("$tools/install_ort.sh"); then
  echo "SKIPPED: could not install onnxruntime-node@1.30.0 with npm (see above)"
  exit 0
fi
export NODE_PATH="$ort_dir/node_modules"
work="${TEST_TMPDIR:-$(mktemp -d)}/ort"
mkdir -p "$work"
failed=0 compared=0

# check NAME WRT INPUTS...: differentiate fixture NAME w.r.t. WRT (weights, all or
# positions), run the gradient graph in kgrad and in ONNX Runtime, compare outputs.
check() {
  local name="$1" wrt="$2"; shift 2
  local dir="$work/$name-$wrt" args=() files=() i=0
  mkdir -p "$dir/kgrad" "$dir/ort"
  for f in "$@"; do
    args+=(--input "x$i=$data/$f"); files+=("$data/$f"); i=$((i + 1))
  done
  args+=(--input "sens=$data/${name}_ct.npy"); files+=("$data/${name}_ct.npy")
  if ! "$kgrad" grad "$data/$name.onnx" -o "$dir/g.pb" --wrt "$wrt" --sens --optimize >"$dir/log" 2>&1 ||
     ! "$kgrad" export-onnx "$dir/g.pb" -o "$dir/g.onnx" >>"$dir/log" 2>&1 ||
     ! "$kgrad" run "$dir/g.pb" "${args[@]}" --output "$dir/kgrad" >>"$dir/log" 2>&1 ||
     ! node "$tools/ort_run.js" run "$dir/g.onnx" "$dir/ort" "${files[@]}" >>"$dir/log" 2>&1; then
    echo "FAILED $name --wrt $wrt:"; cat "$dir/log"; failed=$((failed + 1)); return
  fi
  if ! node "$tools/ort_run.js" compare 1e-4 "$dir/ort" "$dir/kgrad" >"$dir/cmp" 2>&1; then
    echo "FAILED $name --wrt $wrt:"; cat "$dir/cmp"; failed=$((failed + 1)); return
  fi
  local n; n=$(ls "$dir"/ort/ort_*.npy | wc -l)
  compared=$((compared + n))
  echo "ok $name --wrt $wrt: $n outputs agree"
}

# check_sizes forward|grad NAME SIZE...: a dynamic-axes fixture imported (forward)
# or differentiated w.r.t. its input with the output sensitivity as an input
# (grad), exported once (dim symbols as dim_params, run-time shapes as
# Shape/Reshape/Pad/...), and run at each size in kgrad and in ONNX Runtime.
check_sizes() {
  local what="$1" name="$2"; shift 2
  local dir="$work/$name-$what-sizes"
  mkdir -p "$dir"
  if [ "$what" = grad ]; then
    "$kgrad" grad "$data/$name.onnx" -o "$dir/m.pb" --wrt 0 --sens --optimize >"$dir/log" 2>&1
  else
    "$kgrad" import-onnx "$data/$name.onnx" -o "$dir/m.pb" >"$dir/log" 2>&1
  fi || { echo "FAILED $name $what (build):"; cat "$dir/log"; failed=$((failed + 1)); return; }
  if ! "$kgrad" export-onnx "$dir/m.pb" -o "$dir/m.onnx" >>"$dir/log" 2>&1; then
    echo "FAILED $name $what (export):"; cat "$dir/log"; failed=$((failed + 1)); return
  fi
  for size in "$@"; do
    local args=(--input "x0=$data/${name}_${size}_in0.npy") files=("$data/${name}_${size}_in0.npy")
    if [ "$what" = grad ]; then
      args+=(--input "sens=$data/${name}_${size}_ct.npy"); files+=("$data/${name}_${size}_ct.npy")
    fi
    mkdir -p "$dir/$size/kgrad" "$dir/$size/ort"
    if ! "$kgrad" run "$dir/m.pb" "${args[@]}" --output "$dir/$size/kgrad" >>"$dir/log" 2>&1 ||
       ! node "$tools/ort_run.js" run "$dir/m.onnx" "$dir/$size/ort" "${files[@]}" >>"$dir/log" 2>&1 ||
       ! node "$tools/ort_run.js" compare 1e-4 "$dir/$size/ort" "$dir/$size/kgrad" >>"$dir/log" 2>&1; then
      echo "FAILED $name $what at $size:"; cat "$dir/log"; failed=$((failed + 1)); return
    fi
    compared=$((compared + 1))
  done
  echo "ok $name $what at $*: the one exported graph agrees at every size"
}

# check_elementwise: every float32 and bool case of tests/onnx/onnx_elementwise_cases.h
# (each row of the elementwise table as its ONNX op or its functor's formula in
# standard ops) against the primitive's CPU kernel.
check_elementwise() {
  local dir="$work/elementwise" n=0
  if ! "$cases" "$dir" >"$work/elementwise.log" 2>&1; then
    echo "FAILED elementwise (writing the cases):"; cat "$work/elementwise.log"; failed=$((failed + 1)); return
  fi
  for case_dir in "$dir"/*/; do
    local name; name=$(basename "$case_dir")
    mkdir -p "$case_dir/ort"
    if ! node "$tools/ort_run.js" run "$case_dir/model.onnx" "$case_dir/ort" "$case_dir"/in*.npy >"$case_dir/log" 2>&1 ||
       ! node "$tools/ort_run.js" compare 1e-5 "$case_dir/ort" "$case_dir/kgrad" >>"$case_dir/log" 2>&1; then
      echo "FAILED elementwise $name:"; cat "$case_dir/log"; failed=$((failed + 1)); continue
    fi
    n=$((n + 1))
  done
  compared=$((compared + n))
  echo "ok elementwise: $n one-node graphs agree"
}

check_elementwise
check mlp all mlp_in0.npy
check cnn weights cnn_in0.npy
check block17 all block17_in0.npy
check resnet_train weights resnet_train_in0.npy resnet_train_in1.npy
check mobilenet_v2_train weights mobilenet_v2_train_in0.npy
check transformer_encoder weights transformer_encoder_in0.npy
check act_zoo all act_zoo_in0.npy
check loss_zoo 0 loss_zoo_in0.npy loss_zoo_in1.npy loss_zoo_in2.npy
check embedding weights embedding_in0.npy embedding_in1.npy
check groupnorm weights groupnorm_in0.npy
check unet weights unet_in0.npy
check win_bilinear all win_bilinear_in0.npy
check win_maxpool_ceil all win_maxpool_ceil_in0.npy
check win_avgpool_ceil all win_avgpool_ceil_in0.npy
check win_conv1d weights win_conv1d_in0.npy
check win_convt weights win_convt_in0.npy
check win_zoo3d all win_zoo3d_in0.npy
check r3d_18_train weights r3d_18_train_in0.npy r3d_18_train_in1.npy
check_sizes forward dyn_transformer b1s5 b3s17 b8s5
check_sizes grad dyn_transformer b1s5 b3s17 b8s5
check_sizes forward dyn_resnet b1 b3 b8

echo "$compared outputs compared, $failed models failed"
[ "$failed" -eq 0 ]
