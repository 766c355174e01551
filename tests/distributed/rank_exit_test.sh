#!/usr/bin/env bash
# A rank that leaves early (cleanly, or by dying) makes every other rank fail
# with a Status within the collective timeout (3 s here), never hang.
set -uo pipefail
run_mpi=$1
program=$2
ranks=3
failures=0
for mode in leave die; do
  extra=()
  # Without recovery mpirun ends the whole job when a rank dies; with it the
  # survivors carry on and must notice by themselves.
  [ "$mode" = die ] && extra=(--enable-recovery)
  start=$(date +%s)
  out=$(KGRAD_MPIRUN_FLAGS="${extra[*]}" "$run_mpi" "$ranks" "$program" "$mode" 2>&1)
  elapsed=$(( $(date +%s) - start ))
  for ((r = 0; r < ranks - 1; r++)); do
    if ! grep -q "rank $r: first DEADLINE_EXCEEDED after [0-9.]* s: mpi rank $r of $ranks: MPI [a-z_ ()-]* did not complete within the collective timeout (3 s)" <<<"$out"; then
      echo "FAIL ($mode): rank $r did not report the timeout"; failures=$((failures + 1))
    fi
    if ! grep -q "rank $r: then FAILED_PRECONDITION: mpi rank $r of $ranks is broken by an earlier failure" <<<"$out"; then
      echo "FAIL ($mode): rank $r's next collective did not fail at once"; failures=$((failures + 1))
    fi
  done
  if [ "$elapsed" -gt 60 ]; then
    echo "FAIL ($mode): the job took ${elapsed} s"; failures=$((failures + 1))
  fi
  echo "== $mode: ${elapsed} s"
  grep "^rank" <<<"$out"
  [ "$failures" -eq 0 ] || echo "$out"
done
[ "$failures" -eq 0 ] && echo PASSED
exit $((failures > 0))
