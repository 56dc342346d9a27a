"""The straggler rule of ``perfkit.analysis.ranks.stragglers`` on small tables: the excess from arrival, the
10% line, and a late start against running longer."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.ranks.stragglers import LATE_START_SHARE, STRAGGLER_PCT, _cause, find_stragglers


@pytest.mark.parametrize("start_late, cause", [
    (LATE_START_SHARE * 1000, "late start"),   # half the excess: the start decides
    (LATE_START_SHARE * 1000 - 1, "input"),    # under it: the part that runs longer
])
def test_late_start_or_runs_longer(start_late, cause):
    row = {"excess_us": 1000.0, "start_late_us": start_late, "input_us": 900.0, "host_us": 0.0, "sync_us": 0.0,
           "compute_us": 0.0, "comm_wait_us": 0.0}
    assert _cause(row) == cause


def _steps(late_us: float) -> pd.DataFrame:
    rows = []
    for rank in range(4):
        rows.append({"file_id": rank, "rank": rank, "file": f"r{rank}", "step": 0, "wall_us": 10_000.0,
                     "own_us": 9_000.0, "wait_us": 1_000.0, "late_us": late_us if rank == 3 else 0.0,
                     "start_late_us": 0.0, "dataloader_us": 0.0, "host_other_us": 0.0, "sync_us": 0.0,
                     "compute_us": 0.0, "comm_us": 1_000.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("late_us, flagged", [(STRAGGLER_PCT * 10_000, True), (STRAGGLER_PCT * 10_000 - 1, False)])
def test_the_excess_is_the_arrival_lateness_against_10_percent_of_the_step(late_us, flagged):
    found, _ = find_stragglers(_steps(late_us))
    assert (list(found["rank"]) == [3]) == flagged
    if flagged:
        assert found.iloc[0]["excess_us"] == late_us and found.iloc[0]["excess_pct"] == pytest.approx(10.0)
