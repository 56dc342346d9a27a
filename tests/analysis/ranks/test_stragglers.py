"""The straggler rule of ``perfkit.analysis.ranks.stragglers`` on small tables: the excess from arrival, the
10% line, and a late start against running longer."""
from __future__ import annotations

import numpy as np
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


# -- every branch of the rule on small tables ----------------------------------------------------------------------
from perfkit.analysis.ranks import stragglers as sg  # noqa: E402


def test_parts_take_the_wait_out_of_syncs_and_collectives():
    steps = pd.DataFrame({"dataloader_us": [1.0, 2.0], "host_other_us": [3.0, 4.0], "sync_us": [500.0, 100.0],
                          "wait_us": [200.0, 300.0], "compute_us": [7.0, 8.0], "comm_us": [1000.0, 250.0]})
    out = sg.parts(steps)
    assert list(out.columns) == ["input_us", "host_us", "sync_us", "compute_us", "comm_wait_us"]
    assert out.to_dict("list") == {"input_us": [1.0, 2.0], "host_us": [3.0, 4.0], "sync_us": [300.0, 0.0],
                                   "compute_us": [7.0, 8.0], "comm_wait_us": [800.0, 0.0]}


@pytest.mark.parametrize("per_rank, noise", [
    ({0: [0.0, 10.0, 30.0], 1: [0.0, 0.0, 100.0]}, sg.MAD_TO_SIGMA * 5.0),  # MADs 10 and 0: their median, 5
    ({0: [0.0, 10.0], 1: [5.0, 6.0]}, None),                                # two steps a rank: unknown
    ({0: [0.0, 10.0, 30.0], 1: [1.0, 2.0]}, sg.MAD_TO_SIGMA * 10.0),        # only the rank with three counts
])
def test_the_noise_is_the_median_ranks_scaled_mad(per_rank, noise):
    steps = pd.DataFrame([{"file_id": f, "excess_us": v} for f, values in per_rank.items() for v in values])
    got = sg.step_noise_us(steps)
    assert (np.isnan(got) if noise is None else got == pytest.approx(noise))


def test_the_excess_falls_back_to_own_time_without_arrivals():
    steps = pd.DataFrame({"step": [0, 0, 0, 1, 1], "own_us": [10.0, 20.0, 60.0, 5.0, 7.0],
                          "wall_us": [100.0, 100.0, 400.0, 50.0, 70.0],
                          "late_us": [np.nan, np.nan, 30.0, np.nan, np.nan]})
    out = sg.excess(steps)
    assert list(out["median_own_us"]) == [20.0, 20.0, 20.0, 6.0, 6.0]
    assert list(out["median_step_us"]) == [100.0, 100.0, 100.0, 60.0, 60.0]
    assert list(out["excess_us"]) == [-10.0, 0.0, 30.0, -1.0, 1.0]  # the lateness where there is one
    no_late = sg.excess(steps.drop(columns="late_us"))
    assert list(no_late["excess_us"]) == [-10.0, 0.0, 40.0, -1.0, 1.0]


def _many(late: dict, steps: int = 1, **extra) -> pd.DataFrame:
    """Four ranks, ``steps`` steps of 10 ms; ``late``: (rank, step) -> its lateness (us)."""
    rows = []
    for step in range(steps):
        for rank in range(4):
            rows.append({"file_id": rank, "rank": rank, "file": f"r{rank}", "step": step, "wall_us": 10_000.0,
                         "own_us": 9_000.0, "wait_us": 1_000.0, "late_us": late.get((rank, step), 0.0),
                         "start_late_us": 0.0, "first_launch_us": 0.0, "dataloader_us": 0.0, "host_other_us": 0.0,
                         "sync_us": 0.0, "compute_us": 0.0, "comm_us": 1_000.0, **extra})
    return pd.DataFrame(rows)


def test_find_stragglers_columns_order_and_figures():
    steps = _many({(3, 0): 3000.0, (1, 0): 2000.0, (2, 0): 2000.0})
    found, noise = sg.find_stragglers(steps)
    assert list(found.columns) == sg.STRAGGLER_COLUMNS and np.isnan(noise)
    assert list(found["rank"]) == [3, 1, 2]  # largest excess first, then by rank
    first = found.iloc[0]
    assert (first["file"], first["step"], first["own_us"], first["median_own_us"]) == ("r3", 0, 9000.0, 9000.0)
    assert (first["excess_us"], first["excess_pct"], first["start_late_us"]) == (3000.0, 30.0, 0.0)
    assert first["cause"] == "unattributed"


