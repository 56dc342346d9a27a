"""Collective arrival across ranks: who reached each NCCL/RCCL collective last, and how long the
others waited for it.

A communication kernel cannot finish on any rank before the last rank of the collective has
started its own, so every rank's kernel ends at about the same time and starts when that rank
arrives. Per collective (communication kernels matched across ranks on step, kernel name and
occurrence in the step, see ``tables``):

* ``skew_us``: last arrival minus first arrival (kernel start times);
* per rank, ``wait_us``: the last arrival minus its own, at most its kernel's duration: the time
  its collective spent waiting for a peer, not moving data. A step's wait (``step_waits``) is the union
  of its collectives' waits: DDP's bucket all-reduces overlap, and a rank 2 ms behind waits 2 ms at each,
  at once, not ten times over;
* per rank and step, ``lateness``: its arrival minus the median rank's arrival, at the collective where it
  is latest (never negative): how far behind the median rank it is;
* per rank, ``last_arrivals``: how often it arrived last, against the chance of that were the last rank drawn at
  random (one in the collective's ranks): a rank last at 21 of 21 collectives of two ranks (p = 0.5^21) is the
  one the others wait for, however little it is late. The rank that arrives last waits
  least, so its collective kernels' time holds the transfer, not its lateness: a 4xMI300X DDP rank 1.6-3.8
  ms late read "40% slower" from its step less its collectives' time.

Start times are compared across files, so this assumes the ranks' clocks agree: true on one host;
across hosts, Kineto writes each host's clock (keep them NTP/PTP-synchronized). Kernels that end
more than ``CLOCK_SKEW_US`` apart (median over collectives) are flagged with a warning.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...stats import binomial_tail
from ...trace.intervals import length

KEY = ["step", "name", "occurrence"]
ARRIVAL_COLUMNS = ["file_id", "rank", "step", "name", "occurrence", "ts_us", "dur_us", "wait_us", "last"]
COLLECTIVE_COLUMNS = ["step", "name", "occurrence", "ranks", "skew_us", "first_rank", "last_rank",
                      "max_wait_us", "end_spread_us"]
# A rank is consistently last when arriving last that often by chance is less likely than this (one-sided binomial
# test, perfkit rule): 21 of 21 on two ranks is 4.8e-7, 5 of 8 on eight ranks 1.2e-3, 11 of 21 on two ranks 0.5.
LAST_P = 0.01
LAST_COLUMNS = ["file_id", "rank", "collectives", "last", "chance", "p_value", "consistent"]
# Median spread of kernel end times above which the ranks' clocks probably disagree: NCCL kernels
# of one collective end within a few microseconds of each other (7 us at most on the 8-rank DLRM
# traces), so 100 us leaves room for protocol tails while catching millisecond clock offsets.
CLOCK_SKEW_US = 100.0


def arrivals(kernels: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``kernels``: communication kernels of all ranks (``file_id``, ``rank`` and the columns of
    ``tables.COLLECTIVE_COLUMNS``). Returns the kernels found on at least two ranks with
    ``wait_us`` and ``last`` (True for the rank that arrived last) added, and warnings about
    kernels that could not be matched."""
    members = kernels.groupby(KEY, sort=False)["file_id"].transform("size")
    matched = kernels[members >= 2].copy()
    last_start = matched.groupby(KEY, sort=False)["ts_us"].transform("max")
    matched["wait_us"] = np.clip(last_start - matched["ts_us"], 0.0, matched["dur_us"])
    last_row = matched.groupby(KEY, sort=False)["ts_us"].idxmax()
    matched["last"] = matched.index.isin(last_row.to_numpy())
    ordered = matched.sort_values(["step", "ts_us", "file_id"], kind="stable", ignore_index=True)
    return ordered[ARRIVAL_COLUMNS], _match_warnings(kernels, members)


