"""Stub steps (``perfkit.trace.steps.stub_steps``): partial steps at the edge of the profiler window, one row
on each side of the rule's thresholds, on step windows built in the test."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.trace.steps import full_steps, stub_steps


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
