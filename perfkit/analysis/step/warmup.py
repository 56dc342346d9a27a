"""Warm-up: first calls that take far longer than the same call does later (cold start).

The first ``cudaLaunchKernel`` of a process loads the CUDA module (hundreds of ms), the first
``aten::mm`` creates the cuBLAS handle, the first convolution runs cuDNN's autotuner, a lazy
module initializes: one-time costs that say nothing about the steady loop. Counted as step time they
read as launch overhead or host work ("launch 92% of GPU idle time" for one 421 ms first launch).

Rule: a host op or runtime call is **warm-up** when it is among the first ``WARMUP_FIRST`` calls
of its name on its rank and in the step of the first of them (warm-up is the first steps: a slow call in a
later step is a stall, an OS preemption or another process taking the core), at least ``MIN_LATER`` calls of that name follow it, and it lasts at least
``WARMUP_FACTOR`` times the median of those later calls and at least ``WARMUP_MIN_US``. A launch
call is first by the kernel it launches (the GPU runtime loads each kernel's code on its first launch:
the 7th ``hipLaunchKernel`` of a step, the first of ``add_``'s kernel, took 6.5 ms beside 5 us), and
compared with the median of all other calls of its name. Only the
outermost such call of a nest is listed (a cold ``aten::mm`` and the launch inside it are one cost).
Calls that wait for the GPU are never warm-up: synchronize calls, scalar reads (``SYNC_OPS``) and the
ops around them last as long as the GPU work queued before them. Nor is a call whose name's first call is that
slow in every step that calls it (two steps or more): a cost each step pays (cuDNN benchmarking a shape that
changes every step, a cache rebuilt per step), not a one-time one.

A **cold first step** is warm-up whole: a rank's first full step window lasting at least ``WARMUP_FACTOR``
times the median of its later full steps (at least ``MIN_LATER_STEPS`` of them) and ``WARMUP_MIN_US``
longer. A profile that starts with the loop (``perfkit profile --wait 0``) records model initialization on
the CPU, the CUDA context, module loads and library handles in its first step, much of it in calls that
never recur (``aten::uniform_`` initializing weights) or in many first calls each under the per-call floor
(the first launch of every kernel): the H200 transformer of scripts/gpu took 842 ms in its first step and
16 ms in each later one, and its per-call warm-up found 589 ms of the 826 ms difference. Such a window is
one row (named ``ProfilerStep#N (first step)``, ``cat`` "step"); the calls inside it are not listed again.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.ancestry import with_ancestors
from ...trace import intervals
from ...trace.schema import LAUNCH_CATEGORIES
from ...trace.steps import full_steps, step_windows
from ..classify import SYNC_RUNTIME
from ..compile import compile_spans
from ..host_ops import SYNC_OPS, host_events
from .rules import COMPILE_SHARE

# Among the first calls of a name: lazy initialization happens on first use, cuDNN's benchmark
# mode tries algorithms on the first call of each new shape (a few calls of one op name).
WARMUP_FIRST = 3
# Later calls needed to know a call's steady cost: with fewer, a slow call may be the normal one.
MIN_LATER = 3
# Ten times the steady cost: run-to-run noise of a host call is tens of percent, and an OS
# preemption adds at most a scheduler slice (~1-4 ms), which the floor below covers.
WARMUP_FACTOR = 10.0
# And at least 1 ms: a 60 us first call beside 5 us later ones is a cache miss, not a cold start
# worth setting apart (CUDA context/module loads and cuBLAS/cuDNN handle creation take 10s-100s of ms).
WARMUP_MIN_US = 1000.0
# Later full steps needed to call a first step cold: the default perfkit profile window holds 3 steps.
MIN_LATER_STEPS = 2
COLUMNS = ["label", "rank", "name", "cat", "ts_us", "dur_us", "later_median_us", "later_calls"]


def warmup_events(trace, *, host: pd.DataFrame | None = None, links: pd.DataFrame | None = None) -> pd.DataFrame:
    """The warm-up of ``trace`` (module doc): cold first steps, then the warm-up calls outside them,
    outermost only, in time order (``COLUMNS``; ``label`` is the call's label in ``trace.events``, -1 for
    a step). ``host``: ``host_events(trace)`` (of these categories or more) and ``links``:
    ``trace.launches()``, when the caller has them."""
    calls = warmup_calls(trace, host=host, links=links)
    cold = cold_first_steps(step_windows(trace), compile_spans(trace))
    if cold.empty:
        return calls
    inside = np.zeros(len(calls), dtype=bool)
    for w in cold.itertuples():
        inside |= ((calls["rank"] == w.rank) & (calls["ts_us"] >= w.ts_us)
                   & (calls["ts_us"] < w.ts_us + w.dur_us)).to_numpy()
    both = [f for f in (cold, calls[~inside]) if len(f)]
    return pd.concat(both, ignore_index=True).sort_values("ts_us", kind="stable").reset_index(drop=True)[COLUMNS]


def cold_first_steps(windows: pd.DataFrame, compiling: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cold first step of each rank (module doc) among ``windows`` (``step_windows``; partial steps
    at the window's edges are left out), as ``COLUMNS`` rows. A first step that compiles (``compiling``:
    compile spans covering ``COMPILE_SHARE`` of it or more) is left to the compiling rule."""
    rows = []
    if compiling is not None and len(compiling) and len(windows):
        compiled = intervals.window_cover(compiling, windows) >= COMPILE_SHARE * windows["dur_us"].to_numpy()
        windows = windows[~compiled]
    full = full_steps(windows)
    for rank, grp in full.groupby("rank", sort=False):
        grp = grp.sort_values("start_us")
        if len(grp) < 1 + MIN_LATER_STEPS:
            continue
        first, later = grp.iloc[0], float(grp["dur_us"].iloc[1:].median())
        if first["dur_us"] >= WARMUP_FACTOR * later and first["dur_us"] - later >= WARMUP_MIN_US:
            rows.append({"label": -1, "rank": rank, "name": f"ProfilerStep#{int(first['step'])} (first step)",
                         "cat": "step", "ts_us": float(first["start_us"]), "dur_us": float(first["dur_us"]),
                         "later_median_us": later, "later_calls": len(grp) - 1})
    return pd.DataFrame(rows, columns=COLUMNS)


