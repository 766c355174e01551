#!/usr/bin/python3
"""Writes the PyTorch model fixtures under tests/onnx/data/ (run from the repo root
with Debian's /usr/bin/python3 and python3-torch, python3-torchvision, python3-onnx;
the test suite itself needs none of them; `make_model_fixtures.py NAME...` writes
only those). Same file convention as make_fixtures.py:

  NAME.onnx            the model as torch.onnx.export writes it (default settings
                       except where a fixture says: training mode, opset,
                       torch.jit.script before export)
  NAME_in<i>.npy       inputs (float, or int64 class targets / token ids)
  NAME_out.npy         the output
  NAME_ct.npy          a random output cotangent
  NAME_din<i>.npy      d<ct, out>/d input i, for the float inputs
  NAME_dw_<param>.npy  d<ct, out>/d parameter (ONNX initializer name)

Models are torchvision's and torch.nn's own classes at reduced widths and small
inputs, so that the committed files stay small; the batches are large enough that
float32 round-off through training-mode BatchNorm stays near 1e-5 (measured against
the float64 reference: mobilenet_v2 at width 0.1 with 2 images of 64x64 differs from
it by 3e-4 in float32 in torch itself, with 8 images by 5e-5). Training-mode models keep
BatchNorm in training mode (batch statistics); their Dropout layers are given
p = 0, the one change made to a model, because a random mask cannot be compared
with torch's (kgrad's training-mode Dropout is tested on its own).
"""
import copy
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models import resnet as tv_resnet
from torchvision.models.video import resnet as vr
import torch.ao.quantization as tq

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
TRAIN = torch.onnx.TrainingMode.TRAINING


class WithLoss(nn.Module):
    """model(x) followed by F.cross_entropy against integer targets."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, target):
        return F.cross_entropy(self.model(x), target)


class SmallResNet(nn.Module):
    """A ResNet built from torchvision's BasicBlock and Bottleneck at width 8."""

    def __init__(self, classes=5):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        down = nn.Sequential(nn.Conv2d(8, 16, 1, 2, bias=False), nn.BatchNorm2d(16))
        self.block1 = tv_resnet.BasicBlock(8, 16, 2, down)
        down2 = nn.Sequential(nn.Conv2d(16, 16, 1, 1, bias=False), nn.BatchNorm2d(16))
        self.block2 = tv_resnet.Bottleneck(16, 4, 1, down2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        y = self.block2(self.block1(self.stem(x)))
        return self.fc(torch.flatten(self.pool(y), 1))


class SmallSqueezeNet(nn.Module):
    """SqueezeNet 1.1's layout (ceil-mode max pooling, torchvision's Fire modules) at
    a quarter of its widths."""

    def __init__(self, classes=5):
        super().__init__()
        fire = torchvision.models.squeezenet.Fire
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            fire(16, 4, 16, 16), fire(32, 4, 16, 16), nn.MaxPool2d(3, 2, ceil_mode=True),
            fire(32, 8, 32, 32))
        self.classifier = nn.Sequential(nn.Dropout(p=0.0), nn.Conv2d(64, classes, 1),
                                        nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


class ActZoo(nn.Module):
    """Every activation the exporter maps to its own ONNX op (or a short chain)."""

    def __init__(self):
        super().__init__()
        self.prelu = nn.PReLU(3)

    def forward(self, x):
        ys = [F.leaky_relu(x, 0.1), F.elu(x, 0.7), F.selu(x), F.celu(x, 1.3), F.hardsigmoid(x),
              F.hardswish(x), F.softsign(x), F.mish(x), self.prelu(x), F.relu6(x),
              F.hardtanh(x, -0.5, 0.5), F.softplus(x), F.silu(x), F.gelu(x), F.logsigmoid(x),
              F.tanhshrink(x), F.hardshrink(x, 0.3), F.softshrink(x, 0.3)]
        return torch.stack(ys)


class LossZoo(nn.Module):
    """The classification losses the exporter supports, each reduced to a scalar,
    stacked (it refuses mse_loss, l1_loss and binary_cross_entropy; their
    hand-written forms stand in)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.tensor([0.5, 1.0, 2.0, 1.5]))

    def forward(self, x, target, y):
        logp = F.log_softmax(x, 1)
        ys = [F.cross_entropy(x, target),
              F.cross_entropy(x, target, weight=self.w, ignore_index=1),
              F.nll_loss(logp, target, weight=self.w, reduction="sum"),
              F.nll_loss(logp, target, ignore_index=2),
              F.cross_entropy(x.t().unsqueeze(0), target.reshape(1, 3)),
              F.binary_cross_entropy_with_logits(x, y),
              F.kl_div(logp, F.softmax(y, 1), reduction="batchmean"),
              ((x - y) ** 2).mean(), (x - y).abs().sum()]
        return torch.stack(ys)


class Embedder(nn.Module):
    """Token ids -> embedding (padding_idx 0) -> mean over tokens -> linear."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6, padding_idx=0)
        self.fc = nn.Linear(6, 4)

    def forward(self, ids, target):
        # The exported graph is a Gather: padding_idx's special gradient (none for
        # row 0) is not part of it, so the reference differentiates the plain lookup.
        h = F.embedding(ids, self.emb.weight).mean(1)
        return F.cross_entropy(self.fc(torch.tanh(h)), target)


class GroupNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)
        self.inorm = nn.InstanceNorm2d(8, affine=True)

    def forward(self, x):
        return self.inorm(F.leaky_relu(self.gn(self.conv(x)), 0.2))


