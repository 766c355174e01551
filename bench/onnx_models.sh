#!/usr/bin/env bash
# Imported PyTorch models in kgrad beside PyTorch, same machine, same run:
# torchvision resnet18 and mobilenet_v2 (batch 8, 224x224, training mode) and a
# 2-layer nn.LSTM (hidden 64, 50 steps, batch 8). Prints a Markdown table of the
# medians and the kgrad/PyTorch ratios.
#   bash bench/onnx_models.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
./bazelw build //bench:onnx_models_bench >&2
/usr/bin/python3 bench/onnx_models_torch.py "$out" 2>/dev/null > "$out/torch.jsonl"
args=()
while read -r line; do
  name=$(sed 's/.*"model": "\([^"]*\)".*/\1/' <<<"$line")
  args+=("$name=$out/$name.onnx")
done < "$out/torch.jsonl"
bazel-bin/bench/onnx_models_bench "${args[@]}" > "$out/kgrad.jsonl"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
torch = {j["model"]: j for j in map(json.loads, open(f"{out}/torch.jsonl"))}
kg = {j["model"]: j for j in map(json.loads, open(f"{out}/kgrad.jsonl"))}
print("| model | kgrad forward | PyTorch forward | ratio | kgrad step | PyTorch step | ratio |")
print("|---|---|---|---|---|---|---|")
for name, t in torch.items():
    k = kg[name]
    print(f"| {name} | {k['forward_ms']:.1f} ms | {t['forward_ms']:.1f} ms | "
          f"{k['forward_ms'] / t['forward_ms']:.2f} | {k['step_ms']:.1f} ms | {t['step_ms']:.1f} ms | "
          f"{k['step_ms'] / t['step_ms']:.2f} |")
PY