def warmup_calls(trace, *, host: pd.DataFrame | None = None, links: pd.DataFrame | None = None) -> pd.DataFrame:
    """The warm-up calls of ``trace`` (module doc), outermost only, in time order (``COLUMNS``)."""
    categories = ("cpu_op", *LAUNCH_CATEGORIES)
    host = host_events(trace, categories) if host is None else host
    mine = host["cat"].isin(categories).to_numpy()
    if not mine.any():
        return pd.DataFrame(columns=COLUMNS)
    # Names and kernels as integer codes (names in text order): sorting and grouping half a million
    # calls by strings is the slow part; the strings are put back on the few calls found.
    rows = np.flatnonzero(mine & ~_waits(host, mine, trace.events["parent"]))
    labels = host.index.to_numpy()[rows]
    frame = pd.DataFrame({"label": labels, "rank": host["rank"].to_numpy()[rows],
                          "name": _text_order_codes(host["name"])[rows], "row": rows,
                          "step": host["step"].to_numpy(dtype=np.int64)[rows],
                          "ts_us": host["ts_us"].to_numpy(dtype=np.float64)[rows],
                          "dur_us": host["dur_us"].to_numpy(dtype=np.float64)[rows],
                          "parent": host["parent"].to_numpy(dtype=np.int64)[rows],
                          "kernel": _launched(trace.launches() if links is None else links).reindex(
                              labels, fill_value=-1).to_numpy()})
    frame = _by_name(frame)
    groups = frame.groupby("group", sort=False)
    order = groups.cumcount().to_numpy()
    later = frame[order >= WARMUP_FIRST].groupby("group", sort=False)["dur_us"].agg(["median", "size"])
    frame = frame.join(later, on="group")
    slow = frame["dur_us"].to_numpy() >= np.maximum(WARMUP_FACTOR * frame["median"].fillna(np.inf).to_numpy(),
                                                    WARMUP_MIN_US)
    # ... and in the step of its name's first call: a slow call of a later step is a stall (a preemption),
    # not a cold start, whatever its rank among the calls of its name (one call per step: the third is in step 3)
    first = (order < WARMUP_FIRST) & (frame["step"].to_numpy() == groups["step"].transform("first").to_numpy())
    launch = frame["kernel"].to_numpy() >= 0
    if launch.any():
        # Launch calls: the first launch of each kernel, against all other calls of the launch's name.
        kernel_first = ~frame.duplicated(["rank", "kernel"]).to_numpy() & launch
        others = groups["dur_us"].transform("median").to_numpy()
        count = groups["dur_us"].transform("size").to_numpy()
        slow_launch = frame["dur_us"].to_numpy() >= np.maximum(WARMUP_FACTOR * others, WARMUP_MIN_US)
        first = np.where(launch, kernel_first, first)
        slow = np.where(launch, slow_launch & (count - 1 >= MIN_LATER), slow)
        frame["size"] = np.where(launch, count - 1, frame["size"])
        frame["median"] = np.where(launch, others, frame["median"])
    hit = first & slow & (frame["size"].fillna(0).to_numpy() >= MIN_LATER) & ~_every_step(frame, slow)
    found = frame[hit].rename(columns={"median": "later_median_us", "size": "later_calls"})
    found = found[~_inside_another(found, trace.events["parent"])]
    found["later_calls"] = found["later_calls"].astype(np.int64)
    found = found.sort_values("ts_us", kind="stable").reset_index(drop=True)
    rows = found["row"].to_numpy()
    return found.assign(name=host["name"].iloc[rows].reset_index(drop=True),
                        cat=host["cat"].iloc[rows].reset_index(drop=True))[COLUMNS]


