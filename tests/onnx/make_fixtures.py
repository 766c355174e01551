#!/usr/bin/python3
"""Writes the ONNX import fixtures under tests/onnx/data/ (run from the repo root
with Debian's /usr/bin/python3 and python3-torch + python3-onnx installed; the test
suite itself needs neither).

For each model NAME:
  NAME.onnx            the model, exported by torch.onnx (fixed seed, float32)
  NAME_in<i>.npy       inputs
  NAME_out.npy         the output
  NAME_ct.npy          a random output cotangent
  NAME_din<i>.npy      d<ct, out>/d input i  (torch.autograd)
  NAME_dw_<param>.npy  d<ct, out>/d parameter (ONNX initializer name)
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return torch.tanh(self.fc2(F.relu(self.fc1(x))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, stride=1, padding=1, groups=2)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        y = self.bn(F.relu(self.conv1(x)))  # BN after ReLU: the exporter keeps it
        y = F.max_pool2d(y, 2)
        y = F.avg_pool2d(F.relu(self.conv2(y)), 2)
        y = F.adaptive_avg_pool2d(y, 1)
        return self.fc(torch.flatten(y, 1))


class Block(nn.Module):
    """Pre-norm transformer block: attention with 2 heads, GELU MLP."""

    def __init__(self, d=8, heads=2, ff=16):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // h) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Branch(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        if x.sum() > 0:
            y = torch.tanh(x @ self.w)
        else:
            y = x * 2.0 - 1.0
        return y


class Rnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3) * 0.5)
        self.u = nn.Parameter(torch.randn(3, 3) * 0.5)

    def forward(self, x):
        h = torch.zeros_like(x[0])
        for i in range(x.shape[0]):
            h = torch.tanh(x[i] @ self.w + h @ self.u)
        return h


def save(name, suffix, t):
    np.save(os.path.join(OUT, f"{name}_{suffix}.npy"), t.detach().numpy().astype(np.float32))


def export(name, model, inputs, opset, script=False):
    torch.manual_seed(1)
    model.eval()
    path = os.path.join(OUT, f"{name}.onnx")
    m = torch.jit.script(model) if script else model
    torch.onnx.export(m, tuple(inputs), path, opset_version=opset, do_constant_folding=False,
                      input_names=[f"x{i}" for i in range(len(inputs))], output_names=["out"])
    import onnx
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    initializers = {i.name for i in proto.graph.initializer}
    ops = sorted({n.op_type for n in proto.graph.node})

    xs = [x.clone().requires_grad_(True) for x in inputs]
    out = model(*xs)
    ct = torch.randn(out.shape)
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(out, xs + list(params.values()), ct, allow_unused=True)
    grads = [torch.zeros_like(v) if g is None else g for v, g in zip(xs + list(params.values()), grads)]
    for i, x in enumerate(inputs):
        save(name, f"in{i}", x)
        save(name, f"din{i}", grads[i])
    save(name, "out", out)
    save(name, "ct", ct)
    for (pname, _), g in zip(params.items(), grads[len(xs):]):
        if pname not in initializers:
            sys.exit(f"{name}: parameter {pname} is not an initializer ({sorted(initializers)})")
        save(name, f"dw_{pname}", g)
    print(f"{name}: opset {opset}, {os.path.getsize(path)} bytes, ops {' '.join(ops)}")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    export("mlp", Mlp(), [torch.randn(2, 4)], 13)
    torch.manual_seed(0)
    cnn = Cnn()
    with torch.no_grad():  # non-trivial running statistics
        cnn.bn.running_mean.uniform_(-0.5, 0.5)
        cnn.bn.running_var.uniform_(0.5, 1.5)
        cnn.bn.weight.uniform_(0.5, 1.5)
        cnn.bn.bias.uniform_(-0.5, 0.5)
    export("cnn", cnn, [torch.randn(2, 2, 8, 8)], 13)
    torch.manual_seed(0)
    block = Block()
    with torch.no_grad():  # distinct LayerNorm parameters (equal ones would be merged)
        for ln in (block.ln1, block.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 4, 8)
    export("block17", block, [x], 17)  # LayerNormalization
    export("block13", block, [x], 13)  # LayerNorm decomposed (ReduceMean, Pow, Sqrt, ...)
    torch.manual_seed(0)
    branch = Branch()
    export("if_pos", branch, [torch.rand(2, 3)], 15, script=True)
    export("if_neg", branch, [-torch.rand(2, 3)], 15, script=True)
    torch.manual_seed(0)
    export("loop", Rnn(), [torch.randn(4, 2, 3)], 15, script=True)


if __name__ == "__main__":
    main()
