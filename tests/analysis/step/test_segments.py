"""The segment flags of ``perfkit.analysis.step.segments`` (what each piece of a host thread's timeline is), one row
each side of ISSUING_PYTHON_US and rules.DENSE_LAUNCH_GAP_US, on synthetic traces. No ../shared."""
from __future__ import annotations

import numpy as np
import pytest

from perfkit.analysis.step import segments
from perfkit.analysis.step.graph import rank_graphs
from perfkit.analysis.step.rules import DENSE_LAUNCH_GAP_US
from perfkit.analysis.step.segments import F_ISSUING, F_LOADER, F_OPTIMIZER, F_OWN, F_TRACED
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def graph(tmp_path, b):
    return rank_graphs(load_trace(b.write(tmp_path / "t.json"), use_cache=False))[0]


def flags_at(g, b, t: float) -> int:
    """The flags of the main thread's segment holding trace time ``t`` (us from the builder's base)."""
    s = g.seg
    at = np.flatnonzero((s["thread"] == 0) & (s["start"] <= t + b.base_us) & (s["end"] > t + b.base_us))
    return int(s["flags"][at[0]])


@pytest.mark.parametrize("apart, issuing", [(segments.ISSUING_PYTHON_US, True), (segments.ISSUING_PYTHON_US + 1, False)])
def test_python_between_two_launches_a_millisecond_apart_is_issuing(tmp_path, apart, issuing):
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 3_000)
    b.python("model.py(10): forward", 0, 2_900)
    b.launch("a", 10, 10, 30, 5)
    b.launch("b", 20 + apart, 10, 40 + apart, 5)       # Python alone between the two launch calls
    g = graph(tmp_path, b)
    f = flags_at(g, b, 30)
    assert f & F_TRACED and bool(f & F_ISSUING) is issuing and not f & F_OWN


def test_python_in_a_frame_that_launches_nothing_is_the_hosts_own(tmp_path):
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 1_000)
    b.python("train.py(5): main", 0, 1_000)
    b.launch("a", 10, 10, 30, 5)
    b.python("env.py(40): step", 25, 50)               # launches nothing, between launches 60 us apart
    b.launch("b", 80, 10, 100, 5)
    g = graph(tmp_path, b)
    assert not flags_at(g, b, 50) & F_ISSUING and flags_at(g, b, 50) & F_TRACED


@pytest.mark.parametrize("gap, issuing", [(DENSE_LAUNCH_GAP_US, True), (DENSE_LAUNCH_GAP_US + 1, False)])
def test_untraced_time_between_dense_launches_is_issuing(tmp_path, gap, issuing):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.launch("a", 10, 10, 30, 5)
    b.launch("b", 20 + gap, 10, 40 + gap, 5)
    g = graph(tmp_path, b)
    f = flags_at(g, b, 21)
    assert not f & F_TRACED and bool(f & F_ISSUING) is issuing


def test_ops_that_launch_nothing_are_own_work_inside_ops_that_do(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.cpu_op("aten::linear", 10, 300)
    b.cpu_op("aten::empty", 20, 50)                    # launches nothing, inside the op that does
    b.launch("gemm", 100, 10, 120, 50)
    g = graph(tmp_path, b)
    assert flags_at(g, b, 40) & F_OWN and not flags_at(g, b, 40) & F_ISSUING
    assert flags_at(g, b, 200) & F_ISSUING and not flags_at(g, b, 200) & F_OWN


def test_the_dataloader_and_the_optimizer_are_marked(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.dataloader(10, 200)
    b.annotation("Optimizer.step#Adam.step", 500, 300)
    b.launch("k", 600, 10, 620, 5)
    g = graph(tmp_path, b)
    assert flags_at(g, b, 100) & F_LOADER and flags_at(g, b, 550) & F_OPTIMIZER
    assert not flags_at(g, b, 300) & (F_LOADER | F_OPTIMIZER)


def test_a_warmup_segment_costs_its_calls_later_median_once_warm(tmp_path):
    b = TraceBuilder()
    for s in range(7):
        b.step(s, s * 10_000, 10_000)
        b.cpu_op("aten::conv2d", s * 10_000 + 10, 8_000 if s == 0 else 500)
        b.launch("k", s * 10_000 + 9_000, 10, s * 10_000 + 9_020, 5)
    g = graph(tmp_path, b)
    first = np.flatnonzero((g.seg["flags"] & segments.F_WARMUP) > 0)
    assert len(first) and g.seg["steady"][first].sum() == pytest.approx(500.0)
