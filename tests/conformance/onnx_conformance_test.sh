#!/usr/bin/env bash
# Generates ONNX's node tests with Debian's python3-onnx and runs
# conformance_runner on them (see BUILD.bazel). The runner's exit status is the
# test's: 1 on any wrong result or crash. Arguments go to the runner.
set -uo pipefail
here="$TEST_SRCDIR/$TEST_WORKSPACE/tests/conformance"
python=/usr/bin/python3
tmp="${TEST_TMPDIR:-$(mktemp -d)}"

skip() {
  echo "SKIPPED: $1 (./bazelw installs python3-onnx; run it once, then test again)"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    printf '%s\n' '<?xml version="1.0" encoding="UTF-8"?>' \
      '<testsuites><testsuite name="onnx_conformance" tests="1" skipped="1">' \
      "<testcase name=\"onnx_conformance\"><skipped message=\"$1\"/></testcase>" \
      '</testsuite></testsuites>' > "$XML_OUTPUT_FILE"
  fi
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
}

[ -x "$python" ] || skip "$python is not installed"
# Absent, not broken: an onnx that is installed but fails to import fails the test.
"$python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("onnx") is None)' 2>/dev/null \
  || skip "$python has no onnx package"

# Anything else going wrong in generation is a failure, not a skip.
"$python" "$here/generate.py" "$tmp/onnx" || { echo "FAIL: generate.py failed"; exit 1; }
"$here/conformance_runner" "$tmp/onnx" --jobs=2 --timeout=30 --json="${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp}/conformance.json" "$@"
