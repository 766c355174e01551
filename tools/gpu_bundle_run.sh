#!/usr/bin/env bash
# On a GPU machine: kgrad's CUDA tests, then //bench:gpu_suite, from a bundle made
# by tools/gpu_bundle.sh (this file is its run.sh).
#   bash run.sh [OUT]    # OUT defaults to $OUT, else ./gpu-out
# Writes OUT/cuda_tests.log (every test's output), OUT/gpu.json and OUT/gpu.md,
# and ends with a line "cuda tests: N passed, N failed, N skipped". Exit status 0
# only when every test passed or skipped and the suite ran.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-$PWD/gpu-out}}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# (Python's tarfile where tar has no xz.)
tar -C "$work" -xJf "$here/kgrad-gpu.tar.xz" 2>/dev/null ||
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$here/kgrad-gpu.tar.xz" "$work" ||
  { echo "run.sh: cannot unpack $here/kgrad-gpu.tar.xz"; exit 1; }

# Debian's libstdc++/libgomp/libatomic only where this machine has none.
for f in "$work"/lib-fallback/*; do
  [ -e "$f" ] || continue
  ldconfig -p | grep -q " $(basename "$f") " || cp "$f" "$work/lib/"
done
# CUDA: the toolkit's libraries, and those of Python's nvidia-* wheels (cuDNN).
py=$(command -v python3 || true)
wheels=""
if [ -n "$py" ]; then
  wheels=$("$py" -c '
import glob, importlib.util, os
s = importlib.util.find_spec("nvidia")
roots = list(s.submodule_search_locations) if s and s.submodule_search_locations else []
print(":".join(d for r in roots for d in sorted(glob.glob(os.path.join(r, "*", "lib")))))' 2>/dev/null || true)
fi
export LD_LIBRARY_PATH="$work/lib:/usr/local/cuda/lib64${wheels:+:$wheels}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
missing=$(for b in "$work"/bin/*; do ldd "$b" | grep "not found"; done | sort -u)
[ -z "$missing" ] || { echo "run.sh: libraries not found:"; echo "$missing"; }

status=0
passed=0 failed=0 skipped=0
log="$out/cuda_tests.log"
: > "$log"
for t in "$work"/bin/*_test; do
  name=$(basename "$t")
  # KGRAD_SKIP_TESTS: names to leave out (e.g. the host-only emulated_kernels_test).
  case " ${KGRAD_SKIP_TESTS:-} " in *" $name "*) echo "$name: left out (KGRAD_SKIP_TESTS)"; continue;; esac
  # A hung kernel or driver call must not spend the machine's whole lease.
  timeout -k 5 "${KGRAD_TEST_TIMEOUT:-300}" "$t" --gtest_color=no > "$work/$name.log" 2>&1
  rc=$?
  [ "$rc" -ne 124 ] || echo "$name: timed out after ${KGRAD_TEST_TIMEOUT:-300} s" >> "$work/$name.log"
  cat "$work/$name.log" >> "$log"
  p=$(grep -c '^\[       OK \]' "$work/$name.log")
  # (the per-test lines end in "(N ms)"; the summary's repeat them without it)
  f=$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$work/$name.log")
  s=$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$work/$name.log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # a crash before gtest's summary
  echo "$name: $p passed, $f failed, $s skipped (exit $rc)"
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  [ "$rc" -eq 0 ] || status=1
done

# The suite: run where bench/torch_side.py is, with this machine's python3.
(cd "$work" && KGRAD_SUITE_PYTHON="${py:-/usr/bin/python3}" timeout -k 5 "${KGRAD_SUITE_TIMEOUT:-600}" ./bin/gpu_suite ${KGRAD_SUITE_ARGS:-} --out "$out") 2> "$work/suite.err"
suite_rc=$?
cp "$work/suite.err" "$out/suite.err" 2>/dev/null
tail -n 20 "$work/suite.err" | grep -v '^\[' || true
echo "gpu_suite: exit $suite_rc"
[ "$suite_rc" -eq 0 ] || status=1
echo "cuda tests: $passed passed, $failed failed, $skipped skipped"
exit $status
