#!/usr/bin/python3
"""The float32-precision study of issue 47: kgrad's float32 loss and weight
gradients against torch's own float32, both measured against torch's float64 at
the float32 values of the weights and inputs.

  compare_precision.py [--dir DIR] [--kgrad BIN] [--draws 8] [--batches 2,3]
                       [--seed 0] [--json FILE] [--keep DIR] [NAME...]

DIR holds what make_precision_models.py wrote. Per model the gradient graph is
built once by `kgrad grad NAME.onnx --wrt weights --value --optimize`; each draw
is a fresh normal input and uniform targets (no selection by either engine's
accuracy), run by `kgrad run`. The error of one tensor is
max|a - ref| / max(1, max|ref|); a draw's error is the worst over the loss and
every gradient; the table gives the median over draws for kgrad and torch and
their ratio, and how many tensors are off by more than 1e-3 (worst draw).
--keep DIR saves each draw's inputs as DIR/NAME_bB_dD_{x,target}.npy, for
`kgrad check NAME.onnx --precision --input x=... --input target=...`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_precision_models as mpm  # noqa: E402

OFF = 1e-3


def error(a, ref):
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(a - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def weight_names(kgrad, grad_file):
    """The weights in the order the gradient tuple has them (the module's)."""
    out = subprocess.run([kgrad, "print", grad_file], check=True, capture_output=True, text=True)
    return [line.split()[0][1:] for line in out.stdout.splitlines() if line.startswith("$")]


def torch_run(model, x, target, dtype):
    m = model.to(dtype)
    m.zero_grad()
    loss = m(torch.from_numpy(x).to(dtype), torch.from_numpy(target))
    params = dict(m.named_parameters())
    grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    out = {"loss": loss.detach().double().numpy()}
    for (name, p), g in zip(params.items(), grads):
        out[name] = (torch.zeros_like(p) if g is None else g).detach().double().numpy()
    return out


def kgrad_run(kgrad, grad_file, names, x, target, work):
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "target.npy"), target)
    out_dir = os.path.join(work, "out")
    subprocess.run([kgrad, "run", grad_file, "--input", f"x={work}/x.npy",
                    "--input", f"target={work}/target.npy", "--output", out_dir],
                   check=True, capture_output=True, text=True)
    out = {"loss": np.load(os.path.join(out_dir, "out_0.npy"))}
    for i, name in enumerate(names):
        path = os.path.join(out_dir, f"out_1_{i}.npy")
        if os.path.exists(path):
            out[name] = np.load(path)
    return out


def draw_errors(result, ref):
    errs = {k: error(result[k], ref[k]) for k in ref if k in result}
    missing = [k for k in ref if k not in result and k != "loss"]
    return errs, missing


def study(a, name, rows):
    model = mpm.build(name)
    model.load_state_dict(torch.load(os.path.join(a.dir, f"{name}.pt")))
    model.train()
    onnx_file = os.path.join(a.dir, f"{name}.onnx")
    grad_file = os.path.join(a.dir, f"{name}_grad.pb")
    if not os.path.exists(grad_file):
        subprocess.run([a.kgrad, "grad", onnx_file, "--wrt", "weights", "--value", "--optimize",
                        "-o", grad_file], check=True, capture_output=True, text=True)
    names = weight_names(a.kgrad, grad_file)
    rng = np.random.default_rng(a.seed)
    size = model_size(onnx_file)
    for batch in a.batches:
        per_draw = []
        for d in range(a.draws):
            x = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
            target = rng.integers(0, mpm.CLASSES, batch).astype(np.int64)
            ref = torch_run(model, x, target, torch.float64)
            t32 = torch_run(model, x, target, torch.float32)
            if a.keep:
                os.makedirs(a.keep, exist_ok=True)
                np.save(os.path.join(a.keep, f"{name}_b{batch}_d{d}_x.npy"), x)
                np.save(os.path.join(a.keep, f"{name}_b{batch}_d{d}_target.npy"), target)
            with tempfile.TemporaryDirectory() as work:
                k32 = kgrad_run(a.kgrad, grad_file, names, x, target, work)
            ke, missing = draw_errors(k32, ref)
            if missing:
                sys.exit(f"{name}: kgrad gave no gradient for {missing[:5]}")
            te, _ = draw_errors(t32, ref)
            per_draw.append({"kgrad": ke, "torch": te})
            worst_k = max(ke, key=ke.get)
            print(f"{name} b{batch} draw {d}: kgrad {ke[worst_k]:.3g} ({worst_k}), "
                  f"torch {max(te.values()):.3g}; loss kgrad {ke['loss']:.3g} torch {te['loss']:.3g}",
                  flush=True)
        rows.append(summarise(name, batch, per_draw))


def summarise(name, batch, per_draw):
    def med(engine):
        return float(np.median([max(d[engine].values()) for d in per_draw]))

    def off(engine):
        return max(sum(e > OFF for e in d[engine].values()) for d in per_draw)

    k, t = med("kgrad"), med("torch")
    return {"model": name, "batch": batch, "kgrad_median": k, "torch_median": t,
            "ratio": k / t if t > 0 else float("inf"), "kgrad_off": off("kgrad"),
            "torch_off": off("torch"), "tensors": len(per_draw[0]["kgrad"]),
            "draws": per_draw}


def model_size(onnx_file):
    import onnx
    m = onnx.load(onnx_file, load_external_data=False)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    return dims[2].dim_value


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", default="/tmp/kgrad-precision")
    p.add_argument("--kgrad", default="bazel-bin/tools/kgrad")
    p.add_argument("--draws", type=int, default=8)
    p.add_argument("--batches", default="2,3")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    p.add_argument("--keep")
    p.add_argument("names", nargs="*", default=list(mpm.MODELS))
    a = p.parse_args()
    a.batches = [int(b) for b in a.batches.split(",")]
    torch.set_num_threads(2)
    rows = []
    for name in a.names:
        study(a, name, rows)
    print("\n| model | batch | kgrad f32 median error | torch f32 median error | ratio | "
          "tensors off > 1e-3 (kgrad / torch, worst draw) |")
    print("|---|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['model']} | {r['batch']} | {r['kgrad_median']:.3g} | {r['torch_median']:.3g} | "
              f"{r['ratio']:.2f} | {r['kgrad_off']} / {r['torch_off']} of {r['tensors']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
