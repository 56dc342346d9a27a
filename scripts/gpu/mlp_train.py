"""A policy-style MLP trained in fp32 or under bf16 autocast, as a plain script for ``perfkit profile``
and ``perfkit gpu-kernels`` (Tensor Core share, AMP off vs on):

    perfkit profile scripts/gpu/mlp_train.py -- bf16 12 cuda
"""
import sys

import torch

from perfkit.workloads.mlp import mlp_problem

precision, steps, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
problem = mlp_problem(batch=4096, features=512, hidden=2048, layers=4)
model = problem.make_model().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
batches = [tuple(t.to(device) for t in (problem.make_batch(s)[0][0], problem.make_batch(s)[1])) for s in range(4)]
for step in range(steps):
    inputs, target = batches[step % len(batches)]
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = problem.loss_fn(model(inputs), target)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
