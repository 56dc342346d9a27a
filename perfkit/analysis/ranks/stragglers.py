"""Stragglers: the ranks the others wait for, by how much, and which part of their step made them late.

In a synchronous job the collectives make every rank's step as long as the slowest rank's: the
ranks that arrive early wait inside the collective, so their *raw* step time is the longest and
comparing raw step times names the victims. perfkit compares each rank's **own step time**,
``own_us = wall_us - wait_us`` (the step less the time its collectives waited for a peer, see
``perfkit.analysis.ranks.collectives``), with the median rank's in the same step.

Rule: rank r is a straggler in step s when both hold

* ``own - median_own(s) >= straggler_pct * median_own(s)`` (default 10%);
* ``own - median_own(s) > NOISE_SIGMAS * noise_us``, where ``noise_us`` is the step-to-step
  noise: per rank, the robust standard deviation (1.4826 x MAD) over its steps of its
  deviation from the step's median rank; the median of that over ranks. It needs at least
  ``MIN_NOISE_STEPS`` steps; with fewer the noise is unknown, the first condition decides alone
  and the result carries a warning.

Cause: the part of the step in which the straggler exceeds the median rank the most (the
median of that part over ranks in the same step), one of ``CAUSES``:

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
CAUSES = ("input", "host", "sync", "compute", "comm wait", "unattributed")
STRAGGLER_COLUMNS = ["rank", "file", "step", "own_us", "median_own_us", "excess_us", "excess_pct", "cause",
                     "input_us", "host_us", "sync_us", "compute_us", "comm_wait_us"]
_PARTS = {"input": "input_us", "host": "host_us", "sync": "sync_us", "compute": "compute_us",
          "comm wait": "comm_wait_us"}

FIXES = {
    "input": "Its DataLoader is slower: check that rank's data (shard size, storage or network throughput) and "
             "loader settings (num_workers, pin_memory=True, prefetch_factor), or balance the shards across ranks.",
    "host": "Its host ops take longer: check that rank's CPU (other processes on its cores, CPU/NUMA binding of "
            "the launcher, throttling) and rank-specific Python work (logging, checkpointing, metrics on one rank).",
    "sync": "It blocks on host-device syncs the other ranks don't: run `perfkit syncs` on its trace and move the "
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
    """The step-to-step noise (us, see the module doc); NaN with fewer than ``MIN_NOISE_STEPS`` steps."""
    deviation = steps["own_us"] - steps.groupby("step")["own_us"].transform("median")
    frame = steps.assign(deviation=deviation)
    per_rank = frame.groupby("file_id")["deviation"].agg(
        lambda d: MAD_TO_SIGMA * float(np.median(np.abs(d - np.median(d)))) if len(d) >= MIN_NOISE_STEPS else np.nan)
    return float(per_rank.median()) if per_rank.notna().any() else float("nan")


def find_stragglers(steps: pd.DataFrame, *, straggler_pct: float = STRAGGLER_PCT) -> tuple[pd.DataFrame, float]:
    """Straggling (rank, step) rows (``STRAGGLER_COLUMNS``, largest excess first) and the noise (us).

    ``steps``: one row per rank file and step with ``file_id``, ``rank``, ``file``, ``step``,
    ``own_us``, ``wait_us`` and the columns ``parts`` reads; steps seen on one rank are skipped.
    """
    shared = steps[steps.groupby("step")["file_id"].transform("size") >= 2]
    noise = step_noise_us(shared) if len(shared) else float("nan")
    if shared.empty:
        return pd.DataFrame(columns=STRAGGLER_COLUMNS), noise
    median = shared.groupby("step")["own_us"].transform("median")
    excess = shared["own_us"] - median
    flagged = (excess >= straggler_pct * median) & (median > 0)
    if np.isfinite(noise):
        flagged &= excess > NOISE_SIGMAS * noise
    split = parts(shared)
    over = split - split.groupby(shared["step"]).transform("median")
    out = shared[["rank", "file", "step", "own_us"]].assign(median_own_us=median, excess_us=excess,
                                                            excess_pct=100.0 * excess / median)
    out = pd.concat([out, over], axis=1)[flagged]
    out["cause"] = [_cause(row) for row in out.to_dict("records")]
    return out.sort_values(["excess_pct", "rank"], ascending=[False, True], ignore_index=True)[STRAGGLER_COLUMNS], noise


def _cause(row: dict) -> str:
    name, value = max(((n, row[c]) for n, c in _PARTS.items()), key=lambda item: item[1])
    return name if value > 0 and value >= MIN_CAUSE_SHARE * row["excess_us"] else "unattributed"


def by_rank(stragglers: pd.DataFrame, steps_per_rank: pd.Series) -> pd.DataFrame:
    """One row per straggling rank file: rank, file, steps (flagged), of_steps, median excess_pct
    and excess_us, and the most frequent cause with its median excess (us) per flagged step."""
    rows = []
    for (rank, file), grp in stragglers.groupby(["rank", "file"], sort=False):
        cause = grp["cause"].mode().iloc[0]
        part = _PARTS.get(cause)
        rows.append({"rank": int(rank), "file": file, "steps": len(grp), "of_steps": int(steps_per_rank.get(file, 0)),
                     "excess_pct": float(grp["excess_pct"].median()), "excess_us": float(grp["excess_us"].median()),
                     "cause": cause, "cause_us": float(grp[part].median()) if part else float("nan")})
    return pd.DataFrame(rows, columns=["rank", "file", "steps", "of_steps", "excess_pct", "excess_us", "cause",
                                       "cause_us"])
