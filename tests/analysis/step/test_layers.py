"""Layers of ``perfkit.analysis.step.layers`` on tiny traces: untraced time between dense launches, the
refill after a sync, blocking on collectives."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.host_ops import HOST_CATEGORIES, host_events
from perfkit.analysis.step.cpu_bound import cpu_bound
from perfkit.analysis.step.layers import (LAYER_COLUMNS, host_compute_ops, mostly_under, refills, step_layers,
                                          untraced_around)
from perfkit.analysis.step.rules import DENSE_LAUNCH_GAP_US
from perfkit.analysis.step.warmup import warmup_events
from perfkit.trace import load_trace
from perfkit.trace.ancestry import nest
from perfkit.trace.steps import step_windows

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


# --- every layer on small evidence (mutation score, issue 56) -------------------------------------

def _layers(tmp_path, b):
    """``step_layers`` of the trace's windows, called as ``cpu_bound`` calls it (no verdicts, no replay)."""
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    host = host_events(trace, HOST_CATEGORIES)
    return step_layers(trace, host, nest(host), step_windows(trace), warmup_events(trace, host=host))


def _layered() -> TraceBuilder:
    """One 2000 us step with each layer in its own stretch (times in the comments)."""
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 2000)
    b.dataloader(0, 100)
    b.annotation("compile_inner (dynamo_timed)", 100, 100)
    b.cpu_op("aten::mm", 200, 60)                         # launching, less the 4 us of aten::empty inside it
    b.cpu_op("aten::empty", 202, 4)                       # host compute
    b.launch("gemm", 210, 10, 230, 170)                   # GPU 230-400
    b.sync("cudaStreamSynchronize", 270, 140)             # returns at 410; GPU idle 400-660 (sync and refill)
    b.cpu_op("aten::add", 420, 100)                       # host compute, GPU idle
    b.python("model.py(5): f", 520, 100)                  # Python at work
    b.python("model.py(9): fwd", 620, 80)                 # Python issuing work: 75 us of its own
    b.launch("k2", 650, 5, 660, 40)                       # GPU 660-700; 700-800 untraced
    b.launch("k3", 800, 5, 810, 10)                       # dense launches: 805-850 and 855-900 untraced,
    b.launch("k4", 850, 5, 860, 10)                       # less their 10 us kernels
    b.launch("ncclDevKernel_AllReduce", 900, 5, 910, 200)  # GPU 910-1110
    b.kernel("overlapping", 1000, 50, stream=9)           # hides 50 us of the collective
    b.sync("cudaStreamSynchronize", 950, 170)             # 160 of its 170 us under the collective; refill to 1210
    b.memcpy("HtoD", "Pinned", 1200, 5, gpu_ts=1210, gpu_dur=50, nbytes=64)
    return b


LAYERED = {"warmup_us": 0.0, "gpu_busy_us": 480.0, "gpu_busy_warmup_us": 0.0, "copy_busy_us": 50.0, "comm_us": 200.0,
           "comm_exposed_us": 150.0, "comm_exposed_warmup_us": 0.0, "dataloader_us": 100.0, "compile_us": 100.0,
           "sync_us": 310.0, "sync_blocked_us": 310.0, "sync_comm_us": 170.0, "sync_idle_us": 260.0 + 100.0,
           "launch_side_us": 56.0 + 5 * 5, "host_compute_us": 104.0, "host_other_us": 185.0, "host_busy_us": 695.0,
           "python_us": 175.0, "untraced_us": 1010.0, "dataloader_idle_us": 100.0, "launch_side_idle_us": 26.0 + 25.0,
           "host_compute_idle_us": 104.0, "python_idle_us": 135.0, "python_launch_idle_us": 35.0,
           "untraced_launch_idle_us": 70.0}


def test_each_layer_of_a_step_with_every_kind_of_time(tmp_path):
    row = _layers(tmp_path, _layered()).iloc[0]
    assert list(row.index) == LAYER_COLUMNS
    assert row.to_dict() == LAYERED


SETUP = {"op": TraceBuilder.cpu_op, "python": TraceBuilder.python,
         "loader": lambda b, _, ts, dur: b.dataloader(ts, dur),
         "compile": lambda b, _, ts, dur: b.annotation("compile_inner (dynamo_timed)", ts, dur)}


