#!/usr/bin/python3
"""Writes the dynamic-axes model fixtures under tests/onnx/data/ (run from the repo
root with Debian's /usr/bin/python3 and python3-torch, python3-torchvision,
python3-onnx; `make_dynamic_fixtures.py NAME...` writes only those). Each model is
exported once with dynamic axes (ONNX dim_params "batch", "seq") and evaluated at
several sizes, which kgrad must run with one imported graph:

  NAME.onnx               the model, inference mode, dynamic axes
  NAME_<size>_in0.npy     the input at one size (size: b3 or b3s17)
  NAME_<size>_out.npy     the output
  NAME_<size>_ct.npy      a random output cotangent
  NAME_<size>_din0.npy    d<ct, out>/d input

The references run in float64 (a float64 copy of the model) and are stored in
float32, the model's dtype. The models are small so that the files stay small:
a ResNet with torchvision's forward and BasicBlocks at widths 8-64, a 2-layer
nn.TransformerEncoder (d_model 16, 2 heads, batch_first), a 2-layer nn.LSTM,
the last step out[:, -1] of a batch-first nn.LSTM and a scripted loop that builds
Python lists of tensors (dyn_list_cat: ONNX sequence ops).
"""
import copy
import os
import sys
from typing import List

import numpy as np
import torch
import torch.nn as nn
from torchvision.models import resnet as tv_resnet

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_model_fixtures import randomize_norms  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class TinyResNet(tv_resnet.ResNet):
    """torchvision's ResNet (its forward: stem, four stages, avgpool, flatten, fc) with
    one BasicBlock per stage at widths 8, 16, 32, 64 instead of 64 ... 512."""

    def __init__(self, classes=10):
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes, self.dilation, self.groups, self.base_width = 8, 1, 1, 64
        self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(tv_resnet.BasicBlock, 8, 1)
        self.layer2 = self._make_layer(tv_resnet.BasicBlock, 16, 1, stride=2)
        self.layer3 = self._make_layer(tv_resnet.BasicBlock, 32, 1, stride=2)
        self.layer4 = self._make_layer(tv_resnet.BasicBlock, 64, 1, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(64, classes)


class LstmOutput(nn.Module):
    """nn.LSTM's output sequence (h0 = c0 = 0, shaped by the batch at run time)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2)

    def forward(self, x):
        return self.lstm(x)[0]


class LstmLast(nn.Module):
    """The last step of a batch-first nn.LSTM's output, out[:, -1]: a Gather of
    index -1 on the symbolic sequence axis."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 12, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0][:, -1]


class ListCat(nn.Module):
    """A Python list of tensors grown over the sequence axis and concatenated.
    Exported scripted (tracing would unroll the loops), the lists are ONNX
    sequences: SequenceEmpty, then SequenceInsert in a Loop of seq trips;
    torch.cat / torch.stack of the list are ConcatFromSequence (new_axis 0, 1);
    outs[-1] is SequenceAt; torch.split is SplitToSequence, and the running
    product over its pieces a second Loop carrying a SequenceConstruct, its trip
    count from SequenceLength."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 6)

    def forward(self, x):
        outs: List[torch.Tensor] = []
        for t in range(x.size(1)):
            # Scaled by the step: the loop counter is also used as a value (Cast).
            outs.append(torch.tanh(self.lin(x[:, t])) * (1.0 + 0.1 * t))
        parts = torch.split(outs[-1], 2, dim=-1)
        prods = [parts[0]]
        for i in range(1, len(parts)):
            prods.append(prods[-1] * parts[i])
        # [batch, 6 seq + 6 + 6]
        return torch.cat([torch.cat(outs, dim=1), torch.stack(outs, 0).sum(0),
                          torch.cat(prods, dim=1)], dim=1)


def ops_of(graph):
    """The op types of `graph` and of its subgraphs (Loop and If bodies)."""
    ops = set()
    for n in graph.node:
        ops.add(n.op_type)
        for a in n.attribute:
            for g in list(a.graphs) + ([a.g] if a.HasField("g") else []):
                ops |= ops_of(g)
    return ops


def save(name, suffix, t):
    np.save(os.path.join(OUT, f"{name}_{suffix}.npy"), t.detach().numpy().astype(np.float32))


def export(name, model, example, axes, out_axes=None):
    """Exports `model` (eval mode) with dynamic `axes` ({input axis: dim_param};
    the output's are `out_axes`, default the same)."""
    model.eval()
    path = os.path.join(OUT, f"{name}.onnx")
    torch.onnx.export(copy.deepcopy(model), (example,), path, opset_version=14,
                      do_constant_folding=False, input_names=["x0"], output_names=["out"],
                      dynamic_axes={"x0": axes, "out": axes if out_axes is None else out_axes})
    import onnx
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    ops = sorted(ops_of(proto.graph))
    print(f"{name}: {os.path.getsize(path)} bytes, ops {' '.join(ops)}")


def reference(name, size, model, x):
    """Writes the input, torch's output, a cotangent and d<ct, out>/dx at one size."""
    model = copy.deepcopy(model).double().eval()
    xd = x.double().clone().requires_grad_(True)
    out = model(xd)
    ct = torch.randn(out.shape, dtype=torch.float64)
    (dx,) = torch.autograd.grad(out, [xd], ct)
    for suffix, t in (("in0", x), ("out", out), ("ct", ct), ("din0", dx)):
        save(name, f"{size}_{suffix}", t)


def main():
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])  # model names to write (default: all)

    if not only or "dyn_resnet" in only:
        torch.manual_seed(0)
        resnet = randomize_norms(TinyResNet())
        export("dyn_resnet", resnet, torch.randn(2, 3, 32, 32), {0: "batch"})
        for b in (1, 3, 8):
            reference("dyn_resnet", f"b{b}", resnet, torch.randn(b, 3, 32, 32))

    sizes = ((1, 5), (3, 17), (8, 5))  # (batch, sequence)
    if not only or "dyn_transformer" in only:
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        encoder = randomize_norms(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False))
        export("dyn_transformer", encoder, torch.randn(2, 5, 16), {0: "batch", 1: "seq"})
        for b, s in sizes:
            reference("dyn_transformer", f"b{b}s{s}", encoder, torch.randn(b, s, 16))

    if not only or "dyn_lstm" in only:
        torch.manual_seed(0)
        lstm = LstmOutput()
        export("dyn_lstm", lstm, torch.randn(5, 2, 8), {0: "seq", 1: "batch"})
        for b, s in sizes:
            reference("dyn_lstm", f"b{b}s{s}", lstm, torch.randn(s, b, 8))

    if not only or "dyn_lstm_last" in only:
        torch.manual_seed(0)
        last = LstmLast()
        export("dyn_lstm_last", last, torch.randn(2, 5, 8), {0: "batch", 1: "seq"}, {0: "batch"})
        for b, s in sizes:
            reference("dyn_lstm_last", f"b{b}s{s}", last, torch.randn(b, s, 8))

    if not only or "dyn_list_cat" in only:
        torch.manual_seed(0)
        cat = ListCat()
        # Exported scripted; the references run the module itself.
        export("dyn_list_cat", torch.jit.script(cat), torch.randn(2, 5, 8), {0: "batch", 1: "seq"},
               {0: "batch", 1: "width"})
        for b, s in sizes:
            reference("dyn_list_cat", f"b{b}s{s}", cat, torch.randn(b, s, 8))


if __name__ == "__main__":
    main()
