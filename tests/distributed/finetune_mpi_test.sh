#!/usr/bin/env bash
# `kgrad train DIR --data-parallel` under mpirun: the artifacts of the example
# MLP (in float64, dynamic batch) trained by a 2-rank job end with the weights
# one process gets on the whole batches (within 1e-12, the rounding of the
# averaged shards), bit-identical on both ranks; a resumed 2-rank run equals an
# uninterrupted one file for file; batches that do not divide fail on every rank.
set -uo pipefail
run_mpi=$1
kgrad=$2
examples=$(dirname "$3")  # examples/mlp.pbtxt
dir=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

sed -e 's/dims: 5 dims/dims: -1 dims/g' -e 's/DT_FLOAT32/DT_FLOAT64/g' "$examples/mlp.pbtxt" > "$dir/mlp64.pbtxt"
python3 - "$dir" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(11)
x = rng.uniform(-1, 1, size=(12, 4))
labels = np.zeros((12, 2))
labels[np.arange(12), (x[:, 0] + x[:, 1] > 0).astype(int)] = 1
np.save(sys.argv[1] + "/x.npy", x)
np.save(sys.argv[1] + "/labels.npy", labels)
PY
for run in one two first; do
  "$kgrad" train-artifacts "$dir/mlp64.pbtxt" --loss none --optimizer adamw --lr 0.05 -o "$dir/$run" > /dev/null ||
    fail "train-artifacts for $run"
done
data=(--data "x=$dir/x.npy" --data "labels=$dir/labels.npy" --batch 4 --shuffle --seed 3)

one=$("$kgrad" train "$dir/one" "${data[@]}" --epochs 3 --output "$dir/one/out" 2>&1) || fail "one process: $one"
two=$("$run_mpi" 2 "$kgrad" train "$dir/two" --data-parallel "${data[@]}" --epochs 3 --output "$dir/two/out" 2>&1) ||
  fail "two ranks: $two"
grep -qE "data parallel: 2 ranks \([0-9]+ threads? each\), 4 gradients in 1 buckets, 192 bytes" <<<"$two" ||
  fail "no summary: $two"
grep -q "weights bit-identical on all 2 ranks" <<<"$two" || fail "no identity check: $two"
grep -q "9 steps, last loss" <<<"$two" || fail "not 9 steps: $two"
# (mpirun gives the ranks a terminal: the progress bar, one line rewritten.)
[ "$(grep -o "epoch 1/3 step 1/3 loss" <<<"$two" | wc -l)" -eq 1 ] || fail "rank 1 spoke too: $two"
python3 - "$dir" <<'PY' || fail "2 ranks trained other weights than one process"
import sys
import numpy as np
d = sys.argv[1]
worst = 0.0
for w in ["w1", "b1", "w2", "b2"]:
    a = np.load(f"{d}/one/out/{w}.npy")
    b = np.load(f"{d}/two/out/{w}.npy")
    worst = max(worst, float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-3))))
print(f"largest relative difference, 1 process vs 2 ranks: {worst:.3g}")
sys.exit(0 if worst < 1e-12 else 1)
PY

# Interrupted after the first epoch (rank 0 writes the checkpoint), resumed by
# both ranks: the same weights, byte for byte, as the uninterrupted job.
"$run_mpi" 2 "$kgrad" train "$dir/first" --data-parallel "${data[@]}" --epochs 1 > /dev/null 2>&1 || fail "first epoch"
rm -rf "$dir/resumed" && cp -r "$dir/first" "$dir/resumed" || fail "copy"
res=$("$run_mpi" 2 "$kgrad" train "$dir/resumed" --data-parallel "${data[@]}" --epochs 3 --resume \
  --output "$dir/resumed/out" 2>&1) || fail "resumed: $res"
grep -q "resumed at step 3" <<<"$res" || fail "not resumed at step 3: $res"
for w in w1 b1 w2 b2; do
  cmp -s "$dir/two/out/$w.npy" "$dir/resumed/out/$w.npy" || fail "resumed $w differs from the uninterrupted run"
done

# 12 examples in batches of 5 on 2 ranks: refused on both before training.
export KGRAD_MPIRUN_FLAGS="--mca orte_abort_on_non_zero_status 0"
bad=$("$run_mpi" 2 "$kgrad" train "$dir/one" --data-parallel --data "x=$dir/x.npy" --data "labels=$dir/labels.npy" \
  --batch 5 2>&1)
grep -q "steps, last loss" <<<"$bad" && fail "batches of 5 on 2 ranks trained: $bad"
[ "$(grep -o "batches of 5 and a last one of 2 rows, which do not divide among 2 ranks" <<<"$bad" | wc -l)" -eq 2 ] ||
  fail "not both ranks reported the batch: $bad"

echo "$two" | tail -3
[ "$failures" -eq 0 ] && echo PASSED
exit $((failures > 0))
