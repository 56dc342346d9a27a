"""The GPU side of the replay's graph (``perfkit.analysis.step.gpu_edges``): which recorded latencies it keeps, which
waits it holds, one row each side of HELD_WAIT_US and LAUNCH_LATENCY_TIMES;
cross-stream waits and blocking launches. No ../shared."""
from __future__ import annotations

import numpy as np
import pytest

from perfkit.analysis.step import gpu_edges
from perfkit.analysis.step.graph import rank_graphs
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def graph(tmp_path, b):
    return rank_graphs(load_trace(b.write(tmp_path / "t.json"), use_cache=False))[0]


def one_kernel(after_launch: float, n_quick: int = 0):
    """A kernel starting ``after_launch`` us after its launch returns on an idle stream; ``n_quick`` kernels before
    it (on another stream) that start 4 us after theirs set the rank's typical launch latency."""
    b = TraceBuilder()
    b.step(0, 0, 20_000)
    for i in range(n_quick):
        b.launch(f"q{i}", 10 + 20 * i, 5, 19 + 20 * i, 2, stream=9)
    b.launch("k", 5_000, 10, 5_010 + after_launch, 50)
    return b


def the_kernel(g, b, after):
    return int(np.flatnonzero(g.gpu["start"] == 5_010 + after + b.base_us)[0])


@pytest.mark.parametrize("after", [4.0, 100.0, 999.0])
def test_a_latency_after_a_launch_under_the_hold_is_kept_as_recorded(tmp_path, after):
    b = one_kernel(after, n_quick=3)
    g = graph(tmp_path, b)
    k = the_kernel(g, b, after)
    assert g.gpu["launch_lat"][k] == pytest.approx(after) and g.gpu["wait_lost"][k] == 0


@pytest.mark.parametrize("after, held", [(999.0, False), (1_000.0, True)])  # HELD_WAIT_US
def test_a_wait_the_trace_does_not_explain_is_held_from_a_millisecond(tmp_path, after, held):
    b = one_kernel(after, n_quick=3)
    g = graph(tmp_path, b)
    k = the_kernel(g, b, after)
    assert bool(np.isfinite(g.gpu["base"][k])) is held
    assert bool(g.gpu["wait_lost"][k] > 0) is held


@pytest.mark.parametrize("after, held", [(1_499.0, False), (1_500.0, True)])  # LAUNCH_LATENCY_TIMES x 150 us
def test_the_hold_after_a_launch_grows_with_a_slow_devices_launch_latency(tmp_path, after, held):
    b = TraceBuilder()
    b.step(0, 0, 20_000)
    for i in range(3):  # a ROCm-like rank: kernels start 150 us after their launch
        b.launch(f"q{i}", 10 + 400 * i, 5, 165 + 400 * i, 2, stream=9)
    b.launch("k", 5_000, 10, 5_010 + after, 50)
    g = graph(tmp_path, b)
    assert bool(np.isfinite(g.gpu["base"][the_kernel(g, b, after)])) is held


@pytest.mark.parametrize("gap, held", [(999.0, False), (1_000.0, True)])  # HELD_WAIT_US after the queue
def test_a_gap_after_the_previous_kernel_is_kept_under_the_hold(tmp_path, gap, held):
    b = TraceBuilder()
    b.step(0, 0, 4_000)
    b.launch("a", 10, 5, 100, 100)
    b.launch("b", 20, 5, 200 + gap, 100)                 # queued behind a, starts ``gap`` after it
    g = graph(tmp_path, b)
    assert g.gpu["cross"][1] == -1 and bool(np.isfinite(g.gpu["base"][1])) is held
    assert g.gpu["gap"][1] == pytest.approx(g.typical["gap"] if held else gap)


def test_a_kernel_that_waited_for_another_stream_gets_that_edge(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 2_000)
    b.launch("copy_kernel", 10, 5, 20, 500, stream=3)
    b.launch("gemm", 30, 5, 525, 100)                    # launched at 35, idle stream, starts when stream 3 is done
    g = graph(tmp_path, b)
    gemm = int(np.flatnonzero(g.gpu["lane"] != g.gpu["lane"][0])[0]) if g.gpu["lane"][0] != g.gpu["lane"][1] else 1
    other = 1 - gemm
    assert g.gpu["cross"][gemm] == other and g.gpu["cross_lat"][gemm] == pytest.approx(5.0)


