"""Observation batches (8192 x 2048 fp32, 64 MiB) copied to the GPU every step, then a small MLP
trained on them: ``pageable`` copies from ordinary host tensors with ``.to(device)`` (the host blocks
while the driver stages each copy); ``pinned`` keeps the same batches in pinned memory and copies with
``non_blocking=True``. A plain PyTorch script with no perfkit code in it:

    perfkit profile scripts/gpu/copies_train.py -- pageable 20 cuda
    perfkit profile scripts/gpu/copies_train.py -- pinned 20 cuda
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def main():
    memory, steps, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if memory not in ("pageable", "pinned"):
        raise SystemExit(f"memory {memory!r}: pageable or pinned")
    torch.manual_seed(0)
    pin = memory == "pinned" and device.startswith("cuda")
    batches = [torch.randn(8192, 2048) for _ in range(4)]
    batches = [b.pin_memory() for b in batches] if pin else batches
    targets = torch.randn(8192, 8, device=device)
    model = nn.Sequential(nn.Linear(2048, 256), nn.ReLU(), nn.Linear(256, 8)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        x = batches[step % len(batches)].to(device, non_blocking=pin)
        loss = F.mse_loss(model(x), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