def _cold_call(setup_us: float = 0.0, kind: str = "op", late_comm: bool = True, **kw) -> TraceBuilder:
    """A 2000 us first aten::addmm (warm-up: five 30 us calls follow) over 600 us of GPU work and a 500 us collective;
    a 50 us op 50 us before it, or a set-up span (``kind``) of ``setup_us`` touching it; 400 us untraced after it."""
    b = TraceBuilder(with_stack=True, **kw)
    b.step(0, 0, 10_000)
    if setup_us:
        SETUP[kind](b, "aten::setup_once" if kind == "op" else "setup.py(1): setup", 3000 - setup_us, setup_us)
    else:
        b.cpu_op("aten::zeros", 2900, 50)
    b.cpu_op("aten::addmm", 3000, 2000)
    b.launch("first_gemm", 3050, 20, 3100, 600)                  # GPU 3100-3700, inside the warm-up
    b.kernel("ncclDevKernel_AllReduce", 4000, 500, stream=9)     # exposed, inside the warm-up
    if late_comm:
        b.kernel("ncclDevKernel_AllReduce", 8000, 100, stream=9)     # exposed, after it
    for t in (5400, 5500, 5600, 5700, 5800):
        b.cpu_op("aten::addmm", t, 30)
        b.launch("gemm", t + 5, 5, t + 10, 10)
    return b


@pytest.mark.parametrize("setup_us, warmup_us", [
    (0, 50 + 2000 + 400),   # the untraced gaps on both sides of the call's stretch join it
    (2000, 2000 + 400),     # a set-up op as long as the call: the call is half its stretch, the gap after joins
    (2001, 2000),           # a longer one: the call is under half of it, no gap joins
])
def test_warm_up_takes_its_gpu_work_and_exposed_collectives_along(tmp_path, setup_us, warmup_us):
    row = _layers(tmp_path, _cold_call(setup_us)).iloc[0]
    assert row["warmup_us"] == warmup_us
    assert (row["gpu_busy_us"], row["gpu_busy_warmup_us"]) == (600 + 600 + 5 * 10, 600 + 500)
    assert (row["comm_exposed_us"], row["comm_exposed_warmup_us"]) == (600.0, 500.0)
    traced = (setup_us or 50) + 100 + 5 * 30                     # the set-up op or aten::zeros, comm, later calls
    assert row["untraced_us"] == 10_000 - warmup_us - traced
    # between the later launches (5410-5505, ...): 5430-5500 untraced, four times; the warm-up is not counted twice
    assert row["untraced_launch_idle_us"] == 4 * 70.0


@pytest.mark.parametrize("kind", ["python", "loader", "compile"])
def test_a_set_up_span_of_any_traced_kind_bounds_the_warm_up(tmp_path, kind):
    assert _layers(tmp_path, _cold_call(2001, kind)).iloc[0]["warmup_us"] == 2000


def test_exposed_collectives_all_inside_the_warm_up_are_all_its(tmp_path):
    row = _layers(tmp_path, _cold_call(late_comm=False)).iloc[0]
    assert (row["comm_exposed_us"], row["comm_exposed_warmup_us"]) == (500.0, 500.0)


@pytest.mark.parametrize("under_us, comm", [(50, True), (49, False)])
def test_a_sync_is_communication_from_half_of_it_under_a_collective(tmp_path, under_us, comm):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("ncclDevKernel_AllReduce", 0, 5, 10, 90 + under_us)     # ends at 100 + under_us
    b.sync("cudaStreamSynchronize", 100, 100)
    row = _layers(tmp_path, b).iloc[0]
    assert row["sync_comm_us"] == (100.0 if comm else 0.0)


def test_a_sync_with_no_gpu_work_after_it_idles_only_while_it_blocks(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("k", 0, 5, 10, 100)                   # 10-110
    b.sync("cudaStreamSynchronize", 50, 100)       # 50-150: the GPU idles 110-150, then nothing follows
    row = _layers(tmp_path, b).iloc[0]
    assert (row["sync_idle_us"], row["sync_us"]) == (40.0, 100.0)


@pytest.mark.parametrize("second_tid, dense_us", [(None, 45.0), (2, 0.0)])
def test_dense_launches_are_those_of_one_thread(tmp_path, second_tid, dense_us):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("k1", 100, 5, 300, 2)
    b.launch("k2", 150, 5, 310, 2, tid=second_tid)
    b.launch("k3", 152, 5, 320, 2, tid=3)          # overlaps k2's call on another thread: no gap
    row = _layers(tmp_path, b).iloc[0]
    assert row["untraced_launch_idle_us"] == dense_us


@pytest.mark.parametrize("launch_ts, driving", [(600, True), (650, False), (599, False)])
def test_python_issues_work_when_a_launch_starts_inside_its_frame(tmp_path, launch_ts, driving):
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 1000)
    b.python("model.py(9): fwd", 600, 50)
    b.launch("k", launch_ts, 0.5, 900, 10)
    row = _layers(tmp_path, b).iloc[0]
    own = 50.0 - (0.5 if launch_ts == 600 else 0.0)
    assert (row["python_idle_us"], row["python_launch_idle_us"]) == (own, own if driving else 0.0)


