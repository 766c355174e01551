#!/usr/bin/env bash
# `kgrad train --data-parallel` under mpirun: a 2-rank job trains the example
# MLP step as one process does on the whole batch, with bit-identical weights;
# a batch that does not divide, and ranks loading different graph files, fail
# with a clear error on every rank.
set -uo pipefail
run_mpi=$1
kgrad=$2
examples=$(dirname "$3")  # examples/train_step.pbtxt
dir=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The example step with a dynamic batch, and 8 rows of data.
sed 's/dims: 5 dims/dims: -1 dims/g' "$examples/train_step.pbtxt" > "$dir/step.pbtxt"
sed 's/lr" constant { tensor { dtype: DT_FLOAT32 double_data: 0.5/lr" constant { tensor { dtype: DT_FLOAT32 double_data: 0.25/' \
  "$dir/step.pbtxt" > "$dir/other_step.pbtxt"
python3 - "$dir" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(7)
x = rng.uniform(-1, 1, size=(8, 4)).astype(np.float32)
labels = np.zeros((8, 2), dtype=np.float32)
labels[np.arange(8), (x[:, 0] > 0).astype(int)] = 1
np.save(sys.argv[1] + "/x8.npy", x)
np.save(sys.argv[1] + "/labels8.npy", labels)
PY
data=(--input "x=$dir/x8.npy" --input "labels=$dir/labels8.npy")

one=$("$kgrad" train "$dir/step.pbtxt" --steps 20 "${data[@]}" 2>&1) || fail "one process: $one"
two=$("$run_mpi" 2 "$kgrad" train "$dir/step.pbtxt" --data-parallel --steps 20 "${data[@]}" 2>&1) ||
  fail "two ranks: $two"
grep -q "weights bit-identical on all 2 ranks" <<<"$two" || fail "no identity check: $two"
grep -qE "data parallel: 2 ranks \([0-9]+ threads? each\), 4 gradients in 1 buckets" <<<"$two" || fail "no summary: $two"
# The same losses (rounded as printed) at every step.
diff <(grep '^step' <<<"$one" | awk '{printf "%s %.4f\n", $2, $4}') \
     <(grep '^step' <<<"$two" | awk '{printf "%s %.4f\n", $2, $4}') || fail "losses differ"
[ "$(grep -c '^step' <<<"$two")" -eq 20 ] || fail "rank 0 printed $(grep -c '^step' <<<"$two") steps"

# mpirun would end the job when the first rank exits non-zero, maybe before the
# other has printed: let every rank finish (mpirun's own status is then 0; what
# the ranks print says whether they failed).
export KGRAD_MPIRUN_FLAGS="--mca orte_abort_on_non_zero_status 0"
bad=$("$run_mpi" 2 "$kgrad" train "$examples/train_step.pbtxt" --data-parallel --steps 2 \
  --input "x=$examples/data/mlp_x.npy" --input "labels=$examples/data/mlp_labels.npy" 2>&1)
grep -q "^step\|^loss" <<<"$bad" && fail "5 rows on 2 ranks trained: $bad"
# (Counted as occurrences: two ranks' lines can arrive joined.)
[ "$(grep -o "parameter 'x': its batch of 5 rows does not divide among 2 ranks" <<<"$bad" | wc -l)" -eq 2 ] ||
  fail "not both ranks reported the batch: $bad"

mixed=$("$run_mpi" -- -np 1 "$kgrad" train "$dir/step.pbtxt" --data-parallel "${data[@]}" : \
  -np 1 "$kgrad" train "$dir/other_step.pbtxt" --data-parallel "${data[@]}" 2>&1)
grep -q "^step\|^loss" <<<"$mixed" && fail "different graphs trained: $mixed"
[ "$(grep -o "the ranks disagree about the graph file" <<<"$mixed" | wc -l)" -eq 2 ] ||
  fail "not both ranks reported different graphs: $mixed"

echo "$two" | tail -3
[ "$failures" -eq 0 ] && echo PASSED
exit $((failures > 0))
