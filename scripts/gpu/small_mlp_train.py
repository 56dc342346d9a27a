"""A small policy MLP (64 -> 256 -> 256 -> 256 -> 8, batch 256) trained with Adam: every kernel is a few
microseconds, so the host's launches set the pace. A plain PyTorch script with no perfkit code in it:

    perfkit profile scripts/gpu/small_mlp_train.py -- eager 20 cuda
    perfkit profile scripts/gpu/small_mlp_train.py -- reduce-overhead 20 cuda

Modes: ``eager``; ``reduce-overhead`` (the same model under ``torch.compile(mode="reduce-overhead")``:
Inductor's kernels replayed as CUDA graphs); ``item-logging`` (a wider MLP, batch 4096, whose loop
reads the loss and the gradient norm with ``.item()`` every step, the way a logging line does).
With STEP_TIMES=FILE it writes each step's time on the device's clock (CUDA events) to FILE as JSON.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_model(width: int, layers: int, device: str) -> nn.Module:
    dims = [64] + [width] * layers
    mods = [m for a, b in zip(dims, dims[1:]) for m in (nn.Linear(a, b), nn.ReLU())]
    return nn.Sequential(*mods, nn.Linear(width, 8)).to(device)


def main():
    mode, steps, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode not in ("eager", "reduce-overhead", "item-logging"):
        raise SystemExit(f"mode {mode!r}: eager, reduce-overhead or item-logging")
    torch.manual_seed(0)
    width, layers, batch = (2048, 4, 4096) if mode == "item-logging" else (256, 3, 256)
    model = make_model(width, layers, device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    forward = torch.compile(model, mode="reduce-overhead") if mode == "reduce-overhead" else model
    data = [(torch.randn(batch, 64, device=device), torch.randn(batch, 8, device=device)) for _ in range(4)]
    timed = device.startswith("cuda") and os.environ.get("STEP_TIMES")
    events, log = [], []
    for step in range(steps):
        x, target = data[step % len(data)]
        if timed:
            events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
            events[-1][0].record()
        loss = F.mse_loss(forward(x), target)
        if mode == "item-logging":
            log.append({"loss": loss.item()})
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if mode == "item-logging":
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            log[-1]["grad_norm"] = norm.item()
        optimizer.step()
        if timed:
            events[-1][1].record()
    if timed:
        torch.cuda.synchronize()
        with open(os.environ["STEP_TIMES"], "w") as f:
            json.dump([a.elapsed_time(b) for a, b in events], f)


if __name__ == "__main__":
    main()
