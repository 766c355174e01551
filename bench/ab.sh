#!/usr/bin/env bash
# Two kgrad binaries on one graph, alternated, for judging a change on a noisy
# machine (where single runs move by 2x with the load):
#   bash bench/ab.sh OLD_KGRAD NEW_KGRAD FILE [ROUNDS] [-- BENCH_ARGS...]
# Each round runs `kgrad bench FILE --repeat $REPEAT --warmup 3 BENCH_ARGS` with
# OLD then NEW; the fastest run of each over all rounds is compared (noise only
# adds time). KEY=step compares the training step (give --grad); the default is
# the forward. The same binary against itself gives 0.9-1.1 here.
set -euo pipefail
old=$1 new=$2 file=$3
rounds=${4:-10}
shift $(( $# >= 4 ? 4 : 3 ))
[ "${1:-}" = "--" ] && shift
key=${KEY:-forward}
repeat=${REPEAT:-50}
fastest() {  # fastest BIN: the `min` field of the KEY line
  "$1" bench "$file" --repeat "$repeat" --warmup 3 "${@:2}" |
    awk -v k="$key" '$1 == k { gsub(",", "", $6); print $6 }'
}
a=inf b=inf
for _ in $(seq 1 "$rounds"); do
  a=$(printf '%s\n%s\n' "$a" "$(fastest "$old" "$@")" | sort -g | head -1)
  b=$(printf '%s\n%s\n' "$b" "$(fastest "$new" "$@")" | sort -g | head -1)
done
printf '%s %s: old %s ms, new %s ms, old/new %.3f\n' "$file" "$key" "$a" "$b" \
  "$(echo "$a / $b" | bc -l)"
