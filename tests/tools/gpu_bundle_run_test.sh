#!/usr/bin/env bash
# tools/gpu_bundle_run.sh (the bundle's run.sh, which runs on GPU machines) on a
# synthetic bundle: stand-in test binaries that pass, skip, fail and crash like
# gtest binaries, and a stand-in gpu_suite. Checks the per-binary and total case
# counts, that a crash counts as a failure, the exit status, and what the suite
# is started with.
set -uo pipefail
run_sh="$TEST_SRCDIR/$TEST_WORKSPACE/tools/gpu_bundle_run.sh"
[ -f "$run_sh" ] || { echo "no $run_sh"; exit 1; }
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
check() {  # check NAME TEXT FILE
  if grep -qF -- "$2" "$3"; then echo "ok: $1"; else echo "FAIL: $1: no '$2' in:"; cat "$3"; failures=$((failures + 1)); fi
}

# make_bundle DIR TEST...: bin/<TEST> for each kind (ok_test, bad_test, crash_test).
make_bundle() {
  local dir=$1; shift
  local stage="$dir.stage"
  mkdir -p "$stage/bin" "$stage/lib" "$stage/lib-fallback" "$stage/bench" "$dir"
  for t in "$@"; do
    case $t in
      ok_test) printf '%s\n' '#!/bin/sh' 'echo "[ RUN      ] A.One"' 'echo "[       OK ] A.One (0 ms)"' \
        'echo "[       OK ] A.Two (1 ms)"' 'echo "[  SKIPPED ] A.Three (0 ms)"' 'exit 0' > "$stage/bin/$t" ;;
      bad_test) printf '%s\n' '#!/bin/sh' 'echo "[  FAILED  ] B.One (3 ms)"' 'echo "[  FAILED  ] B.One"' \
        'echo "[  FAILED  ] 1 test, listed below:"' 'exit 1' > "$stage/bin/$t" ;;
      crash_test) printf '%s\n' '#!/bin/sh' 'echo "[ RUN      ] C.One"' 'kill -ABRT $$' > "$stage/bin/$t" ;;
    esac
  done
  # The suite: records how it was started, writes its report, exits 0.
  printf '%s\n' '#!/bin/sh' 'echo "args=$* python=$KGRAD_SUITE_PYTHON script=$(ls bench)" > "$2/suite_args"' \
    'echo "| report |" > "$2/gpu.md"' 'exit 0' > "$stage/bin/gpu_suite"
  echo "print(1)" > "$stage/bench/torch_side.py"
  chmod +x "$stage"/bin/*
  python3 -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "w:xz") as t:
    for d in ("bin", "lib", "lib-fallback", "bench"): t.add(sys.argv[2] + "/" + d, arcname=d)' \
    "$dir/kgrad-gpu.tar.xz" "$stage"
  cp "$run_sh" "$dir/run.sh"
}

make_bundle "$tmp/mixed" ok_test bad_test crash_test
bash "$tmp/mixed/run.sh" "$tmp/out1" > "$tmp/log1" 2>&1
rc=$?
check "mixed bundle fails" "cuda tests: 2 passed, 2 failed, 1 skipped" "$tmp/log1"
[ "$rc" -ne 0 ] && echo "ok: exit $rc" || { echo "FAIL: exit 0 with failures"; failures=$((failures + 1)); }
check "passing binary" "ok_test: 2 passed, 0 failed, 1 skipped (exit 0)" "$tmp/log1"
check "failing binary" "bad_test: 0 passed, 1 failed, 0 skipped (exit 1)" "$tmp/log1"
check "crashing binary counts as a failure" "crash_test: 0 passed, 1 failed, 0 skipped (exit 134)" "$tmp/log1"
check "every test's output in the log" "B.One (3 ms)" "$tmp/out1/cuda_tests.log"
check "suite ran" "gpu_suite: exit 0" "$tmp/log1"
check "suite gets --out and a python" "args=--out $tmp/out1 python=/" "$tmp/out1/suite_args"
check "suite finds the PyTorch script" "script=torch_side.py" "$tmp/out1/suite_args"
check "suite report in OUT" "| report |" "$tmp/out1/gpu.md"

make_bundle "$tmp/good" ok_test
OUT="$tmp/out2" bash "$tmp/good/run.sh" > "$tmp/log2" 2>&1
rc=$?
check "passing bundle" "cuda tests: 2 passed, 0 failed, 1 skipped" "$tmp/log2"
[ "$rc" -eq 0 ] && echo "ok: exit 0" || { echo "FAIL: exit $rc"; cat "$tmp/log2"; failures=$((failures + 1)); }
[ -f "$tmp/out2/cuda_tests.log" ] && echo "ok: \$OUT used" || { echo "FAIL: \$OUT not used"; failures=$((failures + 1)); }

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
