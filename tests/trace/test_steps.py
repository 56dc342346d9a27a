"""Steps (``perfkit.trace.steps``) on events and windows built in the test: ProfilerStep# windows, markers one row
each side of MARKER_SHARE, the DataLoader / Optimizer / whole-trace fallbacks, overlapping steps, which window holds a
time, GPU work before the window; stub steps, one row on each side of the rule's thresholds."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.trace import load_trace
from perfkit.trace.steps import (_step_number, before_window, before_window_events, file_steps, full_step_windows,
                                 full_steps, launch_windows, listed_steps, locate, overlap_note, step_rows,
                                 step_windows, stub_note, stub_steps, window_index)

from tracebuilder import TraceBuilder


def windows(*ranks) -> pd.DataFrame:
    """Back-to-back step windows: one list of durations (us) per rank."""
    rows = []
    for rank, durations in enumerate(ranks):
        start = 0.0
        for step, dur in enumerate(durations):
            rows.append({"rank": rank, "step": step, "start_us": start, "end_us": start + dur, "dur_us": float(dur)})
            start += dur
    return pd.DataFrame(rows)


# STUB_SHARE: a first or last step under 10% of the shortest other step of its rank; a rank needs 2 steps.
@pytest.mark.parametrize("ranks, stubs", [
    pytest.param(([5_000, 5_000, 499],), [False, False, True], id="STUB_SHARE-under"),
    pytest.param(([5_000, 5_000, 500],), [False, False, False], id="STUB_SHARE-at"),
    pytest.param(([5_000, 5_000, 250],), [False, False, True], id="a-twentieth-is-a-stub"),
    pytest.param(([18, 5_000],), [True, False], id="two-steps-the-short-one-is-a-stub"),
    pytest.param(([18],), [False], id="one-step-is-never-a-stub"),
    pytest.param(([5_000, 18, 5_000],), [False, False, False], id="a-middle-step-is-never-a-stub"),
    pytest.param(([26_000, 245, 245],), [False, False, False], id="against-the-shortest-not-the-median"),
    pytest.param(([5_000, 5_000], [18]), [False, False, False], id="each-rank-on-its-own"),
])
def test_stub_step_table(ranks, stubs):
    assert stub_steps(windows(*ranks)).tolist() == stubs
    table = windows(*ranks)
    assert full_steps(table).index.tolist() == [i for i, stub in zip(table.index, stubs) if not stub]


def test_full_steps_of_no_steps_is_the_empty_table():
    empty = windows()
    assert full_steps(empty) is empty


def _profiler_steps(windows):
    import pandas as pd

    from perfkit.trace.steps import file_steps

    rows = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts_us": float(a),
             "dur_us": float(b - a)} for n, a, b in windows]
    ev = pd.DataFrame(rows)
    ev["name"] = ev["name"].astype("category")
    return file_steps(ev)


@pytest.mark.parametrize("windows, says", [
    ([(1, 0, 100), (2, 100, 200)], ""),                                   # back to back: fine
    ([(1, 0, 250), (2, 100, 350), (3, 200, 450)], "2 ProfilerStep# window(s) overlap the next"),  # 2.5x their spacing
    ([(1, 0, 100), (1, 10, 90), (2, 100, 200)], "ProfilerStep#1 appears more than once"),          # a nested duplicate
])
def test_overlapping_or_repeated_steps_are_said(windows, says):
    _, note = _profiler_steps(windows)
    assert (says in note) if says else note == ""


# -- steps from the events: ProfilerStep#, markers, DataLoader and Optimizer fallbacks, the whole trace ------------
def events(*rows) -> pd.DataFrame:
    """One complete event per (name, cat, ts_us, dur_us)."""
    return pd.DataFrame([{"ph": "X", "name": n, "cat": c, "ts_us": float(t), "dur_us": float(d)} for n, c, t, d in rows])


def test_profiler_steps_are_the_steps_in_start_order():
    table, note = file_steps(events(("ProfilerStep#4", "user_annotation", 1_000, 900),
                                    ("ProfilerStep#3", "user_annotation", 0, 1_000), ("aten::mm", "cpu_op", 10, 50)))
    assert table.to_dict("records") == [
        {"step": 3, "start_us": 0.0, "end_us": 1_000.0, "dur_us": 1_000.0, "source": "ProfilerStep"},
        {"step": 4, "start_us": 1_000.0, "end_us": 1_900.0, "dur_us": 900.0, "source": "ProfilerStep"}]
    assert note == ""


@pytest.mark.parametrize("marker_us, markers", [
    pytest.param(9.0, True, id="MARKER_SHARE-under: 18 us of 2,000 us"),
    pytest.param(10.0, False, id="MARKER_SHARE-at: 20 us of 2,000 us"),
])
def test_short_profiler_steps_are_markers_each_step_running_to_the_next(marker_us, markers):
    ev = events(("ProfilerStep#0", "cpu_op", 0, marker_us), ("ProfilerStep#1", "cpu_op", 1_000, marker_us),
                ("aten::mm", "cpu_op", 0, 10), ("aten::mm", "cpu_op", 1_000 + marker_us, 1_000 - marker_us))
    table, note = file_steps(ev)
    if markers:
        assert table["end_us"].tolist() == [1_000.0, 2_000.0] and table["source"].iloc[0] == "ProfilerStep markers"
        assert note == ("the 2 ProfilerStep# ranges last 0.018 ms together, under 1% of the host's activity: they are "
                        "markers, so each step runs from one to the next (the last to the trace's last host event)")
    else:
        assert table["dur_us"].tolist() == [marker_us, marker_us] and note == ""


@pytest.mark.parametrize("rows, source, bounds, note", [
    ([("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", 100, 10),
      ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation", 600, 10),
      ("aten::mm", "cpu_op", 0, 1_000)], "dataloader", [(100.0, 600.0), (600.0, 1_000.0)],
     "no ProfilerStep# events: steps start at each enumerate(DataLoader) annotation; record with a torch.profiler "
     "schedule and prof.step() for exact steps"),
    ([("Optimizer.step#SGD.step", "user_annotation", 300, 100), ("Optimizer.step#SGD.step", "user_annotation", 800, 50),
      ("aten::mm", "cpu_op", 50, 1_000)], "optimizer", [(50.0, 400.0), (400.0, 850.0)],
     "no ProfilerStep# events: steps end at each Optimizer.step; record with a torch.profiler schedule and prof.step() "
     "for exact steps"),
    ([("enumerate(DataLoader)#x", "user_annotation", 100, 10), ("Optimizer.step#SGD.step", "user_annotation", 300, 100),
      ("aten::mm", "cpu_op", 50, 1_000)], "whole trace", [(50.0, 1_050.0)],
     "no ProfilerStep# events and no DataLoader/Optimizer.step annotations: the whole trace is one step; call "
     "prof.step() once per training step when profiling"),
])
def test_steps_fall_back_to_dataloader_then_optimizer_then_the_whole_trace(rows, source, bounds, note):
    table, got = file_steps(events(*rows))
    assert (table["source"] == source).all() and list(zip(table["start_us"], table["end_us"])) == bounds
    assert got == note and table["step"].tolist() == list(range(len(bounds)))


def test_no_host_event_no_step():
    table, note = file_steps(events(("k", "kernel", 0, 10)))
    assert table.empty and note == "no host events, so no steps" and table["step"].dtype == "int64"


@pytest.mark.parametrize("steps, note", [
    ([(0, 0, 100), (1, 100, 200)], ""),
    ([(0, 0, 150), (1, 100, 200)], "1 ProfilerStep# window(s) overlap the next"),
    ([(2, 0, 100), (2, 100, 200)], "ProfilerStep#2 appears more than once"),
    ([(2, 0, 150), (2, 100, 200)], "1 ProfilerStep# window(s) overlap the next and ProfilerStep#2 appears more than once"),
])
def test_overlapping_or_repeated_steps_are_warned(steps, note):
    table = pd.DataFrame([{"step": s, "start_us": a, "end_us": b} for s, a, b in steps])
    got = overlap_note(table)
    assert got.startswith(note) if note else got == ""
    if note:
        assert got.endswith("was prof.step() called from two threads, or a profiler started inside another? Read "
                            "per-step numbers with care")


@pytest.mark.parametrize("text, number", [("7", 7), ("x", -1), ("-1", -1), (str(2**63 - 1), 2**63 - 1), (str(2**63), -1),
                                          ("0", 0)])
def test_the_step_number(text, number):
    assert _step_number(text) == number


def test_each_time_finds_its_window_and_each_event_its_ranks_window():
    starts, ends = np.array([0.0, 10.0, 30.0]), np.array([10.0, 20.0, 40.0])
    assert locate(starts, ends, [0.0, 9.99, 10.0, 20.0, 25.0, 39.0, 40.0, -1.0]).tolist() == [0, 0, 1, -1, -1, 2, -1, -1]
    assert locate(np.array([]), np.array([]), [1.0, 2.0]).tolist() == [-1, -1]
    windows = pd.DataFrame({"rank": [1, 0, 0], "start_us": [0.0, 50.0, 0.0], "end_us": [100.0, 100.0, 50.0]},
                           index=[7, 8, 9])
    got = window_index(windows, pd.Series([10.0, 60.0, 10.0, 500.0, 10.0]), pd.Series([0, 0, 1, 1, 2]))
    assert got.tolist() == [9, 8, 7, -1, -1]


def test_the_stub_note_lists_what_was_left_out():
    stubs = pd.DataFrame({"step": [0, 9], "dur_us": [49.0, 1_204.0]})
    assert listed_steps(stubs) == "step 0 (49 us), step 9 (1.204 ms)"
    assert stub_note(stubs, 3) == ("dropped 2 partial step(s) at the edge of the profiler window: step 0 (49 us), step 9 "
                                   "(1.204 ms), each under 10% of the shortest other step of its rank; per-step numbers "
                                   "use the 3 full step(s)")
    assert stub_note(stubs.iloc[:0], 3) == ""


def test_gpu_work_ahead_of_the_first_launched_event_of_its_gpu_is_before_the_window():
    gpu = pd.DataFrame({"rank": [0, 0, 0, 0, 1, 1], "device": [0, 0, 0, 1, 0, 0],
                        "ts_us": [5.0, 10.0, 20.0, 1.0, 5.0, 6.0]})
    launched = [False, True, False, False, False, False]  # device 1 and rank 1: no launch at all, left alone
    assert before_window(gpu, launched).tolist() == [True, False, False, False, False, False]
    assert not before_window(gpu, [True] * 6).any() and len(before_window(gpu.iloc[:0], [])) == 0


# -- the windows of a loaded trace, the full ones, which window owns each event ---------------------------------
def _load(tmp_path, build, name="t.json"):
    b = TraceBuilder()
    build(b)
    trace = load_trace(b.write(tmp_path / name), use_cache=False)
    return trace, float(trace.events["ts_us"].min())


def _three_steps(b):
    b.step(0, 0, 1_000)
    b.step(1, 1_000, 1_000)
    b.step(2, 2_000, 50)                 # a stub at the window's edge
    b.launch("k0", 10, 5, 500, 100)      # launched in step 0
    b.launch("k1", 1_900, 5, 2_100, 100)  # launched in step 1, runs after it ends
    b.kernel("early", 400, 50)           # no launch, ahead of the GPU's first launched work: before the window
    b.kernel("late", 1_500, 50)          # no launch, after it: the window holding its start
    b.cpu_op("aten::mm", 1_010, 20)


def _relative(windows, t0):
    return list(zip(windows["rank"], windows["step"], windows["start_us"] - t0, windows["end_us"] - t0,
                    windows["dur_us"]))


def test_step_windows_full_windows_and_the_stub_note(tmp_path):
    trace, t0 = _load(tmp_path, _three_steps)
    windows = step_windows(trace)
    assert _relative(windows, t0) == [(0, 0, 0.0, 1_000.0, 1_000.0), (0, 1, 1_000.0, 2_000.0, 1_000.0),
                                      (0, 2, 2_000.0, 2_050.0, 50.0)]
    windows.loc[0, "dur_us"] = -1.0  # a copy: the trace's own stays as it was
    assert step_windows(trace)["dur_us"].iloc[0] == 1_000.0
    full, notes = full_step_windows(trace)
    assert full["step"].tolist() == [0, 1] and full.index.tolist() == [0, 1]
    assert notes == ("dropped 1 partial step(s) at the edge of the profiler window: step 2 (50 us), each under 10% of "
                     "the shortest other step of its rank; per-step numbers use the 2 full step(s)",)


def test_no_stub_no_note(tmp_path):
    trace, _ = _load(tmp_path, lambda b: (b.step(0, 0, 1_000), b.step(1, 1_000, 1_000)))
    assert full_step_windows(trace)[1] == ()


def test_gpu_work_belongs_to_the_step_that_launched_it(tmp_path):
    trace, t0 = _load(tmp_path, _three_steps)
    windows, gpu = step_windows(trace), trace.gpu_events()
    owner = dict(zip(gpu["name"].astype(str), launch_windows(trace, windows, gpu)))
    assert owner == {"k0": 0, "k1": 1, "early": -1, "late": 1}
    assert trace.events.loc[before_window_events(trace), "name"].astype(str).tolist() == ["early"]
    host = trace.events[trace.events["cat"].astype(str).isin(["cpu_op", "cuda_runtime"])]
    assert dict(zip(host["name"].astype(str) + host["ts_us"].sub(t0).astype(int).astype(str),
                    step_rows(windows, host))) == {"cudaLaunchKernel10": 0, "cudaLaunchKernel1900": 1, "aten::mm1010": 1}


def test_host_events_outside_every_step_have_no_window():
    windows = pd.DataFrame({"rank": [0, 0], "step": [3, 4]})
    host = pd.DataFrame({"rank": [0, 0, 1], "step": [4, -1, 3]})
    assert step_rows(windows, host).tolist() == [1, -1, -1]


def test_a_whole_trace_step_widens_to_the_gpu_work_after_the_last_host_call(tmp_path):
    trace, t0 = _load(tmp_path, lambda b: (b.cpu_op("aten::mm", 0, 100), b.launch("k", 10, 5, 200, 300)))
    assert trace.steps["source"].tolist() == ["whole trace"]
    assert _relative(step_windows(trace), t0) == [(0, 0, 0.0, 500.0, 500.0)]


def test_a_trace_of_gpu_work_only_is_one_window_of_step_minus_one(tmp_path):
    trace, t0 = _load(tmp_path, lambda b: (b.kernel("k", 0, 100), b.kernel("k", 300, 100)))
    assert trace.steps.empty and _relative(step_windows(trace), t0) == [(0, -1, 0.0, 400.0, 400.0)]
