"""The straggler rule of ``perfkit.analysis.ranks.stragglers`` on small tables: the excess from arrival, the
10% line, and a late start against running longer."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.ranks.collectives import LAST_P, last_arrivals
from perfkit.analysis.ranks.stragglers import CONSISTENT_PCT, LATE_START_SHARE, STRAGGLER_PCT, _cause, find_stragglers


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


@pytest.mark.parametrize("first_launch, cause", [
    (LATE_START_SHARE * 1000, "first launch"),  # its first launch took half the excess longer: not a late start
    (LATE_START_SHARE * 1000 - 1, "late start"),
])
def test_a_long_first_launch_is_not_a_late_start(first_launch, cause):
    row = {"excess_us": 1000.0, "start_late_us": 900.0, "first_launch_us": first_launch, "input_us": 0.0,
           "host_us": 0.0, "sync_us": 0.0, "compute_us": 0.0, "comm_wait_us": 0.0}
    assert _cause(row) == cause


def test_no_part_of_the_excess_is_negative():
    """Two ranks: the median is their mean, so the straggler's parts below it read negative (comm_wait -2,152.7 us)."""
    steps = _steps(0.0).iloc[:2].assign(late_us=[0.0, 2000.0], comm_us=[4000.0, 1000.0], host_other_us=[0.0, 1500.0])
    found, _ = find_stragglers(steps)
    parts = found[["input_us", "host_us", "sync_us", "compute_us", "comm_wait_us", "first_launch_us"]]
    assert (parts >= 0).all().all() and found.iloc[0]["host_us"] == 750.0 and found.iloc[0]["comm_wait_us"] == 0.0


def _arrivals(last_by_rank1: int, collectives: int = 21) -> pd.DataFrame:
    rows = []
    for i in range(collectives):
        late = 1 if i < last_by_rank1 else 0
        for rank in range(2):
            rows.append({"file_id": rank, "rank": rank, "step": i // 7, "name": "k", "occurrence": i % 7,
                         "ts_us": 100.0 * i + (10.0 if rank == late else 0.0), "last": rank == late})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("last, consistent", [(21, True), (17, True), (16, False), (11, False)])
def test_a_rank_last_more_often_than_chance_is_consistent(last, consistent):
    """Two ranks: last at k of 21 by chance has p = P(Binomial(21, 1/2) >= k): 17 of 21 is 0.0036, 16 of 21 0.013."""
    table = last_arrivals(_arrivals(last)).set_index("rank")
    assert bool(table.at[1, "consistent"]) is consistent and bool(table.at[1, "p_value"] < LAST_P) is consistent


@pytest.mark.parametrize("late_pct, flagged", [(CONSISTENT_PCT, True), (CONSISTENT_PCT - 0.001, False)])
def test_a_consistently_last_rank_is_held_to_the_lower_bar(late_pct, flagged):
    steps = _steps(late_pct * 10_000)
    assert (list(find_stragglers(steps, consistent=frozenset({3}))[0]["rank"]) == [3]) == flagged
    assert find_stragglers(steps)[0].empty  # the 10% rule alone names nobody
