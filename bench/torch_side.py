#!/usr/bin/python3
"""The PyTorch side of kgrad's benchmark suite (bench/suite_main.cc runs it).

Usage: /usr/bin/python3 bench/torch_side.py SPEC.json RESULT.json

SPEC.json is written by the suite: shapes, timing budget, and the very tensors
kgrad used (raw little-endian float32 files), so both sides compute the same
losses from the same weights and inputs (the losses are reported back and
compared). SPEC's "device" (default "cpu") may be "cuda": the MLP and the
conv net then run on the GPU with inputs taken from host memory and the loss
and gradients returned to it, as kgrad's executor does at a graph's boundary
(TF32 off on both sides); "programs" (default all) picks the scenarios. Each
finished stage prints "stage NAME" on stdout (the suite's
progress bar); RESULT.json is one flat object of numbers keyed like the kgrad
side ("mlp.step_ms", ...) plus "version". Timings: median of repetitions after
warm-up, as in the suite.
"""

import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.autograd.forward_ad as fwad
import torch.nn.functional as F


def stage(name):
    print("stage " + name, flush=True)


class Timer:
    """Median wall time of fn() in ms: warm-up runs, then as many repetitions as
    fit in the budget, clamped to [min_reps, max_reps]."""

    def __init__(self, spec, sync=lambda: None):
        self.sync = sync  # waits for queued GPU work
        self.warmup = spec["warmup"]
        self.budget_s = spec["budget_s"]
        self.min_reps = spec["min_reps"]
        self.max_reps = spec["max_reps"]

    def median_ms(self, fn, max_reps=None):
        for _ in range(self.warmup):
            fn()
        self.sync()
        times = []
        limit = self.max_reps if max_reps is None else min(max_reps, self.max_reps)
        start = time.perf_counter()
        while len(times) < limit:
            t0 = time.perf_counter()
            fn()
            self.sync()
            times.append((time.perf_counter() - t0) * 1e3)
            if len(times) >= self.min_reps and time.perf_counter() - start > self.budget_s:
                break
        return statistics.median(times)


def load(spec, tensors, name):
    entry = tensors[name]
    data = np.fromfile(spec["tensor_dir"] + "/" + entry["file"], dtype="<f4")
    return torch.from_numpy(data.reshape(entry["shape"]).copy())


def cross_entropy(logits, labels):
    # kgrad's softmax_cross_entropy per row, then the mean over the batch.
    return (-(labels * F.log_softmax(logits, dim=1)).sum(dim=1)).mean()


def mlp_loss(params, x, labels):
    h = x
    layers = len(params) // 2
    for l in range(layers):
        h = h @ params[2 * l] + params[2 * l + 1]
        if l + 1 < layers:
            h = torch.tanh(h)
    return cross_entropy(h, labels)


def conv_loss(params, x, labels):
    k1, k2, dense, bias = params
    h = F.max_pool2d(F.relu(F.conv2d(x, k1, padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, k2, padding=1)), 2)
    return cross_entropy(h.reshape(h.shape[0], -1) @ dense + bias, labels)


def chain(x, n):
    # bench/chain_program.cc: tanh, mul by side, add x, sin (side := y) in turn.
    y = x
    side = x
    for i in range(n):
        r = i % 4
        if r == 0:
            y = torch.tanh(y)
        elif r == 1:
            y = y * side
        elif r == 2:
            y = y + x
        else:
            side = y
            y = torch.sin(y)
    return y.sum()


class Placement:
    """Where a model computes: params live there; inputs come from host memory
    and results go back to it on every call (no-ops on the CPU)."""

    def __init__(self, device):
        self.device = torch.device(device)
        self.gpu = self.device.type != "cpu"

    def put(self, t):
        return t.to(self.device) if self.gpu else t

    def host(self, t):
        return t.cpu() if self.gpu else t


def measure_model(timer, out, key, loss_fn, params, inputs, jvp, place):
    """Forward (no gradient recording), step (loss + gradients of params) and
    optionally the Jvp with every input's tangent equal to the input."""
    params = [place.put(p) for p in params]

    def forward():
        return place.host(loss_fn(params, *[place.put(t) for t in inputs]))

    with torch.no_grad():
        out[key + ".loss"] = float(forward())
        out[key + ".fwd_ms"] = timer.median_ms(forward)
    stage(key + " forward")
    leaves = [p.detach().requires_grad_(True) for p in params]

    def step():
        loss = loss_fn(leaves, *[place.put(t) for t in inputs])
        grads = torch.autograd.grad(loss, leaves)
        return place.host(loss), [place.host(g) for g in grads]

    out[key + ".step_ms"] = timer.median_ms(step)
    stage(key + " step")
    if jvp:
        def run_jvp():
            with fwad.dual_level():
                duals = [fwad.make_dual(place.put(t), place.put(t)) for t in inputs]
                return place.host(fwad.unpack_dual(loss_fn(params, *duals)).tangent)

        out[key + ".jvp_ms"] = timer.median_ms(run_jvp)
        stage(key + " jvp")


