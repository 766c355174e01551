# Sourced by the bench scripts that export models with PyTorch (onnx_models.sh,
# finetune_step.sh): installs Debian's torch, torchvision and onnx for
# /usr/bin/python3 with apt-get when they are missing (Debian packages only, as
# bazelw installs). $1 names the script in its message.
if ! /usr/bin/python3 -c "import torch, torchvision, onnx" 2>/dev/null; then
  echo "$1: installing python3-torch python3-torchvision python3-onnx with apt-get" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3-torch python3-torchvision python3-onnx >/dev/null
fi
