#!/usr/bin/env bash
# conformance_runner on testdata/ (make_runner_fixtures.py): each fixture's
# outcome, --fold-integer-inputs, the exit status (1 with a wrong or crashed test, 0 without, 2 on bad
# arguments), the time limit, --only and the exporter subset.
set -uo pipefail
here="$TEST_SRCDIR/$TEST_WORKSPACE/tests/conformance"
runner="$here/conformance_runner"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }
ok() { echo "ok: $1"; }

printf 'Add\nDiv\n' > "$tmp/ops.txt"
"$runner" "$here/testdata" --timeout=2 --json="$tmp/all.json" --ops="$tmp/ops.txt" > "$tmp/all.out" 2>&1
rc=$?
[ $rc -eq 1 ] && ok "exit 1 with wrong and crashed tests" || { fail "exit $rc, want 1"; cat "$tmp/all.out"; }

# expect NAME OUTCOME CHECK DETAIL: the test's JSON line has them.
expect() {
  local line
  line=$(grep -F "\"name\": \"$1\"" "$tmp/all.json")
  if [[ "$line" == *"\"outcome\": \"$2\""* && "$line" == *"\"check\": \"$3\""* && "$line" == *"$4"* ]]; then
    ok "$1: $2, check $3"
  else
    fail "$1: want $2, check $3, '$4'; got: $line"
  fi
}
expect test_pass_add pass pass ''
expect test_pass_within_tolerance pass pass ''
expect test_pass_nan pass fail ''
expect test_pass_int pass - ''
expect test_wrong_value wrong - 'values: 1 of 6 differ (first at [1,2]'
expect test_wrong_dtype wrong - 'dtype: expected f64, got f32'
expect test_wrong_shape wrong - 'shape: expected [3,2], got [2,3]'
expect test_wrong_nan wrong - 'first at [0,0]: expected 0, got nan'
expect test_wrong_int wrong - 'expected 7, got 6'
expect test_refused_op refused - '1 unsupported ONNX op: Hardmax'
expect test_crash_endless_loop crash - 'timeout after 2 s'
# The shape as a graph input: read at run time (dynamic_reshape); integer inputs
# get no gradient check.
expect test_fold_reshape pass - ''

grep -qF 'overall: 12 tests: 5 pass (41.7%), 5 wrong, 1 refused, 1 crash' "$tmp/all.out" \
  && ok "overall totals" || { fail "overall totals"; cat "$tmp/all.out"; }
# Add and Div only: the Hardmax test and the loop (Constant, Loop, ...) are outside.
grep -qF 'exporter subset (every op type among the 2 ' "$tmp/all.out" \
  && grep -qF '): 9 tests: 4 pass (44.4%), 5 wrong, 0 refused, 0 crash' "$tmp/all.out" \
  && ok "exporter subset" || { fail "exporter subset"; cat "$tmp/all.out"; }

# The shape as a constant: the reshape passes, and its gradient checks (x only).
"$runner" "$here/testdata" --only=fold --fold-integer-inputs --json="$tmp/fold.json" > "$tmp/fold.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -qF '"name": "test_fold_reshape", "op": "Reshape", "ops": ["Reshape"], "exporter": false, "outcome": "pass", "detail": "", "check": "pass"' "$tmp/fold.json" \
  && ok "--fold-integer-inputs" || { fail "--fold-integer-inputs: exit $rc"; cat "$tmp/fold.out" "$tmp/fold.json"; }

"$runner" "$here/testdata" --only='^test_(pass|refused)' > "$tmp/pass.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -qF 'overall: 5 tests: 4 pass' "$tmp/pass.out" \
  && ok "--only: refusals alone exit 0" || { fail "--only: exit $rc"; cat "$tmp/pass.out"; }

for bad in "--only=(" "--jobs=0" "--timeout=-1" "--frobnicate"; do
  "$runner" "$here/testdata" "$bad" > "$tmp/bad.out" 2>&1
  rc=$?
  [ $rc -eq 2 ] && grep -q '^error: ' "$tmp/bad.out" && ok "$bad: exit 2" || { fail "$bad: exit $rc"; cat "$tmp/bad.out"; }
done
"$runner" "$tmp/no-such-dir" > "$tmp/bad.out" 2>&1
[ $? -eq 2 ] && ok "missing DIR: exit 2" || fail "missing DIR"

if [ $failures -eq 0 ]; then echo "runner_test: all passed"; else echo "runner_test: $failures failed"; fi
[ $failures -eq 0 ]
