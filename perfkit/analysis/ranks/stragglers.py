"""Stragglers: the ranks the others wait for, by how much, and whether they start late or run longer.

In a synchronous job the collectives make every rank's step as long as the slowest rank's: the ranks that
arrive early wait inside the collective, so their *raw* step time is the longest and comparing raw step
times names the victims. perfkit measures a rank's **excess** by its arrival at the collectives: its
arrival minus the median rank's, at the collective of the step where it is latest (``late_us``, see
``perfkit.analysis.ranks.collectives.lateness``). The collective kernels' own time is no measure: the
rank that arrives last waits least, so its kernels hold the transfer (a 4xMI300X DDP rank 1.6-3.8 ms late
read "40% slower" from step less collective time). Steps with no collective matched across ranks fall back
to the **own step time**, ``own_us = wall_us - wait_us``, against the median rank's.

Rule: rank r is a straggler in step s when both hold

* ``excess >= straggler_pct * median_step(s)`` (default 10% of the median rank's step), or ``CONSISTENT_PCT``
  (2%) for a rank that arrives last at the collectives more often than chance allows
  (``collectives.last_arrivals``: the rank the others wait for, named by how consistently it is last as well
  as by how late);
* ``excess > NOISE_SIGMAS * noise_us``, where ``noise_us`` is the step-to-step noise: per rank, the
  robust standard deviation (1.4826 x MAD) over its steps of its excess; the median of that over
  ranks. It needs at least ``MIN_NOISE_STEPS`` steps; with fewer the noise is unknown, the first
  condition decides alone and the result carries a warning.

Cause: ``first launch`` when the step's first kernel launch call took at least ``LATE_START_SHARE`` of the
excess longer than the median rank's (a one-off cost inside the step: lazy module loading or CUDA context
creation on first use, not a late start); ``late start`` when the rank starts the step at least
``LATE_START_SHARE`` of its excess after the median rank (``start_late_us``: what runs before its step boundary
holds it back, not its step); else the part of the step in which it exceeds the median rank the most, one of
``CAUSES``. Each part is its excess over the median rank's, at least 0: a part below the median explains none
of the excess.

* ``input``: DataLoader time (``dataloader_us``);
* ``host``: host ops and launches outside DataLoader and syncs (``host_other_us``);
* ``sync``: host blocked in syncs beyond the time its collectives waited for peers
  (``max(sync_us - wait_us, 0)``: a host sync behind a waiting collective waits for the peer);
* ``compute``: GPU compute kernels (``compute_us``);
* ``comm wait``: time in its collectives not explained by waiting for a traced peer
  (``comm_us - wait_us``: a slower link, or a peer whose trace is not in the set);
* ``unattributed``: no part exceeds the median by ``MIN_CAUSE_SHARE`` of the excess (untraced
  host work, e.g. Python between ops).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

STRAGGLER_PCT = 0.10          # the threshold: 10% over the median rank
NOISE_SIGMAS = 2.0            # a normal step exceeds its mean by 2 sigma 2.3% of the time
MIN_NOISE_STEPS = 3           # a MAD of fewer than 3 deviations says nothing about noise
MIN_CAUSE_SHARE = 0.2         # a part must explain a fifth of the excess to be named the cause
MAD_TO_SIGMA = 1.4826         # scaled MAD = standard deviation for normal data
LATE_START_SHARE = 0.5        # a start this share of the excess behind the median rank's: the larger half decides
CONSISTENT_PCT = 0.02         # the bar for a rank consistently last: a fifth of the 10% rule (perfkit rule)
CAUSES = ("first launch", "late start", "input", "host", "sync", "compute", "comm wait", "unattributed")
STRAGGLER_COLUMNS = ["rank", "file", "step", "own_us", "median_own_us", "excess_us", "excess_pct", "start_late_us",
                     "first_launch_us", "cause", "input_us", "host_us", "sync_us", "compute_us", "comm_wait_us"]
_PARTS = {"input": "input_us", "host": "host_us", "sync": "sync_us", "compute": "compute_us",
          "comm wait": "comm_wait_us"}

FIXES = {
    "first launch": "Its first kernel launch of the step takes milliseconds longer than the other ranks': a one-off "
                    "cost on first use (CUDA's lazy module loading, context creation, cuDNN/cuBLAS handle set-up) "
                    "on that rank. Warm every rank up before the profiled steps (a full step first, or "
                    "CUDA_MODULE_LOADING=EAGER), and profile after torch.profiler.schedule's warmup.",
    "late start": "It starts its steps late and runs them no slower: what holds it back is before its step boundary "
                  "(the previous step's tail, checkpointing, logging or evaluation on that rank between steps, "
                  "garbage collection, or its profiler starting later). Look at that rank's timeline just before "
                  "ProfilerStep#, and move rank-specific work out of the loop or onto every rank alike.",
    "input": "Its DataLoader is slower: check that rank's data (shard size, storage or network throughput) and "
             "loader settings (num_workers, pin_memory=True, prefetch_factor), or balance the shards across ranks.",
    "host": "Its host ops take longer: check that rank's CPU (other processes on its cores, CPU/NUMA binding of "
            "the launcher, throttling) and rank-specific Python work (logging, checkpointing, metrics on one rank).",
    "sync": "It blocks on host-device syncs the other ranks don't: run `perfkit sync-points` on its trace and move the "
            "rank-specific .item()/.cpu()/print calls (often logging on one rank) out of the step.",
    "compute": "Its GPU kernels take longer: check that GPU's clocks and temperature (nvidia-smi -q -d "
               "CLOCK,TEMPERATURE,PERFORMANCE for throttling) and whether its batch is larger (uneven sequence "
               "lengths or padding): balance the work per rank.",
    "comm wait": "Its collectives take longer than its peers' beyond waiting for them: a slower link or NIC on "
                 "that rank (NCCL_DEBUG=INFO, nvidia-smi topo -m), or it waits for a rank whose trace is not "
                 "in this set: profile every rank.",
    "unattributed": "None of its measured parts (DataLoader, host ops, syncs, GPU compute, collectives) is larger "
                    "than the median rank's: it reached the step late (it arrives last at the first collectives and "
                    "has no slack left) or runs untraced host work (Python between ops). Profile more steps to see "
                    "whether it persists, with with_stack=True, and compare its timeline with the median rank's.",
}


def parts(steps: pd.DataFrame) -> pd.DataFrame:
    """The cause parts of each step row (us), columns ``_PARTS`` values."""
    return pd.DataFrame({
        "input_us": steps["dataloader_us"], "host_us": steps["host_other_us"],
        "sync_us": np.maximum(steps["sync_us"] - steps["wait_us"], 0.0),
        "compute_us": steps["compute_us"], "comm_wait_us": np.maximum(steps["comm_us"] - steps["wait_us"], 0.0),
    }, index=steps.index)


def step_noise_us(steps: pd.DataFrame) -> float:
    """The step-to-step noise of the excess (us, see the module doc); NaN with fewer than ``MIN_NOISE_STEPS``
    steps. ``steps`` carries ``excess_us``."""
    per_rank = steps.groupby("file_id")["excess_us"].agg(
        lambda d: MAD_TO_SIGMA * float(np.median(np.abs(d - np.median(d)))) if len(d) >= MIN_NOISE_STEPS else np.nan)
    return float(per_rank.median()) if per_rank.notna().any() else float("nan")


def excess(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with ``median_own_us``, ``median_step_us`` (the median rank's wall time in that step) and
    ``excess_us``: the arrival lateness where the step has matched collectives, else own time over the
    median rank's."""
    by_step = steps.groupby("step")
    out = steps.assign(median_own_us=by_step["own_us"].transform("median"),
                       median_step_us=by_step["wall_us"].transform("median"))
    own = out["own_us"] - out["median_own_us"]
    late = out["late_us"] if "late_us" in out else pd.Series(np.nan, index=out.index)
    return out.assign(excess_us=late.where(late.notna(), own))


