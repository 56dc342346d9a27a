"""A pre-norm transformer block stack (d_model 1024, 16 heads, MLP 4096, sequence 512) trained with
AdamW, in bf16 autocast or plain fp32 (Tensor Cores off: torch's default fp32 matmul precision), as a
plain PyTorch script with no perfkit code in it:

    perfkit profile scripts/gpu/transformer_train.py -- bf16 20 cuda
    python3 scripts/gpu/transformer_train.py fp32 20 cuda

Arguments: precision (bf16 | fp32), steps, device, batch (default 64 sequences). With STEP_TIMES=FILE
in the environment it writes each step's time on the device's clock (CUDA events from the start of the
forward pass to the end of optimizer.step()) to FILE as JSON, which is how a user would time it.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

D_MODEL, HEADS, FF, SEQ, LAYERS = 1024, 16, 4096, 512, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
        self.qkv, self.proj = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)
        self.up, self.down = nn.Linear(D_MODEL, FF), nn.Linear(FF, D_MODEL)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def main():
    precision, steps, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 64
    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(LAYERS)]).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = [(torch.randn(batch, SEQ, D_MODEL, device=device), torch.randn(batch, SEQ, D_MODEL, device=device))
            for _ in range(2)]
    timed = device.startswith("cuda") and os.environ.get("STEP_TIMES")
    events = []
    for step in range(steps):
        x, target = data[step % len(data)]
        if timed:
            events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
            events[-1][0].record()
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.mse_loss(model(x).float(), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if timed:
            events[-1][1].record()
    if timed:
        torch.cuda.synchronize()
        with open(os.environ["STEP_TIMES"], "w") as f:
            json.dump([a.elapsed_time(b) for a, b in events], f)


if __name__ == "__main__":
    main()
