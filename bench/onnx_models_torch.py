#!/usr/bin/python3
"""Exports the models of bench/onnx_models.sh to OUT_DIR/NAME.onnx and times them
in PyTorch (forward, and a training step: backward of <ct, out> w.r.t. every
weight), medians under the suite's rule (2 warm-up runs, then repetitions for 3 s,
5 to 30 of them), 2 threads. One JSON line per model on stdout."""
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


def models():
    tv = torchvision.models
    yield "resnet18_b8", tv.resnet18(), torch.randn(8, 3, 224, 224), True
    yield "mobilenet_v2_b8", tv.mobilenet_v2(), torch.randn(8, 3, 224, 224), True
    yield "lstm2_h64_s50_b8", Lstm(), torch.randn(8, 50, 64), False


def main():
    out_dir = sys.argv[1]
    torch.set_num_threads(2)
    torch.manual_seed(0)
    for name, model, x, train in models():
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
                          "torch": torch.__version__,
                          "blas": torch.__config__.show().count("OpenBLAS") > 0}), flush=True)


if __name__ == "__main__":
    main()