class UNet(nn.Module):
    """A two-level U-Net: GroupNorm + LeakyReLU blocks, max-pool down, a
    ConvTranspose2d and a nearest Resize up, a bilinear Resize at the output."""

    def __init__(self):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout),
                                 nn.LeakyReLU(0.1))

        self.down1, self.down2 = block(3, 8), block(8, 16)
        self.bottom = block(16, 16)
        self.up2 = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.dec2 = block(24, 8)
        self.dec1 = block(16, 8)
        self.head = nn.Conv2d(8, 2, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], 1))
        u1 = self.dec1(torch.cat([F.interpolate(u2, scale_factor=2, mode="nearest"), d1], 1))
        return F.interpolate(self.head(u1), scale_factor=2, mode="bilinear", align_corners=False)


class SmallVideoResNet(vr.VideoResNet):
    """torchvision's VideoResNet (r3d_18, mc3_18, r2plus1d_18) at widths 8 and 16:
    its own BasicBlock, conv builders and _make_layer, a stem of the same form as
    BasicStem / R2Plus1dStem at 8 channels, one block per layer, two layers."""

    def __init__(self, conv_makers, r2plus1d=False, classes=5):
        nn.Module.__init__(self)
        width = 8
        if r2plus1d:  # R2Plus1dStem: (1, 7, 7) spatial, then (3, 1, 1) temporal
            self.stem = nn.Sequential(
                nn.Conv3d(3, 6, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False), nn.BatchNorm3d(6),
                nn.ReLU(inplace=True),
                nn.Conv3d(6, width, (3, 1, 1), (1, 1, 1), (1, 0, 0), bias=False), nn.BatchNorm3d(width),
                nn.ReLU(inplace=True))
        else:  # BasicStem
            self.stem = nn.Sequential(nn.Conv3d(3, width, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
                                      nn.BatchNorm3d(width), nn.ReLU(inplace=True))
        self.inplanes = width
        self.layer1 = self._make_layer(vr.BasicBlock, conv_makers[0], 8, 1, stride=1)
        self.layer2 = self._make_layer(vr.BasicBlock, conv_makers[1], 16, 1, stride=2)
        self.avgpool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(self.avgpool(x).flatten(1))


class PackedRnn(nn.Module):
    """A bidirectional GRU or LSTM over a padded batch with per-sample lengths, as
    users write it: pack_padded_sequence (unsorted), the RNN, pad_packed_sequence.
    The export computes sequence_lens in the graph (Cast(TopK(lengths))). Returns
    the padded output and the final states, flattened per sample side by side."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(3, 4, batch_first=True, bidirectional=True)

    def forward(self, x, lengths):
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, state = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        states = state if isinstance(state, tuple) else (state,)
        parts = [out.flatten(1)] + [s.transpose(0, 1).flatten(1) for s in states]
        return torch.cat(parts, 1)


class GridSampleZoo(nn.Module):
    """F.grid_sample in every mode, padding mode and align_corners, on the same
    input and grid, the outputs flattened side by side (GridSample, opset 16)."""

    def forward(self, x, grid):
        outs = [F.grid_sample(x, grid, mode=m, padding_mode=p, align_corners=a).flatten(1)
                for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border", "reflection")
                for a in (False, True)]
        return torch.cat(outs, 1)


class GridSample3dZoo(nn.Module):
    """The same over volumes (N, C, D, H, W): trilinear and nearest (torch has no
    bicubic in 3-D; torch 1.13 exports it as GridSample of opset 16 all the same)."""

    def forward(self, x, grid):
        outs = [F.grid_sample(x, grid, mode=m, padding_mode=p, align_corners=a).flatten(1)
                for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection")
                for a in (False, True)]
        return torch.cat(outs, 1)


def grid_points(*shape):
    """Grid coordinates in [-1.3, 1.3] (some outside the input, to exercise the
    padding), kept off the half-pixel points where nearest rounding ties."""
    g = torch.rand(*shape) * 2.6 - 1.3
    return g


class QatCnn(nn.Module):
    """A small CNN prepared for quantisation-aware training (torch.ao.quantization,
    eager mode): fake-quantised activations (uint8, per tensor) and weights (int8,
    per output channel, affine), observers frozen after calibration. torch exports
    each fake quantisation as QuantizeLinear -> DequantizeLinear (opset 13).
    Weights are affine, not symmetric: a symmetric observer puts each channel's
    largest magnitude exactly on qmax + 1/2, a tie that torch (x * (1 / s)) and
    ONNX (x / s, which kgrad follows) round apart in float32 for negative extremes."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.relu, self.fc = nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Linear(64, 5)

    def forward(self, x):
        return self.dequant(self.fc(self.relu(self.conv(self.quant(x))).flatten(1)))


def prepared_qat():
    m = QatCnn()
    m.qconfig = tq.QConfig(
        activation=tq.FakeQuantize.with_args(observer=tq.MovingAverageMinMaxObserver, quant_min=0, quant_max=255),
        weight=tq.FakeQuantize.with_args(observer=tq.MovingAveragePerChannelMinMaxObserver, quant_min=-128,
                                         quant_max=127, dtype=torch.qint8, qscheme=torch.per_channel_affine,
                                         ch_axis=0))
    m.train()
    tq.prepare_qat(m, inplace=True)
    for _ in range(3):
        m(torch.randn(4, 3, 6, 6))
    return m.apply(tq.disable_observer)


def zero_dropout(model):
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model


def randomize_norms(model):
    """Non-trivial affine parameters and running statistics, so that each matters."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm, nn.InstanceNorm2d, nn.LayerNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
                if getattr(m, "running_mean", None) is not None:
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 1.5)
    return model


def save(name, suffix, t):
    a = t.detach().numpy()
    np.save(os.path.join(OUT, f"{name}_{suffix}.npy"),
            a.astype(np.int64) if a.dtype.kind in "iu" else a.astype(np.float32))


def export(name, model, inputs, opset=14, training=False, reference=torch.float64, script=False):
    torch.manual_seed(1)
    model.train(training)
    path = os.path.join(OUT, f"{name}.onnx")
    kwargs = {"training": TRAIN} if training else {}
    # Export a copy: exporting in training mode runs the model, which updates BN's
    # running statistics; the reference below must start from the same state.
    # `script`: export torch.jit.script of it (loops and lists kept, not unrolled
    # by tracing); the reference runs the module itself.
    exported = copy.deepcopy(model)
    if script:
        exported = torch.jit.script(exported)
    torch.onnx.export(exported, tuple(inputs), path, opset_version=opset, do_constant_folding=False,
                      input_names=[f"x{i}" for i in range(len(inputs))], output_names=["out"],
                      **kwargs)
    import onnx
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    initializers = {i.name for i in proto.graph.initializer}
    ops = sorted({n.op_type for n in proto.graph.node})

    # The reference runs in float64 so that it carries no round-off of its own
    # (BatchNorm over a few values per channel amplifies float32's); `reference`
    # float32 for models torch cannot run in float64 (fake quantisation).
    model = copy.deepcopy(model).to(reference)
    xs = [(x.to(reference) if x.is_floating_point() else x).clone().requires_grad_(x.is_floating_point())
          for x in inputs]
    out = model(*xs)
    ct = torch.randn(out.shape, dtype=torch.float64).to(reference)
    params = dict(model.named_parameters())
    wrt = [x for x in xs if x.requires_grad] + list(params.values())
    grads = torch.autograd.grad(out, wrt, ct, allow_unused=True)
    grads = [torch.zeros_like(v) if g is None else g for v, g in zip(wrt, grads)]
    k = 0
    for i, x in enumerate(inputs):
        save(name, f"in{i}", x)
        if x.is_floating_point():
            save(name, f"din{i}", grads[k])
            k += 1
    save(name, "out", out)
    save(name, "ct", ct)
    for (pname, _), g in zip(params.items(), grads[k:]):
        if pname not in initializers:
            sys.exit(f"{name}: parameter {pname} is not an initializer ({sorted(initializers)})")
        save(name, f"dw_{pname}", g)
    size = os.path.getsize(path)
    print(f"{name}: opset {opset}, {size} bytes, {len(params)} params, ops {' '.join(ops)}")


def targets(n, classes):
    return torch.randint(0, classes, (n,))


def main():
    os.makedirs(OUT, exist_ok=True)
    only = set(sys.argv[1:])  # model names to write (default: all)
    global export
    if only:
        write = export
        export = lambda name, *a, **k: write(name, *a, **k) if name in only else None
    tv = torchvision.models
    torch.manual_seed(0)
    export("resnet_train", WithLoss(randomize_norms(SmallResNet())),
           [torch.randn(2, 3, 32, 32), targets(2, 5)], training=True)
    torch.manual_seed(0)
    mobilenet = zero_dropout(randomize_norms(tv.mobilenet_v2(width_mult=0.1, num_classes=5)))
    export("mobilenet_v2_train", mobilenet, [torch.randn(8, 3, 64, 64)], training=True)
    torch.manual_seed(0)
    shufflenet = tv.shufflenetv2.ShuffleNetV2([1, 1, 1], [8, 8, 16, 16, 32], num_classes=5)
    export("shufflenet_v2_train", randomize_norms(shufflenet), [torch.randn(2, 3, 64, 64)],
           training=True)
    torch.manual_seed(0)
    squeezenet = SmallSqueezeNet()
    export("squeezenet", squeezenet, [torch.randn(1, 3, 48, 48)], training=True)
    torch.manual_seed(0)
    mnasnet = zero_dropout(randomize_norms(tv.mnasnet.MNASNet(0.2, num_classes=5)))
    export("mnasnet_train", mnasnet, [torch.randn(8, 3, 64, 64)], training=True)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    export("transformer_encoder", randomize_norms(encoder), [torch.randn(2, 5, 16)], training=True)
    torch.manual_seed(0)
    export("act_zoo", ActZoo(), [torch.randn(2, 3, 4) * 2])
    torch.manual_seed(0)
    export("loss_zoo", LossZoo(), [torch.randn(3, 4), torch.tensor([0, 1, 3]), torch.rand(3, 4)])
    torch.manual_seed(0)
    ids = torch.tensor([[3, 5, 0, 0], [1, 2, 7, 10], [4, 0, 0, 0]])
    export("embedding", Embedder(), [ids, targets(3, 4)])
    torch.manual_seed(0)
    export("groupnorm", randomize_norms(GroupNormNet()), [torch.randn(2, 3, 6, 6)], training=True)
    torch.manual_seed(0)
    export("unet", randomize_norms(UNet()), [torch.randn(2, 3, 16, 16)], training=True)
    # Packed sequences: lengths 6, 2, 4, 1 of 6 steps (one full, one of a single step).
    for name, cell in (("packed_gru", nn.GRU), ("packed_lstm", nn.LSTM)):
        torch.manual_seed(0)
        export(name, PackedRnn(cell), [torch.randn(4, 6, 3), torch.tensor([6, 2, 4, 1])])
    torch.manual_seed(0)
    export("grid_sample_zoo", GridSampleZoo(), [torch.randn(2, 3, 5, 6), grid_points(2, 4, 3, 2)], opset=16)
    torch.manual_seed(0)
    export("grid_sample3d_zoo", GridSample3dZoo(), [torch.randn(2, 2, 3, 4, 5), grid_points(2, 2, 3, 2, 3)],
           opset=16)
    # Quantisation-aware training; torch's fake quantisation runs in float32 only.
    torch.manual_seed(0)
    export("qat_cnn", prepared_qat(), [torch.randn(2, 3, 6, 6)], opset=13, training=True, reference=torch.float32)
    # Video classifiers on clips (N, 3, T, H, W) of 4 frames of 16x16, with the loss.
    for name, makers, r2plus1d in (("r3d_18_train", [vr.Conv3DSimple] * 2, False),
                                   ("mc3_18_train", [vr.Conv3DSimple, vr.Conv3DNoTemporal], False),
                                   ("r2plus1d_18_train", [vr.Conv2Plus1D] * 2, True)):
        torch.manual_seed(0)
        export(name, WithLoss(randomize_norms(SmallVideoResNet(makers, r2plus1d))),
               [torch.randn(4, 3, 4, 16, 16), targets(4, 5)], training=True)
    # make_dynamic_fixtures.py's scripted list model (dyn_list_cat) at one static
    # size [batch 3, seq 6, 8], for its weight gradients: the Linear's weight and
    # bias are used inside a Loop body and reach the output through ONNX sequences
    # (SequenceInsert, SequenceAt, SplitToSequence, ConcatFromSequence).
    from make_dynamic_fixtures import ListCat  # it imports this module
    torch.manual_seed(0)
    export("list_cat", ListCat(), [torch.randn(3, 6, 8)], script=True)


if __name__ == "__main__":
    main()