@pytest.mark.parametrize("pct, flagged", [(0.2, True), (0.21, False)])
def test_the_straggler_pct_knob(pct, flagged):
    found, _ = sg.find_stragglers(_many({(3, 0): 2000.0}), straggler_pct=pct)
    assert (list(found["rank"]) == [3]) == flagged


def test_a_consistent_rank_keeps_a_lower_knob():
    steps = _many({(3, 0): 100.0})  # 1% of the step
    assert list(sg.find_stragglers(steps, straggler_pct=0.01, consistent=frozenset({3}))[0]["rank"]) == [3]
    assert sg.find_stragglers(steps, straggler_pct=0.011, consistent=frozenset({3}))[0].empty


def test_steps_seen_on_one_rank_are_skipped():
    steps = _many({(3, 0): 5000.0})
    alone = steps[steps["rank"] == 3]
    found, noise = sg.find_stragglers(alone)
    assert found.empty and list(found.columns) == sg.STRAGGLER_COLUMNS and np.isnan(noise)
    two = steps[steps["rank"] >= 2]
    assert list(sg.find_stragglers(two)[0]["rank"]) == [3]


def test_a_step_of_no_length_flags_nobody():
    steps = _many({(3, 0): 5000.0}).assign(wall_us=0.0)
    assert sg.find_stragglers(steps)[0].empty


@pytest.mark.parametrize("late, flagged", [(sg.NOISE_SIGMAS * (sg.MAD_TO_SIGMA * 100.0) + 0.01, True),
                                           (sg.NOISE_SIGMAS * (sg.MAD_TO_SIGMA * 100.0), False)])
def test_the_noise_bar(late, flagged):
    """Four ranks, three steps, each rank 0, 100 and 200 us late (a scaled MAD of 148.26 us each), rank 3 ``late`` in
    its third step instead: with no percentage bar, flagged only above twice the noise."""
    jitter = {(r, s): [0.0, 100.0, 200.0][s] for r in range(4) for s in range(3)}
    found, noise = sg.find_stragglers(_many({**jitter, (3, 2): late}, steps=3), straggler_pct=0.0)
    assert noise == pytest.approx(sg.MAD_TO_SIGMA * 100.0)
    assert list(zip(found["rank"], found["step"])) == ([(3, 2)] if flagged else [])


def test_the_first_launch_and_parts_are_over_the_median_rank():
    steps = _many({(3, 0): 2000.0}).assign(first_launch_us=[100.0, 100.0, 100.0, 1300.0],
                                          dataloader_us=[50.0, 60.0, 70.0, 900.0])
    (row,) = sg.find_stragglers(steps)[0].to_dict("records")
    assert row["first_launch_us"] == 1200.0 and row["input_us"] == 835.0 and row["cause"] == "first launch"


def test_without_start_or_first_launch_columns_they_read_zero():
    steps = _many({(3, 0): 2000.0}, dataloader_us=0.0).drop(columns=["start_late_us", "first_launch_us"])
    (row,) = sg.find_stragglers(steps)[0].to_dict("records")
    assert row["start_late_us"] == 0.0 and row["first_launch_us"] == 0.0 and row["cause"] == "unattributed"


def _row(excess=1000.0, **parts):
    return {"excess_us": excess, "start_late_us": 0.0, "first_launch_us": 0.0, "input_us": 0.0, "host_us": 0.0,
            "sync_us": 0.0, "compute_us": 0.0, "comm_wait_us": 0.0} | parts


@pytest.mark.parametrize("row, cause", [
    (_row(host_us=sg.MIN_CAUSE_SHARE * 1000), "host"),              # a fifth of the excess: named
    (_row(host_us=sg.MIN_CAUSE_SHARE * 1000 - 1), "unattributed"),  # under it: not
    (_row(sync_us=300.0, compute_us=400.0), "compute"),             # the largest part
    (_row(comm_wait_us=400.0, input_us=400.0), "input"),            # a tie: the first of CAUSES' order
    (_row(comm_wait_us=900.0), "comm wait"),
    (_row(sync_us=900.0), "sync"),
    (_row(excess=0.0, start_late_us=0.0, first_launch_us=0.0), "unattributed"),  # nothing over the median
    (_row(excess=-5.0, start_late_us=0.0, first_launch_us=0.0), "unattributed"),
    (_row(excess=0.0, start_late_us=10.0), "unattributed"),         # a late start of no excess explains nothing
    (_row(excess=0.0, first_launch_us=10.0), "unattributed"),
    (_row(excess=1.0, start_late_us=0.5), "late start"),            # any excess above 0 counts, however small
    (_row(excess=1.0, first_launch_us=0.5), "first launch"),
    (_row(excess=1.0, host_us=1.0), "host"),                        # a part of 1 us of an excess of 1 us
    (_row(excess=2.0, host_us=0.5), "host"),                        # a part under 1 us that holds a fifth
])
def test_the_cause_table(row, cause):
    assert sg._cause(row) == cause


