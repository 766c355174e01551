#!/usr/bin/env bash
# Runs one fuzz target for a while on a scratch copy of its corpus.
#   fuzz/run.sh TARGET SECONDS [extra libFuzzer flags...]
# Both targets start from the one seed corpus, fuzz/corpus/load; the pipeline
# target reads a format byte first (0 binary, 1 text), which this script puts in
# front of each seed (0 for .pb, 1 for .pbtxt) in $out/seeds.
# TARGET: load_fuzzer or pipeline_fuzzer. Builds it with --config=fuzz (clang-14,
# -fsanitize=fuzzer,address,undefined). Exits non-zero on a crash, leak or
# timeout; the reproducer is left in $KGRAD_FUZZ_OUT (default /tmp/kgrad-fuzz)/
# and printed. Reproduce: bazel-<...>/fuzz/TARGET CRASH_FILE.
set -uo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: fuzz/run.sh TARGET SECONDS [flags...]}
seconds=${2:-60}
shift 2 || shift $#

case "$target" in
  load_fuzzer|pipeline_fuzzer) ;;
  *) echo "unknown fuzz target '$target'" >&2; exit 2 ;;
esac

./bazelw build --config=fuzz "//fuzz:$target" >&2 || { echo "fuzz build failed" >&2; exit 1; }
bin="$(./bazelw info --config=fuzz bazel-bin 2>/dev/null)/fuzz/$target"

out="${KGRAD_FUZZ_OUT:-/tmp/kgrad-fuzz}/$target"
mkdir -p "$out/corpus"
seeds="$PWD/fuzz/corpus/load"
if [ "$target" = pipeline_fuzzer ]; then
  rm -rf "$out/seeds" && mkdir -p "$out/seeds"
  for f in "$seeds"/*; do
    case "$f" in *.pbtxt) byte='\001' ;; *) byte='\000' ;; esac
    { printf "$byte"; cat "$f"; } > "$out/seeds/$(basename "$f")"
  done
  seeds="$out/seeds"
fi
# New inputs go to the scratch corpus; the checked-in seeds are only read. The
# fuzzer runs in $out: with -jobs=N libFuzzer writes fuzz-<job>.log to its
# working directory (old ones are cleared first, so the total below is this run's).
rm -f "$out"/fuzz-*.log
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
summary="^(#[0-9]+ +DONE|stat::number_of_executed_units|SUMMARY|==[0-9]+==ERROR|fuzz invariant)"
(cd "$out" && "$bin" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$out/" "$@" "$out/corpus" "$seeds") 2>&1 |
  tee "$out/log" | grep -E "$summary" >&2
rc=${PIPESTATUS[0]}
if ls "$out"/fuzz-*.log >/dev/null 2>&1; then
  total=$(grep -h "^stat::number_of_executed_units" "$out"/fuzz-*.log | awk '{s += $2} END {print s + 0}')
  echo "$target: $total executions in all jobs (logs $out/fuzz-*.log)" >&2
  # A job's crash is in its own log: fail on it like on the fuzzer's own exit status.
  if grep -qE "^(SUMMARY|==[0-9]+==ERROR)" "$out"/fuzz-*.log; then rc=1; fi
fi
if [ "$rc" -ne 0 ]; then
  echo "$target: FAILED (exit $rc); log $out/log; reproducers:" >&2
  ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* "$out"/oom-* 2>/dev/null >&2
fi
exit "$rc"
