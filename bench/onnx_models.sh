#!/usr/bin/env bash
# Imported PyTorch models in kgrad beside PyTorch and ONNX Runtime, same machine,
# same run, same .onnx files: torchvision resnet18 and mobilenet_v2 (batch 1 and 8,
# 224x224, training mode), a 4-layer nn.TransformerEncoder (d 256, batch 8 x 128
# tokens, eval mode), a 2-layer nn.LSTM (hidden 64, 50 steps, batch 8) and
# torchvision's r3d_18 video ResNet (one 8-frame 112x112 clip, training mode;
# KGRAD_BENCH_MODELS=r3d_18_b1x8 runs it alone). Prints a
# Markdown table of the medians and the ratios. ONNX Runtime 1.30 (forward only,
# 2 intra-op threads) comes from npm (tools/ort/install_ort.sh); without npm its
# column says n/a.
#   bash bench/onnx_models.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
./bazelw build //bench:onnx_models_bench >&2
# The exporter needs Debian's torch and torchvision.
source bench/require_torch.sh onnx_models
if ! /usr/bin/python3 bench/onnx_models_torch.py "$out" 2> "$out/torch.err" > "$out/torch.jsonl" \
    || [ ! -s "$out/torch.jsonl" ]; then
  echo "onnx_models: exporting the models with PyTorch failed:" >&2
  tail -5 "$out/torch.err" >&2
  exit 1
fi
args=()
while read -r line; do
  name=$(sed 's/.*"model": "\([^"]*\)".*/\1/' <<<"$line")
  args+=("$name=$out/$name.onnx")
done < "$out/torch.jsonl"
bazel-bin/bench/onnx_models_bench "${args[@]}" > "$out/kgrad.jsonl"
: > "$out/ort.jsonl"
if ort_dir=$(bash tools/ort/install_ort.sh 2>/dev/null); then
  while read -r line; do
    name=$(sed 's/.*"model": "\([^"]*\)".*/\1/' <<<"$line")
    dims=$(sed 's/.*"dims": "\([^"]*\)".*/\1/' <<<"$line")
    t=$(NODE_PATH="$ort_dir/node_modules" node tools/ort/ort_run.js time "$out/$name.onnx" "$dims") \
      && echo "{\"model\": \"$name\", ${t#\{}" >> "$out/ort.jsonl" \
      || echo "onnx_models: ONNX Runtime failed on $name" >&2
  done < "$out/torch.jsonl"
fi
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
torch = {j["model"]: j for j in map(json.loads, open(f"{out}/torch.jsonl"))}
kg = {j["model"]: j for j in map(json.loads, open(f"{out}/kgrad.jsonl"))}
ort = {j["model"]: j for j in map(json.loads, open(f"{out}/ort.jsonl"))}
print("| model | kgrad forward | ORT forward | kgrad/ORT | PyTorch forward | kgrad/PyTorch "
      "| kgrad step | PyTorch step | kgrad/PyTorch |")
print("|---|---|---|---|---|---|---|---|---|")
for name, t in torch.items():
    k = kg[name]
    o = ort.get(name)
    ort_ms = f"{o['forward_ms']:.1f} ms" if o else "n/a"
    ort_ratio = f"{k['forward_ms'] / o['forward_ms']:.2f}" if o else "n/a"
    print(f"| {name} | {k['forward_ms']:.1f} ms | {ort_ms} | {ort_ratio} | {t['forward_ms']:.1f} ms | "
          f"{k['forward_ms'] / t['forward_ms']:.2f} | {k['step_ms']:.1f} ms | {t['step_ms']:.1f} ms | "
          f"{k['step_ms'] / t['step_ms']:.2f} |")
PY