def test_a_blocking_copy_released_inside_its_call_is_the_calls_doing(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 2_000)
    b.memcpy("HtoD", "Pageable", 10, 1_200, 160, 1_000, 1 << 20)  # staged 150 us into the call
    g = graph(tmp_path, b)
    assert g.gpu["released_at_start"][0] == 1 and not np.isfinite(g.gpu["base"][0])
    assert g.gpu["launch_lat"][0] == pytest.approx(150.0)


def test_each_event_carries_its_columns_and_the_notes_count_what_is_left_out(tmp_path):
    """A launched kernel; one with no launch in the trace (its 30 us are unlaunched); one held 2 ms after its queue."""
    b = TraceBuilder()
    b.step(0, 0, 10_000)
    b.launch("a", 10, 5, 20, 100)                       # 5 us after its launch returns
    b.kernel("orphan", 3_000, 30, stream=9)
    b.launch("c", 30, 5, 2_200, 50)                     # queued behind a (ends 120): 2,080 us unexplained
    g = graph(tmp_path, b)
    gpu = g.gpu
    assert {"start", "end", "dur", "lane", "kind", "label", "prev", "gap", "launch_seg", "launch_at_end",
            "launch_lat", "cross", "cross_lat", "base", "launch_point", "released_at_start", "wait_lost"} <= set(gpu)
    by_start = {float(s - b.base_us): i for i, s in enumerate(gpu["start"])}
    a, orphan, c = by_start[20.0], by_start[3_000.0], by_start[2_200.0]
    assert gpu["dur"].tolist() == pytest.approx((gpu["end"] - gpu["start"]).tolist())
    assert gpu["dur"][orphan] == pytest.approx(30.0) and gpu["label"].dtype == np.int64
    assert [gpu[c].dtype for c in ("launch_seg", "launch_at_end", "cross", "released_at_start")] == [
        np.int64, bool, np.int64, np.int64]
    assert gpu["cross"].tolist() == [-1, -1, -1]
    assert gpu["launch_seg"][orphan] == -1 and gpu["launch_lat"][orphan] == 0.0 and np.isnan(gpu["launch_point"][orphan])
    assert gpu["gap"][a] == 0.0 and gpu["cross_lat"][a] == 0.0 and gpu["released_at_start"][a] == 0
    assert gpu["launch_lat"][a] == pytest.approx(5.0) and gpu["launch_point"][a] == pytest.approx(15.0 + b.base_us)
    assert gpu["wait_lost"][c] == pytest.approx(2_080.0 - g.typical["gap"]) and gpu["wait_lost"][a] == 0.0
    assert g.notes == {"unexplained_waits": 1, "unexplained_us": pytest.approx(gpu["wait_lost"][c]),
                       "unlaunched": 1, "unlaunched_us": pytest.approx(30.0)}


SLACK = gpu_edges.QUEUE_SLACK_US


@pytest.mark.parametrize("values, typical", [
    ([0.0], 0.0), ([SLACK], SLACK),                  # both ends of the range a latency is typical in
    ([-1.0, SLACK + 1.0], 9.0), ([], 9.0),           # none in range: the default
    ([-1.0, 2.0, 4.0, SLACK + 1.0], 3.0),
])
def test_typical_is_the_median_within_the_queue_slack(values, typical):
    assert gpu_edges._typical(np.array(values, dtype=float), 9.0) == pytest.approx(typical)


def test_latency_on_each_kind_of_edge():
    """Binding and kept: as recorded; binding and held: the typical; not binding: the typical, at most as recorded."""
    obs, binding, kept = np.array([2.0, 1.0, 5.0, 1.0]), np.array([1, 1, 0, 0], bool), np.array([1, 0, 1, 1], bool)
    assert gpu_edges._latency(obs, binding, kept, 3.0).tolist() == [2.0, 3.0, 3.0, 1.0]
    assert gpu_edges._latency(np.array([np.inf]), np.array([True]), np.array([True]), 3.0).tolist() == [3.0]
