"""Helpers over the loader's nesting columns (``parent``, ``depth``; rules in
:mod:`perfkit.trace.nesting`): the enclosing and outermost op of each event, self time, the
ancestors of a set of events, and the innermost container running when an event starts.

On one thread an event is the child of the innermost earlier event still running when it starts,
with zero-duration ties at whole microseconds resolved by the loader. Self time is an event's
duration minus the durations of its direct children on the same thread, the "Self CPU" of
``prof.key_averages()``: runtime calls (``cudaLaunchKernel``, ``cudaStreamSynchronize``) are
children of the op that issued them, so they appear as rows of their own.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ParameterError
from .names import starts_with
from .steps import STEP_PREFIX
from .threads import thread_key


def nest(events: pd.DataFrame) -> pd.DataFrame:
    """Call nesting of host events, one row per event (same index), read from the ``parent`` and
    ``depth`` columns that the loader computed (rules in :mod:`perfkit.trace.nesting`).

    ``events``: rows of ``Trace.events`` (host events, e.g. from ``host_events``). Columns:
    ``parent`` (label of the innermost enclosing event on the thread, -1 if none), ``op`` (label of
    the innermost enclosing ``cpu_op``, -1), ``top`` (label of the outermost ``cpu_op`` among the event
    and its ancestors, ``ProfilerStep#`` excluded, -1), ``depth``, ``self_us`` (duration minus the
    direct children's durations, at least 0). Ancestors missing from ``events`` end the walk up.
    Raises ParameterError when ``events`` lacks the nesting columns (a trace cached by an older perfkit).
    """
    missing = [c for c in ("parent", "depth") if c not in events.columns]
    if missing:
        raise ParameterError(f"events lack columns {missing}: load the trace with load_trace() of this perfkit")
    n = len(events)
    parent = positions(events, events["parent"].to_numpy())
    is_op = (events["cat"].astype(str).to_numpy() == "cpu_op") & ~starts_with(events["name"], STEP_PREFIX)
    inner, outer = _op_ancestry(parent, events["depth"].to_numpy(), is_op)
    durs = events["dur_us"].to_numpy(dtype=np.float64)
    child_time = np.bincount(parent[parent >= 0], weights=durs[parent >= 0], minlength=n)
    enclosing_op = np.where(parent >= 0, inner[np.clip(parent, 0, None)], -1)
    labels = events.index.to_numpy()
    return pd.DataFrame({
        "parent": events["parent"].to_numpy(dtype=np.int64), "op": _to_labels(enclosing_op, labels),
        "top": _to_labels(outer, labels), "depth": events["depth"].to_numpy(dtype=np.int64),
        "self_us": np.clip(durs - child_time, 0.0, None),
    }, index=events.index)


def _op_ancestry(parent: np.ndarray, depth: np.ndarray, is_op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: position of the innermost cpu_op among itself and its ancestors (``inner``) and of the
    outermost (``outer``), -1 if none; computed level by level, outermost level first."""
    n = len(parent)
    inner = np.where(is_op, np.arange(n), -1)
    outer = inner.copy()
    order = np.lexsort((np.arange(n), depth))
    levels = np.split(order, np.flatnonzero(np.diff(depth[order])) + 1) if n else []
    for rows in levels:
        rows = rows[parent[rows] >= 0]
        up = parent[rows]
        inner[rows] = np.where(is_op[rows], rows, inner[up])
        outer[rows] = np.where(outer[up] >= 0, outer[up], outer[rows])
    return inner, outer


def _to_labels(positions: np.ndarray, labels: np.ndarray) -> np.ndarray:
    positions = np.asarray(positions, dtype=np.int64)
    return np.where(positions >= 0, labels[np.clip(positions, 0, None)], -1).astype(np.int64)


def enclosing(containers: pd.DataFrame, queries: pd.DataFrame) -> pd.Series:
    """Label of the innermost container event running on the same thread when each query starts.

    ``containers`` must nest properly per thread (python_function frames, ops). Returns a Series
    indexed like ``queries``; -1 where no container encloses the query.
    """
    if queries.empty or containers.empty:
        return pd.Series(-1, index=queries.index, dtype=np.int64)
    both = pd.concat([containers[["file_id", "pid", "tid", "ts_us", "dur_us"]],
                      queries[["file_id", "pid", "tid", "ts_us", "dur_us"]]], ignore_index=True)
    n_cont = len(containers)
    is_query = np.arange(len(both)) >= n_cont
    starts = both["ts_us"].to_numpy(dtype=np.float64)
    ends = starts + both["dur_us"].to_numpy(dtype=np.float64)
    threads = thread_key(both)
    order = np.lexsort((-ends, is_query, starts, threads))
    found = _enclosing_loop(order.tolist(), starts.tolist(), ends.tolist(), threads.tolist(), n_cont)
    labels = containers.index.to_numpy()
    return pd.Series(_to_labels(np.array(found[n_cont:]), labels), index=queries.index)


def _enclosing_loop(order, starts, ends, threads, n_cont):
    found = [-1] * len(starts)
    stack: list[int] = []
    current = None
    for i in order:
        if threads[i] != current:
            stack.clear()
            current = threads[i]
        while stack and ends[stack[-1]] <= starts[i]:
            stack.pop()
        if i >= n_cont:
            found[i] = stack[-1] if stack else -1
        else:
            stack.append(i)
    return found


def with_ancestors(parents: pd.Series, labels) -> np.ndarray:
    """The labels and every ancestor of theirs on the host-nesting tree (``parents``: the events'
    ``parent`` column, label -> parent label, -1 at the top)."""
    marked = set(np.asarray(labels, dtype=np.int64).tolist())
    frontier = parents.reindex(list(marked)).dropna().astype(np.int64)
    while True:
        frontier = frontier[(frontier >= 0) & ~frontier.isin(marked)]
        if frontier.empty:
            return np.fromiter(marked, dtype=np.int64, count=len(marked))
        marked.update(frontier.tolist())
        frontier = parents.reindex(frontier.unique()).dropna().astype(np.int64)


class Ancestors:
    """The loader's host-event tree (``parent`` column) as positions over one events table, walked
    upward for a few rows at a time (every row of a walk moves up one level per pass): the enclosing
    marked event of a handful of events without computing :func:`nest` for all of them."""

    def __init__(self, ev: pd.DataFrame):
        self.events = ev
        self.parent = positions(ev, ev["parent"].to_numpy())

    def positions(self, labels) -> np.ndarray:
        return positions(self.events, labels)

    def walk(self, start: np.ndarray, *, inner: dict, outer: dict) -> dict[str, np.ndarray]:
        """Positions per start position (-1 where none): for each ``inner`` name, the innermost
        event strictly above the start whose mark (boolean per row) is set; for each ``outer`` name,
        the outermost marked event among the start and its ancestors."""
        out = {k: np.full(len(start), -1, dtype=np.int64) for k in (*inner, *outer)}
        cur, first = np.asarray(start, dtype=np.int64), True
        while (cur >= 0).any():
            live = cur >= 0
            at = np.clip(cur, 0, None)
            for key, mark in inner.items():
                fill = live & mark[at] & (out[key] < 0) & (not first)
                out[key][fill] = cur[fill]
            for key, mark in outer.items():
                here = live & mark[at]
                out[key][here] = cur[here]
            cur, first = np.where(live, self.parent[at], -1), False
        return out


def positions(events: pd.DataFrame, labels) -> np.ndarray:
    """Row positions of event labels in ``events``, -1 for -1 or a label not there (the labels
    themselves for the usual 0..n-1 index)."""
    labels = np.asarray(labels, dtype=np.int64)
    index = events.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return np.where((labels >= 0) & (labels < len(index)), labels, -1)
    return index.get_indexer(labels)
