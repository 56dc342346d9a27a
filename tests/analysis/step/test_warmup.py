"""The warm-up rules of ``perfkit.analysis.step.warmup``, one row on each side of every threshold its module
doc names: cold first steps on step windows built in the test, first calls on a synthetic trace (no ../shared)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.step.warmup import (COLUMNS, _by_name, _launched, _text_order_codes, cold_first_steps,
                                          warmup_calls, warmup_count_text, warmup_events, warmup_text)
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


# -- a cold first step, row by row --------------------------------------------------------------------------
def test_a_cold_first_step_is_one_row_with_the_median_of_the_later_steps():
    found = cold_first_steps(windows([20_000, 1_000, 1_100, 1_200]))
    assert found.to_dict("records") == [{"label": -1, "rank": 0, "name": "ProfilerStep#0 (first step)", "cat": "step",
                                         "ts_us": 0.0, "dur_us": 20_000.0, "later_median_us": 1_100.0,
                                         "later_calls": 3}]


def test_each_rank_gets_its_cold_first_step_in_the_order_the_ranks_come():
    few = windows([20_000, 1_000], rank=2)  # one later step: under MIN_LATER_STEPS, the next rank is still looked at
    found = cold_first_steps(pd.concat([few, windows([20_000, 1_000, 1_000], rank=1),
                                        windows([30_000, 1_000, 1_000], rank=0)], ignore_index=True))
    assert found["rank"].tolist() == [1, 0] and found["dur_us"].tolist() == [20_000.0, 30_000.0]


def test_no_cold_first_step_is_an_empty_table_with_the_columns():
    found = cold_first_steps(windows([1_000, 1_000, 1_000]))
    assert found.empty and list(found.columns) == COLUMNS


def trace_of(tmp_path, build):
    b = TraceBuilder()
    build(b)
    return load_trace(b.write(tmp_path / "t.json"))


# -- launch calls: first by the kernel they launch, against every other call of their name ---------------------
def launches(b, kernels_and_durations):
    for i, (kernel, dur) in enumerate(kernels_and_durations):
        b.launch(kernel, i * 10_000, dur, i * 10_000 + dur + 5, 5)


@pytest.mark.parametrize("calls, found", [
    pytest.param([("k1", 5_000), ("k2", 10), ("k2", 10), ("k1", 10)], [("cudaLaunchKernel", 5_000.0, 10.0, 3)],
                 id="the-first-kernel-launched-MIN_LATER-at"),
    pytest.param([("k1", 5_000), ("k2", 10), ("k2", 10)], [], id="MIN_LATER-under"),
    pytest.param([("k1", 10), ("k1", 10), ("k1", 10), ("k1", 10), ("k2", 5_000), ("k2", 10)],
                 [("cudaLaunchKernel", 5_000.0, 10.0, 5)], id="a-kernel-first-launched-fifth"),
    pytest.param([("k1", 10), ("k1", 10), ("k1", 10), ("k1", 10), ("k1", 5_000)], [], id="not-the-first-of-its-kernel"),
    pytest.param([("k1", 10), ("k1", 10), ("k1", 10), ("k2", 1_000)], [("cudaLaunchKernel", 1_000.0, 10.0, 3)],
                 id="WARMUP_MIN_US-at"),
    pytest.param([("k1", 10), ("k1", 10), ("k1", 10), ("k2", 999)], [], id="WARMUP_MIN_US-under"),
    pytest.param([("k1", 200), ("k1", 200), ("k1", 200), ("k2", 2_000)], [("cudaLaunchKernel", 2_000.0, 200.0, 3)],
                 id="WARMUP_FACTOR-at"),
    pytest.param([("k1", 200), ("k1", 200), ("k1", 200), ("k2", 1_999)], [], id="WARMUP_FACTOR-under"),
])
def test_a_launch_is_first_by_its_kernel(tmp_path, calls, found):
    got = warmup_calls(trace_of(tmp_path, lambda b: launches(b, calls)))
    assert list(got.columns) == COLUMNS
    assert list(zip(got["name"], got["dur_us"], got["later_median_us"], got["later_calls"])) == found
    assert (got["cat"] == "cuda_runtime").all() and got["later_calls"].dtype == np.int64


def test_no_host_call_is_an_empty_table_with_the_columns(tmp_path):
    got = warmup_calls(trace_of(tmp_path, lambda b: b.kernel("k", 0, 10)))
    assert got.empty and list(got.columns) == COLUMNS


@pytest.mark.parametrize("name", ["cudaStreamSynchronize", "cudaDeviceSynchronize", "aten::item"])
def test_calls_that_wait_for_the_gpu_are_never_warm_up(tmp_path, name):
    def build(b):
        for i, dur in enumerate([5_000, 10, 10, 10, 10, 10]):
            b.cpu_op("aten::mm", i * 10_000, dur)  # the same durations: a warm-up, as a control
            if name.startswith("aten::"):
                b.cpu_op(name, i * 10_000 + 6_000, dur + 2)
                b.sync("cudaStreamSynchronize", i * 10_000 + 6_001, dur)
            else:
                b.sync(name, i * 10_000 + 6_000, dur)
    got = warmup_calls(trace_of(tmp_path, build))
    assert got["name"].tolist() == ["aten::mm"]


def test_only_the_outermost_of_a_nest_of_slow_first_calls_is_listed(tmp_path):
    def build(b):  # the outer op is the trace's first event (label 0); the slow inner one is two levels down
        for i, dur in enumerate([6_000, 10, 10, 10, 10, 10]):
            t = i * 10_000
            b.cpu_op("aten::linear", t, dur + 20)
            b.cpu_op("aten::addmm", t + 5, dur + 10)
            b.cpu_op("aten::mm", t + 10, dur)
    got = warmup_calls(trace_of(tmp_path, build))
    assert got[["label", "name"]].to_dict("records") == [{"label": 0, "name": "aten::linear"}]


def test_a_slow_first_call_two_levels_under_another_is_not_listed_again(tmp_path):
    def build(b):
        for i in range(3):  # the middle op's first calls come earlier: in the nest it is not a first call
            b.cpu_op("aten::addmm", i * 100, 10)
        for i, dur in enumerate([6_000, 10, 10, 10, 10, 10]):
            t = 1_000 + i * 10_000
            b.cpu_op("aten::linear", t, dur + 20)
            b.cpu_op("aten::addmm", t + 5, dur + 10)
            b.cpu_op("aten::mm", t + 10, dur)
    assert warmup_calls(trace_of(tmp_path, build))["name"].tolist() == ["aten::linear"]


def test_host_ops_and_launches_are_each_held_to_their_own_rule(tmp_path):
    def build(b):
        for i, dur in enumerate([5_000, 10, 10, 10, 10, 10]):
            b.cpu_op("aten::mm", i * 10_000, dur)
        launches(b, [("k1", 10), ("k1", 10), ("k1", 10), ("k2", 3_000)])  # k2's first launch: 4th of its name
    got = warmup_calls(trace_of(tmp_path, build))
    assert list(zip(got["name"], got["later_median_us"], got["later_calls"])) == [
        ("aten::mm", 10.0, 3), ("cudaLaunchKernel", 10.0, 3)]


@pytest.mark.parametrize("second_step, found", [
    pytest.param([5_000, 10, 10], [], id="slow-first-call-in-both-steps: a cost each step pays"),
    pytest.param([10, 10, 10], ["aten::conv2d"], id="slow-in-the-first-step-only"),
])
def test_a_first_call_slow_in_every_step_is_not_warm_up(tmp_path, second_step, found):
    def build(b):
        for step, durations in enumerate([[5_000, 10, 10], second_step]):
            t0 = step * 100_000
            b.step(step, t0, 90_000)
            for i, dur in enumerate(durations):
                b.cpu_op("aten::conv2d", t0 + 10 + i * 10_000, dur)
    assert warmup_calls(trace_of(tmp_path, build))["name"].tolist() == found


def test_the_warm_up_is_the_cold_first_step_and_the_first_calls_outside_it(tmp_path):
    def build(b):
        b.step(0, 0, 50_000)
        b.cpu_op("aten::mm", 0, 30_000)           # inside the cold first step from its first microsecond: not listed
        b.step(1, 50_000, 8_000)
        b.cpu_op("aten::conv2d", 50_000, 5_000)   # a first call as the cold step ends: listed
        for s in range(2, 5):
            t0 = 58_000 + (s - 2) * 1_000
            b.step(s, t0, 1_000)
            b.cpu_op("aten::mm", t0 + 10, 10)
            b.cpu_op("aten::mm", t0 + 50, 10)
            b.cpu_op("aten::conv2d", t0 + 100, 10)
            b.cpu_op("aten::conv2d", t0 + 200, 10)
    trace = trace_of(tmp_path, build)
    got = warmup_events(trace)
    assert list(zip(got["name"], got["cat"], got["later_calls"])) == [
        ("ProfilerStep#0 (first step)", "step", 4), ("aten::conv2d", "cpu_op", 4)]
    assert got["ts_us"].is_monotonic_increasing and list(got.columns) == COLUMNS
    assert warmup_calls(trace)["name"].tolist() == ["aten::mm", "aten::conv2d"]


# -- the helpers: names as ordered codes, grouping by (rank, name), the kernel a launch started ------------------
def test_names_become_codes_in_text_order_unless_one_is_missing():
    codes = _text_order_codes(pd.Series(["b", "a", "b", "c"]))
    assert codes.tolist() == [1, 0, 1, 2] and codes.dtype.kind == "i"
    kept = _text_order_codes(pd.Series(["b", None]))
    assert kept[0] == "b" and pd.isna(kept[1])


def test_two_ranks_calling_one_name_are_two_groups():
    frame = pd.DataFrame({"rank": [1, 1, 0, 0], "name": [0, 0, 0, 1], "ts_us": [1.0, 2.0, 3.0, 4.0]})
    assert _by_name(frame)["group"].tolist() == [0, 1, 2, 2]


@pytest.mark.parametrize("names", [[1, 0, 1, 0], ["b", "a", "b", "a"]])  # codes, and names kept as text
def test_calls_are_grouped_by_rank_and_name_in_start_order(names):
    frame = pd.DataFrame({"rank": [1, 0, 0, 0], "name": names, "ts_us": [5.0, 4.0, 3.0, 2.0], "x": [0, 1, 2, 3]})
    out = _by_name(frame)
    assert out["x"].tolist() == [3, 1, 2, 0] and out["group"].tolist() == [0, 0, 1, 2]


def test_a_launch_is_known_by_the_first_kernel_it_started():
    links = pd.DataFrame({"cpu_index": [7, 7, 9, 4], "gpu_name": ["k2", "k1", "k1", "k2"]})
    assert _launched(links).to_dict() == {7: 0, 9: 1, 4: 0}


# -- the text ---------------------------------------------------------------------------------------------------
def _found(*rows) -> pd.DataFrame:
    return pd.DataFrame([dict(zip(("name", "cat", "dur_us", "later_median_us"), r)) for r in rows])


def test_the_warm_up_text_names_the_longest_calls_and_steps():
    found = _found(("aten::mm", "cpu_op", 421_300.0, 12.0), ("ProfilerStep#0 (first step)", "step", 842_000.0, 16_000.0),
                   ("cudaLaunchKernel", "cuda_runtime", 1_500.0, 1_000.0), ("aten::conv2d", "cpu_op", 1_000.0, 5.0))
    assert warmup_text(found) == ("ProfilerStep#0 (first step) 842.0 ms (later steps: median 16.00 ms); aten::mm 421.3 "
                                  "ms (later calls: median 12 us); cudaLaunchKernel 1.5 ms (later calls: median 1.00 ms)")
    assert warmup_text(_found(("aten::mm", "cpu_op", 1_500.0, 999.6))).endswith("median 1,000 us)")
    assert warmup_text(found, limit=1).startswith("ProfilerStep#0 (first step) 842.0 ms") and ";" not in \
        warmup_text(found, limit=1)


@pytest.mark.parametrize("cats, text", [
    (None, "0 first call(s)"), ([], "0 first call(s)"), (["cpu_op"] * 3, "3 first call(s)"), (["step"], "a cold first step"),
    (["step", "cpu_op", "cpu_op"], "a cold first step and 2 first call(s)"), (["step", "step"], "2 cold first steps"),
])
def test_the_warm_up_count_says_steps_and_calls(cats, text):
    found = pd.DataFrame() if cats is None else pd.DataFrame({"cat": pd.Series(cats, dtype=object)})
    assert warmup_count_text(found) == text


@pytest.mark.parametrize("slow_step, found", [
    pytest.param(0, ["aten::mm"], id="in-the-step-of-the-first-call: warm-up"),
    pytest.param(1, [], id="the-second-call-a-step-later: a stall"),
    pytest.param(2, [], id="the-third-call-two-steps-later: a stall (among the first WARMUP_FIRST, not warm-up)"),
])
def test_a_slow_call_in_a_later_step_is_a_stall_not_warm_up(tmp_path, slow_step, found):
    """One call of aten::mm per step: only one in the step of its first call can be warm-up; a 20 ms call two steps
    later, third of its name, was a preemption that read as warm-up."""
    def build(b):
        for step in range(6):
            b.step(step, step * 30_000, 25_000)
            b.cpu_op("aten::mm", step * 30_000 + 10, 20_000 if step == slow_step else 100)
    assert warmup_calls(trace_of(tmp_path, build))["name"].tolist() == found
