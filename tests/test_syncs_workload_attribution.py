"""Syncs planted in perfkit's own reference workloads are attributed to the workload's lines."""
import torch

from perfkit.detect.runtime import detect_syncs
from perfkit.workloads.registry import make_workload


def test_ppo_item_logging_syncs_point_into_ppo_py():
    torch.manual_seed(0)
    with make_workload("ppo", device="cpu", variant="item_logging") as wl:
        wl.step()
        with detect_syncs(treat_cpu_as_device=True) as det:
            wl.step()
    items = [e for e in det.report.events if e.op == "item"]
    assert items and all(e.file.endswith("workloads/ppo.py") for e in items)


def test_ppo_batched_metrics_has_no_item_sync_in_ppo_py():
    torch.manual_seed(0)
    with make_workload("ppo", device="cpu", variant="batched_metrics") as wl:
        wl.step()
        with detect_syncs(treat_cpu_as_device=True) as det:
            wl.step()
    assert not [e for e in det.report.events if e.op == "item" and e.file.endswith("workloads/ppo.py")]
