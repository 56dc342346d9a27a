"""Shared timeline pieces of the step-explaining analyses (hotspots, critical path, GPU gaps,
step anatomy): host threads and which one is "main", host-op nesting, and interval unions that
answer "how much of [a, b) was covered" in O(log n).

Threads are identified by (file, pid, tid) and numbered by ``thread_codes``; ``thread_table``
labels them the way the trace does (the tid), adding the pid or the rank only where needed to
tell threads apart.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.ancestry import positions
from ..trace.intervals import union
from ..trace.names import starts_with
from ..trace.steps import STEP_PREFIX
from ..trace.threads import event_threads
from .host_ops import HOST_CATEGORIES

THREAD_COLUMNS = ["thread", "file_id", "rank", "pid", "tid", "label", "steps", "root_frame", "launches", "python_us",
                  "host_us", "main"]
# host_us is NaN in files where launches or Python time already pick the main thread.
# The outermost frame of a Python program ("train.py(184): <module>"): the thread that runs it is main.
_ROOT_FRAME = ": <module>"
_LOADER_MARK, _OPTIMIZER_MARK = "enumerate(DataLoader)", "Optimizer.step#"


def host_parents(trace, events: pd.DataFrame) -> pd.Series:
    """Label of the innermost host event enclosing each of ``events`` (host events of ``trace``) on
    its thread, -1 at top level: the ``parent`` column computed at load (see perfkit.trace.nesting)."""
    return trace.events["parent"].reindex(events.index)


def thread_table(trace, python_us: pd.Series | None = None, links: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per host thread (columns ``THREAD_COLUMNS``): launches it issued (GPU work linked
    to its runtime calls), Python time (``python_us``: union of its python_function frames, given
    by the caller), host time (union of its host events), and ``main``: per file, the thread that
    marks the profiler steps (``steps``: its ``ProfilerStep#`` ranges), else the one that runs the
    program's outermost Python frame (``root_frame``: a ``<module>`` frame), else the one that
    launches the most GPU work, else the one with the most Python time, else the most host time.
    Launches alone would pick the autograd engine's thread in a training step: backward launches
    more kernels than forward, but the main thread waits for it inside ``run_backward``.
    Without ``ProfilerStep#`` ranges, the thread with the DataLoader ``__next__`` and ``Optimizer.step#``
    ranges the steps are then cut at comes before the other criteria.
    ``links``: ``trace.launches()`` when the caller already has it."""
    ev = trace.events
    rows = np.flatnonzero((ev["ph"] == "X").to_numpy() & ev["cat"].isin(HOST_CATEGORIES + ("python_function",)).to_numpy())
    codes = event_threads(trace)
    host_codes = codes[rows]
    uniques, first = np.unique(host_codes, return_index=True)
    pick = rows[first]
    table = pd.DataFrame({"thread": uniques, "file_id": ev["file_id"].to_numpy()[pick],
                          "rank": ev["rank"].to_numpy()[pick], "pid": ev["pid"].iloc[pick].astype(str).to_numpy(),
                          "tid": ev["tid"].iloc[pick].astype(str).to_numpy()}).set_index("thread", drop=False)
    links = trace.launches() if links is None else links
    launched = pd.Series(codes[positions(ev, links["cpu_index"])]).value_counts() if len(links) else \
        pd.Series(dtype=np.int64)
    table["launches"] = launched.reindex(table.index, fill_value=0)
    table["steps"] = _count_by(host_codes, _starts(ev, rows, STEP_PREFIX), table.index)
    frames = (ev["cat"] == "python_function").to_numpy()[rows] & (ev["depth"].to_numpy()[rows] <= 0) \
        if "depth" in ev.columns else np.zeros(len(rows), dtype=bool)
    table["root_frame"] = _count_by(host_codes, frames & _ends(ev, rows, _ROOT_FRAME), table.index) > 0
    table["python_us"] = 0.0 if python_us is None else python_us.reindex(table.index, fill_value=0.0)
    table["host_us"] = _host_us(ev, rows, host_codes, table)
    table["label"] = _labels(table)
    table["main"] = False
    # Without ProfilerStep# windows the steps come from these annotations (``trace.steps``): the thread that runs
    # them runs the loop, where launches alone would pick the autograd engine's thread.
    marks = _count_by(host_codes, _starts(ev, rows, _LOADER_MARK) | _starts(ev, rows, _OPTIMIZER_MARK), table.index)
    order = table.assign(marks=marks).sort_values(["steps", "marks", "root_frame", "launches", "python_us", "host_us"],
                                                  ascending=False)
    table.loc[order.drop_duplicates("file_id")["thread"].to_numpy(), "main"] = True
    return table.reset_index(drop=True)[THREAD_COLUMNS]


def _count_by(codes: np.ndarray, hit: np.ndarray, index: pd.Index) -> pd.Series:
    return pd.Series(codes[hit]).value_counts().reindex(index, fill_value=0).astype(np.int64)


def _starts(ev: pd.DataFrame, rows: np.ndarray, prefix: str) -> np.ndarray:
    return starts_with(ev["name"], prefix)[rows]


def _ends(ev: pd.DataFrame, rows: np.ndarray, suffix: str) -> np.ndarray:
    names = ev["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = np.array([str(c).endswith(suffix) for c in names.cat.categories], dtype=bool)
        codes = names.cat.codes.to_numpy()[rows]
        return np.where(codes >= 0, hits[np.clip(codes, 0, None)] if len(hits) else False, False)
    return names.iloc[rows].astype(str).str.endswith(suffix).to_numpy(dtype=bool)


def _host_us(ev: pd.DataFrame, rows: np.ndarray, codes: np.ndarray, table: pd.DataFrame) -> pd.Series:
    """Union of host events per thread, computed only for files where neither launches nor Python
    time can pick the main thread (NaN elsewhere): the union is the slow part on large traces."""
    decided = table.groupby("file_id")[["launches", "python_us"]].transform("max").sum(axis=1) > 0
    out = pd.Series(np.nan, index=table.index)
    need = table.index[~decided.to_numpy()]
    if len(need):
        mask = np.isin(codes, need)
        start = ev["ts_us"].to_numpy()[rows[mask]]
        out[need] = _union_by(codes[mask], start, start + ev["dur_us"].to_numpy()[rows[mask]]).reindex(need)
    return out


def _union_by(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pd.Series:
    order = np.argsort(codes, kind="stable")
    codes, starts, ends = codes[order], starts[order], ends[order]
    uniques, bounds = np.unique(codes, return_index=True)
    bounds = np.append(bounds, len(codes))
    out = [float(np.subtract(*union(starts[a:b], ends[a:b])[::-1]).sum())
           for a, b in zip(bounds[:-1], bounds[1:])]
    return pd.Series(out, index=uniques, dtype=np.float64)


def _labels(table: pd.DataFrame) -> list[str]:
    """The tid, or pid/tid where a tid repeats in a file, prefixed by the rank when there are several."""
    labels = table["tid"].astype(str)
    if labels.duplicated().any():
        labels = table["pid"].astype(str) + "/" + labels
    if table["file_id"].nunique() > 1:
        labels = "rank" + table["rank"].astype(str) + ":" + labels
    return labels.tolist()
