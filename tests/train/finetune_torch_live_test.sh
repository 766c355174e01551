#!/usr/bin/env bash
# finetune_torch_test on torchvision's resnet18 (10 classes, 4 images of 64x64)
# and a d64 TransformerEncoder, exported and trained by torch here and now
# (make_finetune_fixtures.py --full). Skipped, and says so, only where
# /usr/bin/python3 or its torch, torchvision or onnx is missing.
set -uo pipefail
here="$TEST_SRCDIR/$TEST_WORKSPACE/tests/train"
python=/usr/bin/python3
tmp="${TEST_TMPDIR:-$(mktemp -d)}"

skip() {
  echo "SKIPPED: $1 (apt-get install python3-torch python3-torchvision python3-onnx, then test again)"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    printf '%s\n' '<?xml version="1.0" encoding="UTF-8"?>' \
      '<testsuites><testsuite name="finetune_torch_live" tests="1" skipped="1">' \
      "<testcase name=\"finetune_torch_live\"><skipped message=\"$1\"/></testcase>" \
      '</testsuite></testsuites>' > "$XML_OUTPUT_FILE"
  fi
  exit 0
}

[ -x "$python" ] || skip "$python is not installed"
for m in torch torchvision onnx; do
  "$python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$m') is None)" 2>/dev/null \
    || skip "$python has no $m package"
done
cd "$TEST_SRCDIR/$TEST_WORKSPACE" || exit 1
"$python" "$here/make_finetune_fixtures.py" --full "$tmp/full" > "$tmp/generate.log" 2>&1 \
  || { cat "$tmp/generate.log"; echo "FAIL: make_finetune_fixtures.py failed"; exit 1; }
grep -v Warning "$tmp/generate.log" | grep -v "_C._jit" || true
KGRAD_FINETUNE_DIR="$tmp/full" KGRAD_FINETUNE_MODELS=resnet18,encoder "$here/finetune_torch_test"
