"""Layers of ``perfkit.analysis.step.layers`` on tiny traces: untraced time between dense launches, the
refill after a sync, blocking on collectives."""
from __future__ import annotations

import pytest

from perfkit.analysis.step.cpu_bound import cpu_bound
from perfkit.analysis.step.rules import DENSE_LAUNCH_GAP_US
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def _steps(tmp_path, b):
    return cpu_bound(load_trace(b.write(tmp_path / "t.json"), use_cache=False)).steps.iloc[0]


@pytest.mark.parametrize("gap, counted", [(DENSE_LAUNCH_GAP_US, True), (DENSE_LAUNCH_GAP_US + 1, False)])
def test_untraced_time_between_launches_is_issuing_up_to_the_gap(tmp_path, gap, counted):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("k1", 100, 5, 106, 2)
    b.launch("k2", 105 + gap, 5, 111 + gap, 2)
    row = _steps(tmp_path, b)
    # the gap less the 2 us the first kernel runs in it (GPU busy is not idle time)
    assert row["untraced_launch_idle_us"] == pytest.approx(gap - 2 if counted else 0.0)


def test_the_gpu_idle_after_a_sync_until_new_work_is_the_syncs(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("k1", 0, 5, 10, 300)               # runs 10-310
    b.sync("cudaStreamSynchronize", 20, 295)    # returns at 315
    b.cpu_op("aten::python_work", 330, 200)     # the host's next work, GPU idle
    b.launch("k2", 600, 5, 610, 100)            # the next GPU work at 610
    row = _steps(tmp_path, b)
    # idle during the sync (310-315) and the refill (315-610)
    assert row["sync_idle_us"] == pytest.approx(300.0)


def test_blocking_mostly_under_a_collective_is_communication(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("ncclDevKernel_AllReduce", 0, 5, 10, 500)      # 10-510
    b.sync("cudaStreamSynchronize", 100, 420)               # 100-520: 410 of 420 under the collective
    b.sync("cudaStreamSynchronize", 600, 100)               # 600-700: nothing under it
    row = _steps(tmp_path, b)
    assert row["sync_comm_us"] == pytest.approx(420.0) and row["sync_us"] == pytest.approx(520.0)


@pytest.mark.parametrize("setup_us, pooled", [
    (0, 292_980.0),        # the untraced gap after the call's stretch (it ends with the first kernel, +20 us)
    (700_000, 0.0),        # a 700 ms set-up op touching the call: the call is under half its stretch
])
def test_untraced_time_around_a_first_call_is_warm_up(tmp_path, setup_us, pooled):
    """An A100 model's first call: one 629.6 ms cudaLaunchKernel and 293 ms of untraced host time around it. The
    gap joins the warm-up when the cold call is at least half of its stretch of traced activity."""
    b = TraceBuilder()
    b.step(0, 0, 2_000_000)
    if setup_us:
        b.cpu_op("aten::setup_once", 1_000 - setup_us + 1_000, setup_us - 1_000)  # ends where the first call starts
    b.cpu_op("aten::addmm", 1_000, 629_700)
    b.launch("first_gemm", 1_050, 629_600, 630_700, 20)
    t = 630_700 + 293_000                                              # untraced until the next call
    for _ in range(40):
        b.cpu_op("aten::addmm", t, 30)
        b.launch("gemm", t + 5, 8, t + 15, 20)
        t += 50
    row = _steps(tmp_path, b)
    assert row["warmup_us"] == pytest.approx(629_700 + pooled)
