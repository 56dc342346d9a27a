"""The pre-Kineto export of ``torch.autograd.profiler`` (a bare JSON array, ``pid`` "CPU functions" and "CUDA
functions", no ``cat``) is read as host ops and kernels, not as markers."""
from __future__ import annotations

import gzip
import json

import pytest

import perfkit
from perfkit.trace import load_trace


def _legacy(path, kernels: bool):
    events, t = [], 0
    for _ in range(10):
        events.append({"name": "aten::mm", "ph": "X", "ts": t, "dur": 45, "tid": 0, "pid": "CPU functions", "args": {}})
        if kernels:
            events.append({"name": "volta_sgemm_128x64_nn", "ph": "X", "ts": t + 5, "dur": 30, "tid": 0,
                           "pid": "CUDA functions", "args": {}})
        t += 50
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as f:
        json.dump(events, f)
    return path


@pytest.mark.parametrize("name", ["legacy.json", "legacy.json.gz"])
def test_ops_and_kernels_of_a_pre_kineto_export_are_read(tmp_path, name):
    trace = load_trace(_legacy(tmp_path / name, kernels=True), use_cache=False)
    cats = trace.events["cat"].astype(str).value_counts().to_dict()
    assert cats == {"cpu_op": 10, "kernel": 10}
    assert trace.has_gpu_events and perfkit.kernels(trace).totals["kernel_us"] == 300


def test_a_cpu_only_pre_kineto_export_gets_a_host_verdict(tmp_path):
    d = perfkit.diagnose(load_trace(_legacy(tmp_path / "cpu.json", kernels=False), use_cache=False))
    assert d.verdict == "CPU-only trace" and d.numbers[0]["text"].startswith("CPU op aten::mm")
