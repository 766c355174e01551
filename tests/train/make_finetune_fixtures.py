#!/usr/bin/python3
"""Fine-tuning fixtures: torch.optim's trajectories that kgrad's training
artifacts must follow (//tests/train:finetune_torch_test). Run from the repo root
with Debian's /usr/bin/python3, python3-torch, python3-torchvision, python3-onnx:

  make_finetune_fixtures.py              the committed small models -> tests/train/data
  make_finetune_fixtures.py --full DIR   torchvision resnet18 and a d64 encoder -> DIR
                                         (what the test runs when torch is present)

Per model M (exported in training mode, float32, batch axis symbolic):
  M.onnx
  M_x_<s>.npy, M_target_<s>.npy   the batch of step s (0..STEPS-1)
  M_<config>_loss.npy             torch's loss at each step (before its update)
  M_<config>_lr.npy               the learning rate torch used at each step
  M_<config>_w_<param>.npy        each weight after STEPS steps (ONNX initializer names)
  M_<config>_f64_loss.npy, M_<config>_f64_w_<param>.npy
                                  the same run in float64 from the same values: the
                                  reference where float32 is chaotic (Adam turns the
                                  rounding noise of a gradient that is 0 in exact
                                  arithmetic, such as attention's key bias, into
                                  steps of size lr)
The configs (the test builds the same optimizer options; keep both in step):
  adamw      AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
  nesterov   SGD(lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-4)
  adam_clip  Adam(lr=2e-3, amsgrad=True, weight_decay=1e-4), clip_grad_norm_(1.0),
             SequentialLR([LinearLR(0.25, total_iters=5), CosineAnnealingLR(T_max=15)], [5])
  sgd_step   SGD(lr=5e-2, momentum=0.9, dampening=0.1, weight_decay=1e-4), StepLR(7, 0.5)
Training follows the model in train mode (BatchNorm on batch statistics, dropout
0), loss F.cross_entropy for the classifiers, F.mse_loss for the encoder.
"""
import copy
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx"))
from make_model_fixtures import SmallResNet, randomize_norms  # noqa: E402

STEPS = 20
TRAIN = torch.onnx.TrainingMode.TRAINING


def optimizer(config, params):
    if config == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2), None, 0
    if config == "nesterov":
        return torch.optim.SGD(params, lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-4), None, 0
    if config == "adam_clip":
        opt = torch.optim.Adam(params, lr=2e-3, amsgrad=True, weight_decay=1e-4)
        warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=5)
        cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=15)
        return opt, torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[5]), 1.0
    if config == "sgd_step":
        opt = torch.optim.SGD(params, lr=5e-2, momentum=0.9, dampening=0.1, weight_decay=1e-4)
        return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5), 0
    raise ValueError(config)


def export(out, name, model, example):
    exported = copy.deepcopy(model).train()
    path = os.path.join(out, f"{name}.onnx")
    axes = {"x": {0: "batch"}, "out": {0: "batch"}}
    torch.onnx.export(exported, (example,), path, opset_version=14, do_constant_folding=False,
                      input_names=["x"], output_names=["out"], dynamic_axes=axes, training=TRAIN)
    import onnx
    return {i.name for i in onnx.load(path).graph.initializer}


def run(out, name, model, batches, loss_fn, configs):
    initializers = export(out, name, model, batches[0][0])
    for s, (x, t) in enumerate(batches):
        np.save(os.path.join(out, f"{name}_x_{s}.npy"), x.numpy())
        np.save(os.path.join(out, f"{name}_target_{s}.npy"), t.numpy())
    for config in configs:
        for dtype, tag in ((torch.float32, ""), (torch.float64, "_f64")):
            train(out, name, copy.deepcopy(model).to(dtype), batches, loss_fn, config, dtype,
                  f"{config}{tag}", initializers)


def train(out, name, m, batches, loss_fn, config, dtype, tag, initializers):
    m.train()
    params = dict(m.named_parameters())
    missing = [p for p in params if p not in initializers]
    if missing:
        sys.exit(f"{name}: parameters {missing} are not initializers")
    opt, sched, clip = optimizer(config, list(params.values()))
    losses, lrs = [], []
    for x, t in batches:
        opt.zero_grad()
        x = x.to(dtype)
        loss = loss_fn(m(x), t.to(dtype) if t.is_floating_point() else t)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    np.save(os.path.join(out, f"{name}_{tag}_loss.npy"), np.array(losses))
    np.save(os.path.join(out, f"{name}_{tag}_lr.npy"), np.array(lrs))
    for p, v in params.items():
        np.save(os.path.join(out, f"{name}_{tag}_w_{p}.npy"), v.detach().numpy())
    print(f"{name} {tag}: loss {losses[0]:.5f} -> {losses[-1]:.5f}")


def classifier_batches(n, shape, classes):
    return [(torch.randn(n, *shape), torch.randint(0, classes, (n,))) for _ in range(STEPS)]


def encoder(d, heads, ff):
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    return randomize_norms(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False))


def main():
    configs = ["adamw", "nesterov", "adam_clip", "sgd_step"]
    full = "--full" in sys.argv
    out = sys.argv[sys.argv.index("--full") + 1] if full else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "data")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    if full:
        resnet = randomize_norms(torchvision.models.resnet18(num_classes=10))
        batches = classifier_batches(4, (3, 64, 64), 10)
        run(out, "resnet18", resnet, batches, F.cross_entropy, configs)
        torch.manual_seed(0)
        enc = encoder(64, 4, 128)
        batches = [(torch.randn(4, 8, 64), torch.randn(4, 8, 64)) for _ in range(STEPS)]
        run(out, "encoder", enc, batches, F.mse_loss, configs)
        return
    run(out, "resnet", randomize_norms(SmallResNet()), classifier_batches(4, (3, 32, 32), 5),
        F.cross_entropy, configs)
    torch.manual_seed(0)
    batches = [(torch.randn(3, 5, 16), torch.randn(3, 5, 16)) for _ in range(STEPS)]
    run(out, "encoder", encoder(16, 2, 32), batches, F.mse_loss, configs)


if __name__ == "__main__":
    main()
