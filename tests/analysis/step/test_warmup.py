"""The warm-up rules of ``perfkit.analysis.step.warmup``, one row on each side of every threshold its module
doc names: cold first steps on step windows built in the test, first calls on a synthetic trace (no ../shared)."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.step.warmup import cold_first_steps, warmup_calls
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def windows(durations, rank=0) -> pd.DataFrame:
    """Back-to-back step windows of one rank lasting ``durations`` (us)."""
    dur = pd.Series(durations, dtype=float)
    starts = dur.cumsum().shift(fill_value=0.0)
    return pd.DataFrame({"rank": rank, "step": range(len(durations)), "start_us": starts, "end_us": starts + dur,
                         "dur_us": dur})


# WARMUP_FACTOR (10x the later median), WARMUP_MIN_US (1 ms longer), MIN_LATER_STEPS (2 later steps).
# Under MIN_LATER_STEPS is not a row: with a 10x factor, the one later step of a two-step rank is a stub beside
# the first (``stub_steps``), so the rank has a single full step either way.
@pytest.mark.parametrize("durations, cold", [
    pytest.param([11_000, 1_000, 1_000], True, id="MIN_LATER_STEPS-at"),
    pytest.param([10_000, 1_000, 1_000], True, id="WARMUP_FACTOR-at"),
    pytest.param([9_999, 1_000, 1_000], False, id="WARMUP_FACTOR-under"),
    pytest.param([1_100, 100, 100], True, id="WARMUP_MIN_US-at"),
    pytest.param([1_099, 100, 100], False, id="WARMUP_MIN_US-under"),
])
def test_cold_first_step_thresholds(durations, cold):
    found = cold_first_steps(windows(durations))
    assert (len(found) == 1) is cold
    if cold:
        assert found["name"].iloc[0] == "ProfilerStep#0 (first step)" and found["cat"].iloc[0] == "step"


@pytest.mark.parametrize("compiled_us, cold", [
    pytest.param(1_100.0, False, id="COMPILE_SHARE-at: left to the compiling rule"),
    pytest.param(1_099.0, True, id="COMPILE_SHARE-under"),
])
def test_a_first_step_that_compiles_is_not_warm_up(compiled_us, cold):
    compiling = pd.DataFrame({"rank": [0], "ts_us": [0.0], "dur_us": [compiled_us]})
    assert (len(cold_first_steps(windows([11_000, 1_000, 1_000]), compiling)) == 1) is cold


def calls_trace(tmp_path, durations, name="aten::mm"):
    """One host op called with ``durations`` (us), 10 ms apart, on one thread."""
    b = TraceBuilder()
    for i, dur in enumerate(durations):
        b.cpu_op(name, i * 10_000, dur)
    return load_trace(b.write(tmp_path / "t.json"))


# A call among the first WARMUP_FIRST (3) of its name, MIN_LATER (3) calls after those, lasting
# WARMUP_FACTOR (10) times their median and at least WARMUP_MIN_US (1 ms).
@pytest.mark.parametrize("durations, warm", [
    pytest.param([1_000, 10, 10, 10, 10, 10], True, id="WARMUP_MIN_US-at"),
    pytest.param([999, 10, 10, 10, 10, 10], False, id="WARMUP_MIN_US-under"),
    pytest.param([6_000, 600, 600, 600, 600, 600], True, id="WARMUP_FACTOR-at"),
    pytest.param([5_999, 600, 600, 600, 600, 600], False, id="WARMUP_FACTOR-under"),
    pytest.param([10, 10, 5_000, 10, 10, 10], True, id="WARMUP_FIRST-last-of-the-first"),
    pytest.param([10, 10, 10, 5_000, 10, 10, 10], False, id="WARMUP_FIRST-past-it"),
    pytest.param([5_000, 10, 10, 10, 10], False, id="MIN_LATER-under"),
])
def test_first_call_thresholds(tmp_path, durations, warm):
    found = warmup_calls(calls_trace(tmp_path, durations))
    assert (len(found) == 1) is warm
    if warm:
        assert found["name"].iloc[0] == "aten::mm" and found["dur_us"].iloc[0] == max(durations)