def find_stragglers(steps: pd.DataFrame, *, straggler_pct: float = STRAGGLER_PCT,
                    consistent=frozenset()) -> tuple[pd.DataFrame, float]:
    """Straggling (rank, step) rows (``STRAGGLER_COLUMNS``, largest excess first) and the noise (us).

    ``steps``: one row per rank file and step with ``file_id``, ``rank``, ``file``, ``step``, ``wall_us``,
    ``own_us``, ``wait_us``, ``late_us``, ``start_late_us``, ``first_launch_us`` and the columns ``parts`` reads;
    steps seen on one rank are skipped. ``consistent``: the file ids of the ranks consistently last
    (``collectives.last_arrivals``), held to ``CONSISTENT_PCT`` instead of ``straggler_pct``.
    """
    shared = steps[steps.groupby("step")["file_id"].transform("size") >= 2]
    if shared.empty:
        return pd.DataFrame(columns=STRAGGLER_COLUMNS), float("nan")
    shared = excess(shared)
    noise = step_noise_us(shared)
    base = shared["median_step_us"]
    bar = np.where(shared["file_id"].isin(list(consistent)), min(CONSISTENT_PCT, straggler_pct), straggler_pct)
    flagged = (shared["excess_us"] >= bar * base) & (base > 0)
    if np.isfinite(noise):
        flagged &= shared["excess_us"] > NOISE_SIGMAS * noise
    over = _over_median(shared, parts(shared))
    out = shared[["rank", "file", "step", "own_us", "median_own_us", "excess_us"]].assign(
        excess_pct=100.0 * shared["excess_us"] / base, start_late_us=_column(shared, "start_late_us"),
        first_launch_us=_over_median(shared, _column(shared, "first_launch_us").to_frame())["first_launch_us"])
    out = pd.concat([out, over], axis=1)[flagged]
    out["cause"] = [_cause(row) for row in out.to_dict("records")]
    return out.sort_values(["excess_pct", "rank"], ascending=[False, True], ignore_index=True)[STRAGGLER_COLUMNS], noise


