"""The PPO reference workload as a plain training script (no profiler code), for ``perfkit profile``:

    perfkit profile scripts/gpu/ppo_train.py -- item_logging 12 cuda
"""
import sys

from perfkit.workloads.registry import make_workload

variant, steps, device = sys.argv[1], int(sys.argv[2]), sys.argv[3]
workload = make_workload("ppo", device, variant=variant)
for _ in range(steps):
    workload.step()
workload.close()