def _every_step(frame: pd.DataFrame, slow: np.ndarray) -> np.ndarray:
    """Per call: its name's first call is ``slow`` in every step (two or more) that calls it (module doc).
    ``frame`` is sorted by rank, name and start (``_by_name``)."""
    in_step = frame["step"].to_numpy() >= 0
    first_in_step = ~frame.duplicated(["group", "step"]).to_numpy() & in_step
    per = pd.DataFrame({"group": frame["group"].to_numpy(), "first": first_in_step, "slow": first_in_step & slow})
    counts = per.groupby("group")[["first", "slow"]].sum()
    recurring = counts.index[(counts["first"] >= 2) & (counts["slow"] == counts["first"])]
    return frame["group"].isin(recurring).to_numpy()


def _by_name(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` sorted by rank, name and start (stable), with ``group``: one number per (rank, name)."""
    if frame["name"].dtype.kind != "i":  # names kept as text (one is missing): pandas sorts them
        frame = frame.sort_values(["rank", "name", "ts_us"], kind="stable")
        return frame.assign(group=frame.groupby(["rank", "name"], sort=False).ngroup().to_numpy())
    order = np.lexsort((frame["ts_us"].to_numpy(), frame["name"].to_numpy(), frame["rank"].to_numpy()))
    frame = frame.iloc[order]
    rank, name = frame["rank"].to_numpy(), frame["name"].to_numpy()
    new = np.ones(len(frame), dtype=bool)
    new[1:] = (rank[1:] != rank[:-1]) | (name[1:] != name[:-1])
    return frame.assign(group=np.cumsum(new) - 1)


def _text_order_codes(names: pd.Series) -> np.ndarray:
    """One integer per name, equal for equal names and ordered as the names sort (the names
    themselves where one is missing: grouping leaves those out)."""
    codes, uniques = pd.factorize(names)
    if (codes < 0).any():
        return names.to_numpy()
    order = np.empty(len(uniques), dtype=np.int64)
    order[np.argsort(uniques.to_numpy(), kind="stable")] = np.arange(len(uniques))
    return order[codes]


def _launched(links: pd.DataFrame) -> pd.Series:
    """The GPU event each launch call launched (first one), by the call's label (``links``:
    ``trace.launches()``), as a code per event name (-1: none)."""
    links = links.drop_duplicates("cpu_index")
    return pd.Series(pd.factorize(links["gpu_name"])[0], index=links["cpu_index"].to_numpy())


def _waits(host: pd.DataFrame, mine: np.ndarray, parents: pd.Series) -> np.ndarray:
    """Whether each host event is, or encloses, a synchronize call or a scalar read among the
    ``mine`` rows."""
    names = host["name"]
    waits = names.isin([n for n, kind in SYNC_RUNTIME.items() if kind.endswith("_sync")] + list(SYNC_OPS))
    return host.index.isin(with_ancestors(parents, host.index[waits.to_numpy() & mine]))


def _inside_another(found: pd.DataFrame, parents: pd.Series) -> np.ndarray:
    """Whether each found call has another found call among its ancestors."""
    labels = set(found["label"].tolist())
    out = np.zeros(len(found), dtype=bool)
    for i, parent in enumerate(found["parent"].to_numpy()):
        depth = 0
        while parent >= 0 and depth < 10_000:
            if parent in labels:
                out[i] = True
                break
            parent = int(parents.at[parent]) if parent in parents.index else -1
            depth += 1
    return out


def warmup_text(found: pd.DataFrame, limit: int = 3) -> str:
    """"aten::mm 421.3 ms (later calls: median 12 us)" for the longest ``limit`` calls (a cold first
    step: "later steps")."""
    rows = found.sort_values("dur_us", ascending=False).head(limit)
    return "; ".join(f"{r.name} {r.dur_us / 1e3:,.1f} ms (later {'steps' if r.cat == 'step' else 'calls'}: "
                     f"median {_us(r.later_median_us)})" for r in rows.itertuples())


def warmup_count_text(found: pd.DataFrame) -> str:
    """"a cold first step and 3 first call(s)", "21 first call(s)": what ``found`` holds, counted."""
    steps = int((found["cat"] == "step").sum()) if len(found) else 0
    calls = len(found) - steps
    parts = ([f"{'a cold first step' if steps == 1 else f'{steps} cold first steps'}"] if steps else []) + \
        ([f"{calls} first call(s)"] if calls or not steps else [])
    return " and ".join(parts)


def _us(value: float) -> str:
    return f"{value / 1e3:,.2f} ms" if value >= 1e3 else f"{value:,.0f} us"
