#!/usr/bin/python3
"""Writes the ONNX RNN import fixtures under tests/onnx/data/ (run from anywhere with
Debian's /usr/bin/python3 and python3-torch + python3-onnx; the tests need neither).

Each model NAME is a torch.nn recurrent module exported by torch.onnx.export with its
default settings (so the exporter's own weight reordering and constant folding are
what the importer sees). The outputs are (output, h_n[, c_n]):
  NAME.onnx            the model
  NAME_in0.npy         the input
  NAME_out<k>.npy      output k
  NAME_ct<k>.npy       a random cotangent of output k
  NAME_din0.npy        d(sum_k <ct_k, out_k>)/d input   (torch.autograd)
  NAME_dw_<W|R|B>_l<layer>.npy  the same for the ONNX weights of each layer.
torch.onnx (constant folding on, its default) writes each layer's weights as the
initializers W, R, B, already stacked over directions and reordered from torch's gate
order to ONNX's; this script renames those initializers W_l<k>, R_l<k>, B_l<k> and
pushes torch.autograd's parameter gradients through the same reordering, so the
test compares gradients w.r.t. the module's weights as the importer sees them.
"""
import os

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


class Wrap(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        y, h = self.rnn(x)
        return (y,) + (h if isinstance(h, tuple) else (h,))


def save(name, suffix, t):
    np.save(os.path.join(OUT, f"{name}_{suffix}.npy"), t.detach().numpy().astype(np.float32))


# torch's gate blocks in ONNX's order: LSTM ifgo -> iofc, GRU rzn -> zrh.
GATE_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}


def reorder(kind, t):
    blocks = t.chunk(len(GATE_ORDER[kind]), 0)
    return torch.cat([blocks[i] for i in GATE_ORDER[kind]], 0)


def onnx_form(kind, rnn, layer, get):
    """Layer `layer`'s W, R, B (as ONNX stacks them) from get(torch parameter name)."""
    dirs = ["", "_reverse"] if rnn.bidirectional else [""]
    w = torch.stack([reorder(kind, get(f"weight_ih_l{layer}{d}")) for d in dirs])
    r = torch.stack([reorder(kind, get(f"weight_hh_l{layer}{d}")) for d in dirs])
    b = torch.stack([torch.cat([reorder(kind, get(f"bias_ih_l{layer}{d}")),
                                reorder(kind, get(f"bias_hh_l{layer}{d}"))]) for d in dirs])
    return {"W": w, "R": r, "B": b}


def rename_weights(proto, rnn, grads, name):
    """Names the initializers W_l<k>/R_l<k>/B_l<k> (found by value) and saves their
    gradients."""
    kind = type(rnn).__name__
    renamed = {}
    for layer in range(rnn.num_layers):
        values = onnx_form(kind, rnn, layer, lambda n: getattr(rnn, n).detach())
        dw = onnx_form(kind, rnn, layer, lambda n: grads["rnn." + n])
        for key, v in values.items():
            hits = [i for i in proto.graph.initializer
                    if list(i.dims) == list(v.shape) and i.name not in renamed and
                    np.array_equal(onnx.numpy_helper.to_array(i), v.numpy())]
            if len(hits) != 1:
                raise SystemExit(f"{name}: {len(hits)} initializers hold {key} of layer {layer}")
            renamed[hits[0].name] = f"{key}_l{layer}"
            save(name, f"dw_{key}_l{layer}", dw[key])
    if len(renamed) != len(proto.graph.initializer):
        raise SystemExit(f"{name}: initializers left unnamed")
    for i in proto.graph.initializer:
        i.name = renamed[i.name]
    for n in proto.graph.node:
        for k, inp in enumerate(n.input):
            if inp in renamed:
                n.input[k] = renamed[inp]


def export(name, rnn, x, opset=14):
    model = Wrap(rnn).eval()
    path = os.path.join(OUT, f"{name}.onnx")
    torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["x0"])
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    xs = x.clone().requires_grad_(True)
    outs = model(xs)
    cts = [torch.randn(o.shape) for o in outs]
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(outs, [xs] + list(params.values()), cts)
    save(name, "in0", x)
    save(name, "din0", grads[0])
    for k, (o, ct) in enumerate(zip(outs, cts)):
        save(name, f"out{k}", o)
        save(name, f"ct{k}", ct)
    rename_weights(proto, rnn, dict(zip(params.keys(), grads[1:])), name)
    onnx.save(proto, path)
    ops = sorted({n.op_type for n in proto.graph.node})
    inits = [(i.name, list(i.dims)) for i in proto.graph.initializer]
    print(f"{name}: {os.path.getsize(path)} bytes, ops {' '.join(ops)}, initializers {inits}")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    export("lstm", nn.LSTM(3, 4, num_layers=2, batch_first=True), torch.randn(2, 5, 3))
    torch.manual_seed(0)
    export("gru", nn.GRU(3, 4, bidirectional=True), torch.randn(5, 2, 3))
    torch.manual_seed(0)
    export("rnn_tanh", nn.RNN(3, 4, nonlinearity="tanh"), torch.randn(5, 2, 3))
    torch.manual_seed(0)
    export("rnn_relu", nn.RNN(3, 4, nonlinearity="relu"), torch.randn(5, 2, 3))


if __name__ == "__main__":
    main()