def measure_chain(timer, out, spec):
    c = spec["chain"]
    n = c["n"]
    x = load(spec, c["tensors"], "x")
    with torch.no_grad():
        out["chain.loss"] = float(chain(x, n))
        out["chain.fwd_ms"] = timer.median_ms(lambda: chain(x, n))
    stage("chain forward")
    leaf = x.detach().requires_grad_(True)

    def step():
        loss = chain(leaf, n)
        return loss, torch.autograd.grad(loss, leaf)

    out["chain.step_ms"] = timer.median_ms(step)
    stage("chain step")

    def run_jvp():
        with fwad.dual_level():
            return fwad.unpack_dual(chain(fwad.make_dual(x, x), n)).tangent

    out["chain.jvp_ms"] = timer.median_ms(run_jvp)
    stage("chain jvp")


def measure_ad_build(timer, out, spec):
    # PyTorch builds its tape while running: the closest analogue of kgrad's
    # build + optimise is one eager forward + backward of the same chain.
    a = spec["ad_build"]
    x = torch.linspace(-1, 1, a["width"]).requires_grad_(True)
    for n in a["sizes"]:
        def fwd_bwd():
            return torch.autograd.grad(chain(x, n), x)

        # The largest chain takes seconds: a few repetitions are enough.
        out["ad_build.%d_ms" % n] = timer.median_ms(fwd_bwd, max_reps=3 if n >= 100000 else None)
        stage("ad build %d" % n)


def measure_sgemm(timer, out, spec):
    n = spec["sgemm_n"]
    a = torch.rand(n, n)
    b = torch.rand(n, n)
    ms = timer.median_ms(lambda: a @ b, max_reps=5)
    out["sgemm_gflops"] = 2.0 * n ** 3 / (ms * 1e6)
    stage("sgemm")


def blas_in_use():
    """Which libblas.so.3 torch's matmuls go through (Debian's alternatives choose
    it: the reference BLAS, or OpenBLAS once libopenblas0-pthread is installed)."""
    torch.ones(4, 4) @ torch.ones(4, 4)
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libblas.so" in line or "openblas" in line}
    real = sorted({os.path.realpath(p) for p in paths})
    if any("openblas" in p for p in real):
        return "OpenBLAS (%s)" % os.path.basename(os.path.dirname(next(p for p in real if "openblas" in p)))
    if real:
        return "reference (%s)" % real[0]
    return "none loaded"


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: torch_side.py SPEC.json RESULT.json\n")
        return 2
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    torch.manual_seed(spec["seed"])
    torch.set_num_threads(spec["threads"])
    place = Placement(spec.get("device", "cpu"))
    programs = spec.get("programs", ["mlp", "conv", "chain", "ad_build", "sgemm"])
    sync = lambda: None
    out = {"version": "%s, BLAS: %s" % (torch.__version__, blas_in_use()),
           "threads": torch.get_num_threads()}
    if place.gpu:
        # kgrad computes f32 matmuls and convolutions in full f32 (no TF32).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        sync = lambda: torch.cuda.synchronize(place.device)
        out["gpu"] = torch.cuda.get_device_name(place.device)
    timer = Timer(spec, sync)

    if "mlp" in programs:
        m = spec["mlp"]
        t = m["tensors"]
        params = []
        for l in range(len(m["sizes"]) - 1):
            params += [load(spec, t, "w%d" % (l + 1)), load(spec, t, "b%d" % (l + 1))]
        inputs = [load(spec, t, "x"), load(spec, t, "labels")]
        measure_model(timer, out, "mlp", mlp_loss, params, inputs, True, place)
    if "conv" in programs:
        c = spec["conv"]
        t = c["tensors"]
        params = [load(spec, t, k) for k in ("conv1", "conv2", "dense", "dense_bias")]
        inputs = [load(spec, t, "x"), load(spec, t, "labels")]
        measure_model(timer, out, "conv", conv_loss, params, inputs, False, place)
    if "chain" in programs:
        measure_chain(timer, out, spec)
    if "ad_build" in programs:
        measure_ad_build(timer, out, spec)
    if "sgemm" in programs:
        measure_sgemm(timer, out, spec)
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