@pytest.mark.parametrize("start, dur, loop", [(0, 1000, True), (-5, 1010, True), (1, 999, False), (0, 999, False)])
def test_a_frame_spanning_its_step_is_the_loop_not_python_at_work(tmp_path, start, dur, loop):
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 1000)
    b.python("train.py(3): main", start, dur)
    b.cpu_op("aten::add", 100, 10)
    row = _layers(tmp_path, b).iloc[0]
    inside = min(start + dur, 1000) - max(start, 0)
    assert row["python_us"] == (0.0 if loop else inside - 10)
    assert row["untraced_us"] == (990.0 if loop else 1000 - inside)


def test_launching_is_linked_or_named_and_stays_on_its_thread(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.cpu_op("aten::mm", 0, 100)
    b.runtime("cudaLaunchKernel", 10, 5)            # named a launch, no GPU event recorded: still issuing
    b.cpu_op("aten::empty", 20, 10, tid=2)          # another thread's op does not cut aten::mm's time
    b.runtime("cudaEventRecord", 200, 10)           # neither: host work that issues nothing
    row = _layers(tmp_path, b).iloc[0]
    assert (row["launch_side_us"], row["host_compute_us"]) == (100.0, 10.0)


def _host_ops(tmp_path, b):
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    host = host_events(trace, HOST_CATEGORIES)
    return host_compute_ops(trace, host, nest(host), host["step"].to_numpy() >= 0)


def test_host_compute_ops_are_the_outermost_ops_that_launch_nothing_inside_the_steps(tmp_path):
    b = TraceBuilder()
    # the first event (label 0), written before the step around it; a later External id keeps it inside the step
    b.cpu_op("aten::to", 0, 20, external_id=1000)
    b.cpu_op("aten::copy_", 5, 10)              # inside an op that launches nothing: part of aten::to
    b.step(0, 0, 1000)
    b.cpu_op("aten::add", 110, 20)
    b.cpu_op("aten::add", 140, 10)
    b.cpu_op("aten::mm", 200, 100)
    b.launch("gemm", 210, 5, 220, 10)
    b.cpu_op("aten::empty", 220, 5)             # inside an op that launches: counted
    b.cpu_op("aten::zeros", 1100, 50)           # outside the steps
    table = _host_ops(tmp_path, b)
    assert table.to_dict("list") == {"name": ["aten::add", "aten::to", "aten::empty"], "calls": [2, 1, 1],
                                     "total_us": [30.0, 20.0, 5.0]}
    assert list(table.index) == [0, 1, 2]       # renumbered in the order of time


def test_host_compute_ops_of_equal_time_keep_the_order_they_first_ran_in(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    for name in ("aten::zz", "aten::mm", "aten::aa"):
        b.cpu_op(name, len(name) * 10 + ord(name[-1]), 10)
    assert _host_ops(tmp_path, b)["name"].tolist() == ["aten::zz", "aten::mm", "aten::aa"]


def _only(kind: str) -> TraceBuilder:
    b = TraceBuilder()
    b.step(0, 0, 100)
    if kind == "op":
        b.cpu_op("aten::add", 0, 100)
    elif kind == "launch":
        b.launch("k", 0, 5, 5, 95)
    elif kind == "kernel":
        b.kernel("k", 0, 100)
    elif kind == "annotation":
        b.annotation("## forward ##", 0, 100)     # a range of the user's: neither host work nor a layer
    else:
        b.memset(0, 5, 10, 20)
    return b


@pytest.mark.parametrize("kind, layers", [
    ("op", {"host_compute_us": 100, "host_other_us": 100, "host_busy_us": 100, "host_compute_idle_us": 100}),
    ("launch", {"gpu_busy_us": 95, "launch_side_us": 5, "host_other_us": 5, "host_busy_us": 5,
                "launch_side_idle_us": 5}),
    ("kernel", {"gpu_busy_us": 100}),
    ("annotation", {"untraced_us": 100}),
    ("memset", {"gpu_busy_us": 20, "copy_busy_us": 20, "launch_side_us": 5, "host_other_us": 5, "host_busy_us": 5,
                "launch_side_idle_us": 5, "untraced_us": 75}),
])
def test_a_step_of_one_kind_of_time_has_no_other_layer(tmp_path, kind, layers):
    row = _layers(tmp_path, _only(kind)).iloc[0]
    assert row.to_dict() == {c: float(layers.get(c, 0.0)) for c in LAYER_COLUMNS}


def test_a_sync_that_returns_while_the_gpu_works_idles_it_only_after(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("k1", 0, 5, 10, 490)                  # 10-500
    b.sync("cudaEventSynchronize", 50, 50)         # returns at 100, the GPU busy until 500
    b.launch("k2", 550, 5, 600, 100)               # next GPU work at 600: idle 500-600 is the sync's refill
    assert _layers(tmp_path, b).iloc[0]["sync_idle_us"] == 100.0


def test_refills_run_to_the_next_gpu_start_of_the_rank():
    blocking = {0: (np.array([50.0, 800.0]), np.array([100.0, 900.0])), 1: (np.array([5.0]), np.array([10.0]))}
    gpu = {0: (np.array([10.0, 600.0]), np.array([500.0, 700.0]))}
    out = refills(blocking, gpu)
    assert [a.tolist() for a in out[0]] == [[100.0], [600.0]] and [a.tolist() for a in out[1]] == [[], []]


@pytest.mark.parametrize("covered, kept", [(50.0, True), (49.0, False)])
def test_mostly_under_keeps_blocks_at_least_half_covered_rank_by_rank(covered, kept):
    blocks = {0: (np.array([0.0]), np.array([10.0])), 1: (np.array([0.0, 500.0]), np.array([100.0, 600.0]))}
    under = {1: (np.array([100.0 - covered]), np.array([100.0]))}
    out = mostly_under(blocks, under)
    assert 0 not in out and [a.tolist() for a in out[1]] == ([[0.0], [100.0]] if kept else [[], []])


def test_untraced_around_each_warm_up_call_of_each_rank():
    traced = {0: (np.array([0.0, 20.0, 40.0, 200.0]), np.array([10.0, 30.0, 100.0, 210.0]))}
    cold = pd.DataFrame({"rank": [1, 0, 0, 0, 0, 0], "ts_us": [0.0, 45.0, -5.0, 50.0, 0.0, 200.0],
                         "dur_us": [10.0, 29.0, 1.0, 30.0, 10.0, 10.0]})
    # rank 1 has no traced time; 45+29 is under half its stretch of 60 us; -5 is before any; then 50+30 (the stretch
    # 40-100, both gaps), 0+10 (the first stretch: the gap after only) and 200+10 (the last: the gap before only)
    out = untraced_around(cold, traced)
    assert out.values.tolist() == [[0, 30, 10], [0, 100, 100], [0, 10, 10], [0, 100, 100]]
    assert out["rank"].dtype.kind == "i" and (out[["ts_us", "dur_us"]].dtypes == np.float64).all()


def test_python_issues_work_only_with_a_launch_of_its_own_thread(tmp_path):
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 1000)
    b.python("model.py(9): fwd", 600, 50)
    b.launch("k1", 610, 0.5, 900, 10)
    b.runtime("cudaLaunchKernel", 720, 0.5)        # on the frame's thread, outside it
    b.python("env.py(3): step", 700, 50, tid=2)    # another thread's frame, around that time
    row = _layers(tmp_path, b).iloc[0]
    assert (row["python_idle_us"], row["python_launch_idle_us"]) == (49.5 + 49.5, 49.5)   # each less a launch


@pytest.mark.parametrize("gap, dense_us", [(0.5, 1.0), (45, 90.0)])
def test_dense_launch_gaps_of_every_thread_count(tmp_path, gap, dense_us):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    for tid, ts in ((None, 100), (2, 300)):
        b.launch("k", ts, 5, 800, 2, tid=tid)
        b.launch("k", ts + 5 + gap, 5, 900, 2, tid=tid)
    assert _layers(tmp_path, b).iloc[0]["untraced_launch_idle_us"] == dense_us


def test_layers_keep_the_index_of_the_windows_asked_for(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.step(1, 100, 100)
    b.cpu_op("aten::add", 150, 10)
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    host = host_events(trace, HOST_CATEGORIES)
    out = step_layers(trace, host, nest(host), step_windows(trace).iloc[1:], warmup_events(trace, host=host))
    assert list(out.index) == [1] and out["host_compute_us"].tolist() == [10.0]


def test_a_rank_without_steps_or_compiling_leaves_the_others_layers_whole(tmp_path):
    """Rank 0: a frame and a compile span, no ProfilerStep. Rank 1: the cold call's step under a frame spanning it (the
    loop's). Rank 1 has no compile time (not less its warm-up) and its loop frame is no Python at work."""
    b = TraceBuilder(rank=0, world_size=2, with_stack=True)
    b.python("x.py(1): f", 0, 50)
    b.annotation("compile_inner (dynamo_timed)", 100, 100)
    b.kernel("k", 0, 10)
    one = _cold_call(rank=1, world_size=2)
    one.python("train.py(1): main", 0, 10_000)
    trace = load_trace([b.write(tmp_path / "r0.json"), one.write(tmp_path / "r1.json")], use_cache=False)
    host = host_events(trace, HOST_CATEGORIES)
    windows = step_windows(trace)
    rows = step_layers(trace, host, nest(host), windows, warmup_events(trace, host=host))
    row = rows[(windows["rank"] == 1).to_numpy()].iloc[0]
    assert row["warmup_us"] == 2450.0
    assert (row["compile_us"], row["python_us"], row["python_idle_us"]) == (0.0, 0.0, 0.0)