def test_cause_reads_no_first_launch_as_zero():
    row = _row(start_late_us=600.0)
    del row["first_launch_us"]
    assert sg._cause(row) == "late start"


def test_by_rank_summarizes_each_straggling_rank():
    found = pd.DataFrame([
        {"rank": 3, "file": "r3", "excess_pct": 30.0, "excess_us": 3000.0, "cause": "input", "input_us": 2000.0,
         "first_launch_us": 0.0},
        {"rank": 3, "file": "r3", "excess_pct": 10.0, "excess_us": 1000.0, "cause": "input", "input_us": 600.0,
         "first_launch_us": 0.0},
        {"rank": 3, "file": "r3", "excess_pct": 20.0, "excess_us": 2000.0, "cause": "first launch", "input_us": 0.0,
         "first_launch_us": 1500.0},
        {"rank": 1, "file": "r1", "excess_pct": 12.0, "excess_us": 1200.0, "cause": "first launch", "input_us": 0.0,
         "first_launch_us": 900.0},
        {"rank": 2, "file": "r2", "excess_pct": 11.0, "excess_us": 1100.0, "cause": "late start", "input_us": 0.0,
         "first_launch_us": 0.0},
    ])
    out = sg.by_rank(found, pd.Series({"r3": 5, "r1": 5}))
    assert list(out.columns) == ["rank", "file", "steps", "of_steps", "excess_pct", "excess_us", "cause", "cause_us"]
    r3, r1, r2 = out.to_dict("records")
    assert r3 == {"rank": 3, "file": "r3", "steps": 3, "of_steps": 5, "excess_pct": 20.0, "excess_us": 2000.0,
                  "cause": "input", "cause_us": 600.0}
    assert (r1["cause"], r1["cause_us"], r1["of_steps"]) == ("first launch", 900.0, 5)
    assert r2["cause"] == "late start" and np.isnan(r2["cause_us"]) and r2["of_steps"] == 0
    assert isinstance(r3["rank"], int) and isinstance(r3["steps"], int)
    empty = sg.by_rank(found.iloc[:0], pd.Series(dtype=int))
    assert empty.empty and list(empty.columns) == list(out.columns)


def test_cause_reads_a_missing_first_launch_as_none():
    row = _row(excess=2.0)
    del row["first_launch_us"]
    assert sg._cause(row) == "unattributed"


def test_a_step_of_one_microsecond_still_has_a_bar():
    steps = _many({(3, 0): 0.5}).assign(wall_us=1.0)
    assert list(sg.find_stragglers(steps)[0]["rank"]) == [3]


def test_the_noise_bar_adds_to_the_percentage_bar():
    """With the noise known (148 us), a step far above twice the noise but under 10% of the step is not flagged."""
    jitter = {(r, s): [0.0, 100.0, 200.0][s] for r in range(4) for s in range(3)}
    found, _ = sg.find_stragglers(_many({**jitter, (3, 2): 900.0}, steps=3))
    assert found.empty


def test_the_start_late_column_reaches_the_result():
    steps = _many({(3, 0): 2000.0}).assign(start_late_us=[0.0, 0.0, 0.0, 1500.0])
    (row,) = sg.find_stragglers(steps)[0].to_dict("records")
    assert row["start_late_us"] == 1500.0 and row["cause"] == "late start"


def test_the_result_is_numbered_from_zero_in_its_order():
    steps = _many({(1, 0): 1500.0, (3, 0): 3000.0})
    found, _ = sg.find_stragglers(steps)
    assert list(found.index) == [0, 1] and list(found["rank"]) == [3, 1]


def test_parts_keep_the_steps_index():
    steps = pd.DataFrame({"dataloader_us": [1.0, 2.0], "host_other_us": [0.0, 0.0], "sync_us": [0.0, 0.0],
                          "wait_us": [0.0, 0.0], "compute_us": [0.0, 0.0], "comm_us": [0.0, 0.0]}, index=[5, 7])
    assert list(sg.parts(steps).index) == [5, 7] and list(sg.parts(steps)["input_us"]) == [1.0, 2.0]


def test_the_excess_without_arrivals_is_a_float_column():
    steps = pd.DataFrame({"step": [0, 0], "own_us": [10.0, 20.0], "wall_us": [100.0, 100.0]})
    out = sg.excess(steps)
    assert out["excess_us"].dtype == np.float64 and list(out["excess_us"]) == [-5.0, 5.0]
