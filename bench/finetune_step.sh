#!/usr/bin/env bash
# A fine-tuning step on torchvision's resnet18 (10 classes, batch 8, 224x224,
# training mode) in kgrad and in PyTorch, same machine, same run, interleaved
# rounds: the step of `kgrad train-artifacts --optimizer adamw` (loss, gradients,
# AdamW), kgrad's plain gradient step (the same loss and gradients, no update)
# and PyTorch's step (cross_entropy, backward, torch.optim.AdamW), 2 threads
# each. Prints the medians over the rounds and the ratios of issue 45's targets:
# artifacts / (plain step + the update's memory traffic at the machine's copy
# bandwidth) and artifacts / PyTorch.
#   bash bench/finetune_step.sh [OUT_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
rounds="${2:-3}"
mkdir -p "$out"
./bazelw build //bench:finetune_step_bench //tools:kgrad >&2
source bench/require_torch.sh finetune_step
/usr/bin/python3 bench/finetune_step_torch.py export "$out" 2> "$out/export.err"
rm -rf "$out/adamw"
bazel-bin/tools/kgrad train-artifacts "$out/resnet18_b8.onnx" --optimizer adamw --lr 1e-3 -o "$out/adamw" >&2
: > "$out/rounds.jsonl"
for r in $(seq "$rounds"); do
  /usr/bin/python3 bench/finetune_step_torch.py time >> "$out/rounds.jsonl"
  OMP_NUM_THREADS=2 bazel-bin/bench/finetune_step_bench "$out/adamw" --batch 8 >> "$out/rounds.jsonl"
done
/usr/bin/python3 - "$out/rounds.jsonl" <<'PY'
import json, statistics, subprocess, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(key):
    return statistics.median(r[key] for r in rows if key in r)
torch_ms, art, plain, mb = med("torch_adamw_step_ms"), med("artifacts_step_ms"), med("grad_step_ms"), med("update_mb")
# The update's memory traffic at the bandwidth of a large copy on this machine.
import numpy as np, time
a = np.ones(64 << 20, dtype=np.uint8); b = np.ones_like(a)  # touched: no page faults timed
np.copyto(b, a)
t = time.perf_counter()
for _ in range(5): np.copyto(b, a)
gbs = 5 * 2 * a.nbytes / (time.perf_counter() - t) / 1e9
traffic_ms = mb / 1e3 / gbs * 1e3
print(f"| rounds | kgrad artifacts (AdamW) | kgrad plain gradient | update traffic | PyTorch AdamW | "
      f"artifacts / (plain + traffic) | artifacts / PyTorch |")
print("|--:|--:|--:|--:|--:|--:|--:|")
print(f"| {len(rows) // 2} | {art:.1f} ms | {plain:.1f} ms | {mb:.0f} MB = {traffic_ms:.1f} ms at {gbs:.1f} GB/s | "
      f"{torch_ms:.1f} ms | {art / (plain + traffic_ms):.3f} | {art / torch_ms:.3f} |")
PY
