#!/usr/bin/python3
"""Writes the float32-precision cases of tests/precision:primitive_precision_test
into tests/precision/data/ (run from the repo root with Debian's /usr/bin/python3
and python3-torch; the test itself needs neither).

Each case is one kgrad primitive on ill-conditioned float32 inputs (tiny
batches, large means, nearly constant channels, long sums, large logits):

  NAME.pbtxt         the primitive as a one-application graph (inputs x0, x1, ...)
  NAME_in<i>.npy     its inputs (float32; int64 labels)
  NAME_ct.npy        a cotangent of the output (float32)
  NAME_ref_out.npy   the output, by torch in float64 at the float32 inputs
  NAME_ref_d<i>.npy  <ct, out>'s gradient w.r.t. float input i, the same way

and torch_float32.txt has torch's own float32 error per output and gradient
("NAME out 1.2e-07", "NAME d0 3.4e-05"): max|a - ref| / max|ref|. The test
requires kgrad's float32 error to be no larger (issue 47).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
RNG = np.random.default_rng(47)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def noise(*shape):
    return RNG.standard_normal(shape)


def attr(key, value):
    if isinstance(value, bool):
        v = f"b: {str(value).lower()}"
    elif isinstance(value, int):
        v = f"i: {value}"
    elif isinstance(value, float):
        v = f"f: {value!r}"
    else:
        v = "ints { " + " ".join(f"values: {x}" for x in value) + " }"
    return f'attrs {{ key: "{key}" value {{ {v} }} }}'


def write_graph(name, prim, attrs, inputs):
    params = []
    for i, a in enumerate(inputs):
        dtype = "DT_FLOAT32" if a.dtype == np.float32 else "DT_INT64"
        dims = " ".join(f"dims: {d}" for d in a.shape)
        params.append(f'  parameters {{ name: "x{i}" type {{ tensor {{ dtype: {dtype} {dims} }} }} }}')
    attr_text = " ".join(attr(k, v) for k, v in attrs.items())
    args = ", ".join(['"op"'] + [f'"x{i}"' for i in range(len(inputs))])
    text = "\n".join([
        f"# {name}: written by tests/precision/make_primitive_cases.py",
        "format_version: 1",
        f'entry: "{name}"',
        "graphs {",
        f'  name: "{name}"',
        *params,
        f'  nodes {{ name: "op" constant {{ primitive {{ name: "{prim}" {attr_text} }} }} }}',
        f'  nodes {{ name: "y" apply {{ inputs: [{args}] }} }}',
        '  output: "y"',
        "}",
        "",
    ])
    with open(os.path.join(OUT, f"{name}.pbtxt"), "w") as f:
        f.write(text)


def error(a, ref):
    a = a.detach().double().numpy()
    ref = ref.detach().double().numpy()
    scale = np.max(np.abs(ref))
    diff = np.max(np.abs(a - ref))
    return float(diff / scale if scale > 0 else diff)


def run(fn, inputs, ct, dtype):
    xs = [torch.from_numpy(a).to(dtype).requires_grad_() if a.dtype == np.float32
          else torch.from_numpy(a) for a in inputs]
    y = fn(*xs)
    wrt = [x for x in xs if x.requires_grad]
    grads = torch.autograd.grad(y, wrt, torch.from_numpy(ct).to(dtype))
    return y, grads


def case(name, prim, attrs, fn, inputs, table):
    inputs = [a if a.dtype == np.int64 else f32(a) for a in inputs]
    probe = fn(*[torch.from_numpy(a).double() if a.dtype == np.float32 else torch.from_numpy(a)
                 for a in inputs])
    ct = f32(RNG.uniform(-1, 1, probe.shape))
    y64, g64 = run(fn, inputs, ct, torch.float64)
    y32, g32 = run(fn, inputs, ct, torch.float32)
    write_graph(name, prim, attrs, inputs)
    for i, a in enumerate(inputs):
        np.save(os.path.join(OUT, f"{name}_in{i}.npy"), a)
    np.save(os.path.join(OUT, f"{name}_ct.npy"), ct)
    np.save(os.path.join(OUT, f"{name}_ref_out.npy"), y64.detach().numpy())
    table.append(f"{name} out {error(y32, y64):.9g}")
    k = 0
    for i, a in enumerate(inputs):
        if a.dtype != np.float32:
            continue
        np.save(os.path.join(OUT, f"{name}_ref_d{i}.npy"), g64[k].numpy())
        table.append(f"{name} d{i} {error(g32[k], g64[k]):.9g}")
        k += 1


def affine(c):
    return [RNG.uniform(0.5, 1.5, c), RNG.uniform(-0.5, 0.5, c)]


def main():
    os.makedirs(OUT, exist_ok=True)
    t = []
    bn = lambda eps: (lambda x, s, b: F.batch_norm(x, None, None, s, b, True, 0.0, eps))
    case("bn_tiny_batch", "batch_norm", {"epsilon": 1e-5, "axis": 1}, bn(1e-5),
         [noise(2, 6, 1, 1)] + affine(6), t)
    case("bn_large_mean", "batch_norm", {"epsilon": 1e-5, "axis": 1}, bn(1e-5),
         [1000 + 0.05 * noise(3, 4, 3, 3)] + affine(4), t)
    case("bn_near_constant", "batch_norm", {"epsilon": 1e-5, "axis": 1}, bn(1e-5),
         [3 + 1e-3 * noise(2, 5, 2, 2)] + affine(5), t)
    case("bn_batch3_1x1", "batch_norm", {"epsilon": 1e-3, "axis": 1}, bn(1e-3),
         [10 * noise(3, 8, 1, 1) + 40] + affine(8), t)
    ln = lambda eps, k: (lambda x, s, b: F.layer_norm(x, x.shape[-k:], s, b, eps))
    case("ln_large_mean", "layer_norm", {"begin_norm_axis": -1, "epsilon": 1e-5}, ln(1e-5, 1),
         [500 + 0.1 * noise(4, 16)] + affine(16), t)
    case("ln_near_constant", "layer_norm", {"begin_norm_axis": 1, "epsilon": 1e-5}, ln(1e-5, 2),
         [2 + 2e-3 * noise(3, 4, 8), RNG.uniform(0.5, 1.5, (4, 8)), RNG.uniform(-.5, .5, (4, 8))], t)
    case("mean_large_mean", "reduce_mean", {"axes": [1], "keepdims": False},
         lambda x: x.mean(1), [1e4 + noise(3, 8192)], t)
    case("sum_cancelling", "reduce_sum", {"axes": [], "keepdims": False},
         lambda x: x.sum(), [np.concatenate([1e4 + noise(4096), -1e4 + noise(4096)])], t)
    case("softmax_large_logits", "softmax", {"axis": 1}, lambda x: F.softmax(x, 1),
         [60 + 15 * noise(4, 10)], t)
    case("log_softmax_large_logits", "log_softmax", {"axis": -1}, lambda x: F.log_softmax(x, -1),
         [60 + 15 * noise(4, 1000)], t)
    labels = RNG.integers(0, 10, 5).astype(np.int64)
    confident = noise(5, 10)
    confident[np.arange(5), labels] += 12
    case("cross_entropy_confident", "sparse_softmax_cross_entropy", {},
         lambda x, y: F.cross_entropy(x, y, reduction="none"), [confident, labels], t)
    case("logsumexp_large", "logsumexp", {"axes": [1], "keepdims": False},
         lambda x: torch.logsumexp(x, 1), [80 + 20 * noise(3, 500)], t)
    conv = {"stride": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1}
    case("conv_large_mean", "conv2d", conv, lambda x, w: F.conv2d(x, w, padding=1),
         [50 + noise(2, 8, 12, 12), 0.1 * noise(6, 8, 3, 3)], t)
    case("matmul_long_k", "matmul", {"transpose_a": False, "transpose_b": False},
         lambda a, b: a @ b, [10 + noise(4, 4096), 0.01 * noise(4096, 5)], t)
    pool = {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1, 1, 1], "count_include_pad": False}
    case("avg_pool_large_mean", "avg_pool2d", pool,
         lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [300 + noise(2, 3, 9, 9)], t)
    with open(os.path.join(OUT, "torch_float32.txt"), "w") as f:
        f.write("# torch 1.13 float32 error per output (max|a - ref| / max|ref|, ref: torch float64)\n")
        f.write("\n".join(t) + "\n")
    print("\n".join(t))


if __name__ == "__main__":
    main()
