"""Which copy launches block the host (``perfkit.analysis.sync_points.find``): a table of copy names as CUDA and
ROCm write them, and one synthetic ROCm trace through ``syncs`` (no ../shared)."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.classify import copy_direction, copy_memory
from perfkit.analysis.sync_points.find import _blocking_copies, syncs
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


@pytest.mark.parametrize("copy, launch, kind", [
    pytest.param("Memcpy DtoH (Device -> Pageable)", "cudaMemcpyAsync", "memcpy_dtoh", id="dtoh-pageable"),
    pytest.param("Memcpy DtoH (Device -> Pinned)", "cudaMemcpyAsync", None, id="dtoh-pinned-async"),
    pytest.param("Memcpy DtoH (Device -> Pinned)", "cudaMemcpy", "memcpy_dtoh", id="dtoh-pinned-synchronous-launch"),
    # ROCm names the host side "Host" only: not known to be pinned, so it blocks like a pageable copy
    pytest.param("Memcpy DtoH (Device -> Host)", "hipMemcpyAsync", "memcpy_dtoh", id="dtoh-rocm-host"),
    pytest.param("Memcpy HtoD (Pageable -> Device)", "cudaMemcpyAsync", "memcpy_htod_pageable", id="htod-pageable"),
    pytest.param("Memcpy HtoD (Pinned -> Device)", "cudaMemcpyAsync", None, id="htod-pinned"),
    pytest.param("Memcpy HtoD (Host -> Device)", "hipMemcpyAsync", None, id="htod-rocm-host"),
    pytest.param("Memcpy DtoD (Device -> Device)", "cudaMemcpyAsync", None, id="dtod"),
])
def test_blocking_copy_table(copy, launch, kind):
    copies = pd.DataFrame({"direction": [copy_direction(copy)], "memory": [copy_memory(copy)],
                           "launch_name": [launch]}, index=[7])
    found = {k for k, labels in _blocking_copies(copies).items() if 7 in labels}
    assert found == ({kind} if kind else set())


def test_a_rocm_device_to_host_copy_is_a_sync_point(tmp_path):
    b = TraceBuilder(gpu_name="AMD Instinct MI300X")
    b.step(0, 0, 1_000)
    b.step(1, 1_000, 1_000)
    b.cpu_op("aten::copy_", 100, 300)
    b.memcpy("DtoH", "Host", 110, 250, 120, 200, 4096, launch_name="hipMemcpyAsync")  # Memcpy DtoH (Device -> Host)
    result = syncs(load_trace(b.write(tmp_path / "t.json")))
    points = result.sync_points
    assert points["kind"].tolist() == ["memcpy_dtoh"]
