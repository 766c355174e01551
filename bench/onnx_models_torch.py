#!/usr/bin/python3
"""Exports the models of bench/onnx_models.sh to OUT_DIR/NAME.onnx and times them
in PyTorch (forward, and a training step: backward of <ct, out> w.r.t. every
weight), medians under the suite's rule (2 warm-up runs, then repetitions for 3 s,
5 to 30 of them), 2 threads. One JSON line per model on stdout.
KGRAD_BENCH_MODELS=a,b keeps only those models."""
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torchvision


def median_ms(fn):
    for _ in range(2):
        fn()
    times, start = [], time.perf_counter()
    while len(times) < 30 and (len(times) < 5 or time.perf_counter() - start < 3):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[len(times) // 2]


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(64, 64, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


class Encoder(nn.Module):
    """4 layers of nn.TransformerEncoderLayer, d_model 256, 4 heads, batch first."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def models():
    tv = torchvision.models
    yield "resnet18_b1", tv.resnet18(), torch.randn(1, 3, 224, 224), True
    yield "resnet18_b8", tv.resnet18(), torch.randn(8, 3, 224, 224), True
    yield "mobilenet_v2_b1", tv.mobilenet_v2(), torch.randn(1, 3, 224, 224), True
    yield "mobilenet_v2_b8", tv.mobilenet_v2(), torch.randn(8, 3, 224, 224), True
    # Evaluation mode (dropout off) so that every runtime computes the same thing.
    yield "transformer4_d256_b8x128", Encoder(), torch.randn(8, 128, 256), False
    yield "lstm2_h64_s50_b8", Lstm(), torch.randn(8, 50, 64), False
    # A video model: 3-D convolutions and pooling, training mode, one 8-frame clip.
    yield "r3d_18_b1x8", tv.video.r3d_18(), torch.randn(1, 3, 8, 112, 112), True


def main():
    out_dir = sys.argv[1]
    torch.set_num_threads(2)
    torch.manual_seed(0)
    only = set(filter(None, os.environ.get("KGRAD_BENCH_MODELS", "").split(",")))
    for name, model, x, train in models():
        if only and name not in only:
            continue
        path = os.path.join(out_dir, name + ".onnx")
        model.train(train)
        mode = torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL
        torch.onnx.export(model, (x,), path, training=mode, do_constant_folding=False)
        with torch.no_grad():
            fwd = median_ms(lambda: model(x))
        ct = torch.randn(model(x).shape)
        params = list(model.parameters())

        def step():
            out = model(x)
            torch.autograd.grad(out, params, ct)

        print(json.dumps({"model": name, "forward_ms": fwd, "step_ms": median_ms(step),
                          "dims": "x".join(str(d) for d in x.shape),
                          "torch": torch.__version__,
                          "blas": torch.__config__.show().count("OpenBLAS") > 0}), flush=True)


if __name__ == "__main__":
    main()