def _column(steps: pd.DataFrame, name: str) -> pd.Series:
    return steps[name] if name in steps else pd.Series(0.0, index=steps.index, name=name)


def _over_median(steps: pd.DataFrame, split: pd.DataFrame) -> pd.DataFrame:
    """Each part's excess over the median rank's in its step, at least 0 (below the median explains none of it)."""
    return (split - split.groupby(steps["step"]).transform("median")).clip(lower=0.0)


def _cause(row: dict) -> str:
    if row["excess_us"] > 0 and row.get("first_launch_us", 0.0) >= LATE_START_SHARE * row["excess_us"]:
        return "first launch"
    if row["excess_us"] > 0 and row["start_late_us"] >= LATE_START_SHARE * row["excess_us"]:
        return "late start"
    name, value = max(((n, row[c]) for n, c in _PARTS.items()), key=lambda item: item[1])
    return name if value > 0 and value >= MIN_CAUSE_SHARE * row["excess_us"] else "unattributed"


def by_rank(stragglers: pd.DataFrame, steps_per_rank: pd.Series) -> pd.DataFrame:
    """One row per straggling rank file: rank, file, steps (flagged), of_steps, median excess_pct
    and excess_us, and the most frequent cause with its median excess (us) per flagged step."""
    rows = []
    for (rank, file), grp in stragglers.groupby(["rank", "file"], sort=False):
        cause = grp["cause"].mode().iloc[0]
        part = {**_PARTS, "first launch": "first_launch_us"}.get(cause)
        rows.append({"rank": int(rank), "file": file, "steps": len(grp), "of_steps": int(steps_per_rank.get(file, 0)),
                     "excess_pct": float(grp["excess_pct"].median()), "excess_us": float(grp["excess_us"].median()),
                     "cause": cause, "cause_us": float(grp[part].median()) if part else float("nan")})
    return pd.DataFrame(rows, columns=["rank", "file", "steps", "of_steps", "excess_pct", "excess_us", "cause",
                                       "cause_us"])
