#!/usr/bin/python3
"""The PyTorch side of bench/finetune_step.sh.

  finetune_step_torch.py export OUT_DIR   writes OUT_DIR/resnet18_b8.onnx (torchvision
                                          resnet18, training mode, batch 8, 224x224)
  finetune_step_torch.py time             one JSON line: the median of a training step
                                          (cross-entropy, backward, torch.optim.AdamW)

Timing as bench/onnx_models_torch.py: 2 warm-up steps, then steps for 3 s (5 to
30 of them), 2 threads."""
import json
import os
import sys

import torch
import torch.nn.functional as F
import torchvision

from onnx_models_torch import median_ms  # the suite's timing rule, in one place

BATCH = 8


def main():
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    model.train()
    x = torch.randn(BATCH, 3, 224, 224)
    if sys.argv[1] == "export":
        path = os.path.join(sys.argv[2], "resnet18_b8.onnx")
        torch.onnx.export(model, (x,), path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["x"])
        return
    target = torch.randint(0, 10, (BATCH,))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        opt.step()

    print(json.dumps({"model": "resnet18_b8", "torch_adamw_step_ms": median_ms(step),
                      "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
