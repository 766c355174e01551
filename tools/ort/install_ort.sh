#!/usr/bin/env bash
# Installs ONNX Runtime 1.30 for Node (npm onnxruntime-node; its linux-x64 library
# ships inside the package, so the install script, which only fetches optional GPU
# parts, is skipped) into a cache folder, once, and prints that folder.
#   KGRAD_ORT_DIR   the folder (default: ~/.cache/kgrad-ort of the real user)
set -euo pipefail
home=$(getent passwd "$(id -u)" | cut -d: -f6)
dir="${KGRAD_ORT_DIR:-$home/.cache/kgrad-ort}"
pkg="$dir/node_modules/onnxruntime-node"
if [ ! -f "$pkg/package.json" ] || ! grep -q '"version": "1.30.0"' "$pkg/package.json"; then
  command -v npm >/dev/null || { echo "install_ort: npm is not installed" >&2; exit 2; }
  mkdir -p "$dir"
  (cd "$dir" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
     onnxruntime-node@1.30.0 >&2)
fi
echo "$dir"
