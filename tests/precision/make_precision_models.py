#!/usr/bin/python3
"""Exports the training-mode classifiers of the float32-precision study (issue 47)
into DIR (default /tmp/kgrad-precision): torchvision's googlenet, mnasnet1_0 and
mobilenet_v2 with random weights, BatchNorm in training mode (batch statistics)
with affine parameters drawn about 1, Dropout at p = 0, and a cross-entropy loss
against integer targets, so that each file maps (x, target) to one scalar. The
batch axis is symbolic ("batch"), so one file runs at batch 2 and 3.

  make_precision_models.py [--dir DIR] [--size 128] [NAME...]

writes DIR/NAME.onnx and DIR/NAME.pt (the torch module, for the reference runs of
compare_precision.py). Needs Debian's /usr/bin/python3 with python3-torch and
python3-torchvision; the files are large (14-27 MB) and are not committed.
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

MODELS = ("googlenet", "mnasnet1_0", "mobilenet_v2")
CLASSES = 1000


class WithLoss(nn.Module):
    """model(x) followed by cross-entropy; a model with auxiliary heads in
    training mode (googlenet) adds 0.3 of each head's loss, as torchvision's
    reference training does."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, target):
        out = self.model(x)
        if isinstance(out, torch.Tensor):
            return F.cross_entropy(out, target)
        loss = F.cross_entropy(out[0], target)
        for aux in out[1:]:
            if aux is not None:
                loss = loss + 0.3 * F.cross_entropy(aux, target)
        return loss


def build(name):
    tv = torchvision.models
    if name == "googlenet":
        model = tv.googlenet(weights=None, aux_logits=True, init_weights=True)
    else:
        model = getattr(tv, name)(weights=None)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return WithLoss(model)


def export(name, out_dir, size):
    torch.manual_seed(0)
    model = build(name).train()
    x = torch.randn(2, 3, size, size)
    target = torch.randint(0, CLASSES, (2,))
    path = os.path.join(out_dir, f"{name}.onnx")
    # Export a copy: a training-mode export runs the model once, which moves BN's
    # running statistics (they do not enter a training-mode output, but the saved
    # module should be the exported one).
    exported = build(name)
    exported.load_state_dict(model.state_dict())
    torch.onnx.export(exported.train(), (x, target), path, opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x", "target"], output_names=["loss"],
                      dynamic_axes={"x": {0: "batch"}, "target": {0: "batch"}})
    torch.save(model.state_dict(), os.path.join(out_dir, f"{name}.pt"))
    print(f"{name}: {os.path.getsize(path)} bytes, {size}x{size}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", default="/tmp/kgrad-precision")
    p.add_argument("--size", type=int, default=128)
    p.add_argument("names", nargs="*", default=list(MODELS))
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    for name in a.names:
        export(name, a.dir, a.size)


if __name__ == "__main__":
    main()