def collective_table(arrived: pd.DataFrame) -> pd.DataFrame:
    """One row per matched collective (``COLLECTIVE_COLUMNS``), in order of first arrival."""
    if arrived.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLLECTIVE_COLUMNS})
    frame = arrived.assign(end_us=arrived["ts_us"] + arrived["dur_us"])
    grouped = frame.groupby(KEY, sort=False)
    table = grouped.agg(ranks=("file_id", "size"), first_us=("ts_us", "min"), last_us=("ts_us", "max"),
                        max_wait_us=("wait_us", "max"), end_min=("end_us", "min"), end_max=("end_us", "max"))
    table["skew_us"] = table["last_us"] - table["first_us"]
    table["end_spread_us"] = table["end_max"] - table["end_min"]
    table["first_rank"] = frame.loc[grouped["ts_us"].idxmin(), "rank"].to_numpy()
    table["last_rank"] = frame.loc[grouped["ts_us"].idxmax(), "rank"].to_numpy()
    table = table.reset_index().sort_values(["step", "first_us"], kind="stable", ignore_index=True)
    return table[COLLECTIVE_COLUMNS]


def clock_warning(collectives: pd.DataFrame) -> list[str]:
    """A warning when collective kernels end too far apart for the ranks' clocks to agree."""
    if collectives.empty:
        return []
    spread = float(collectives["end_spread_us"].median())
    if spread <= CLOCK_SKEW_US:
        return []
    return [f"collective kernels end a median {spread:,.0f} us apart across ranks (they end together when clocks "
            f"agree; > {CLOCK_SKEW_US:.0f} us): the ranks' clocks may differ, so arrival skew and wait times include "
            "the clock offset; synchronize the hosts' clocks (NTP/PTP) before profiling"]


def _match_warnings(kernels: pd.DataFrame, members: pd.Series) -> list[str]:
    out = []
    lone = int((members < 2).sum())
    if lone:
        out.append(f"{lone:,} communication kernels appear on one rank only (no kernel of the same name and "
                   "order in the same step on another rank): left out of arrival skew and wait times")
    counts = kernels.groupby(["step", "file_id"]).size().groupby(level="step").agg(["min", "max"])
    uneven = counts[counts["min"] != counts["max"]]
    if len(uneven):
        step = uneven.index[0]
        out.append(f"ranks ran different numbers of communication kernels in {len(uneven)} step(s) (step {step}: "
                   f"{uneven.at[step, 'min']} to {uneven.at[step, 'max']}): collectives are matched by name and order, "
                   "so calls of different process groups may be paired; read the arrival skew with care")
    return out


def step_waits(arrived: pd.DataFrame) -> pd.Series:
    """Per (file_id, step): the union (us) of the intervals its collectives waited for a peer."""
    if arrived.empty:
        return pd.Series(dtype=np.float64, index=pd.MultiIndex.from_arrays([[], []], names=["file_id", "step"]))
    out = {}
    for key, grp in arrived.groupby(["file_id", "step"], sort=False):
        start = grp["ts_us"].to_numpy(dtype=np.float64)
        out[key] = length(start, start + grp["wait_us"].to_numpy(dtype=np.float64))
    return pd.Series(out, dtype=np.float64).rename_axis(["file_id", "step"])


def lateness(arrived: pd.DataFrame) -> pd.Series:
    """Per (file_id, step): the rank's arrival minus the median rank's, at the collective where it is latest,
    at least 0 (us)."""
    if arrived.empty:
        return pd.Series(dtype=np.float64, index=pd.MultiIndex.from_arrays([[], []], names=["file_id", "step"]))
    late = arrived["ts_us"] - arrived.groupby(KEY, sort=False)["ts_us"].transform("median")
    return late.clip(lower=0.0).groupby([arrived["file_id"], arrived["step"]]).max()


def last_arrivals(arrived: pd.DataFrame) -> pd.DataFrame:
    """Per rank file (``LAST_COLUMNS``): matched collectives, how many it arrived last at, the chance of one (1 /
    the median number of ranks in them), the binomial p-value of arriving last that often by chance, and
    ``consistent`` (p-value under ``LAST_P``)."""
    if arrived.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in LAST_COLUMNS})
    size = arrived.groupby(KEY, sort=False)["file_id"].transform("size")
    frame = arrived.assign(size=size.to_numpy())
    per = frame.groupby("file_id").agg(rank=("rank", "first"), collectives=("last", "size"), last=("last", "sum"),
                                        ranks=("size", "median")).reset_index()
    per["chance"] = 1.0 / per["ranks"]
    per["p_value"] = [binomial_tail(int(k), int(n), c) for k, n, c in zip(per["last"], per["collectives"], per["chance"])]
    per["consistent"] = per["p_value"] < LAST_P
    return per[LAST_COLUMNS]
