"""Stub steps (``perfkit.trace.steps.stub_steps``): partial steps at the edge of the profiler window, one row
on each side of the rule's thresholds, on step windows built in the test."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.trace.steps import stub_steps


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
