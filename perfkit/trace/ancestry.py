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

    The answer is the last container, in (start, longest first, table order) per thread, that started
    by the query's start and ends after it (a container still running then): what a stack walk over
    the sorted events leaves on top. Found per thread by binary search and block maxima over the
    containers' ends, so a few queries over a million frames cost at most a sort, not a Python loop.
    """
    if queries.empty or containers.empty:
        return pd.Series(-1, index=queries.index, dtype=np.int64)
    def both(column: str) -> np.ndarray:
        return np.concatenate([f[column].to_numpy(dtype=np.float64) for f in (containers, queries)])

    n_cont = len(containers)
    starts = both("ts_us")
    ends = starts + both("dur_us")
    columns = ["file_id", "pid", "tid"]
    threads = thread_key(pd.concat([containers[columns], queries[columns]], ignore_index=True))
    if np.isfinite(starts).all():
        found = _enclosing_search(starts[:n_cont], ends[:n_cont], threads[:n_cont], starts[n_cont:], threads[n_cont:])
    else:  # a start that is not a number sorts last: keep the stack walk's answer for it
        is_query = np.arange(len(starts)) >= n_cont
        order = np.lexsort((-ends, is_query, starts, threads))
        found = _enclosing_loop(order.tolist(), starts.tolist(), ends.tolist(), threads.tolist(), n_cont)[n_cont:]
    labels = containers.index.to_numpy()
    return pd.Series(_to_labels(np.array(found, dtype=np.int64), labels), index=queries.index)


def _enclosing_search(c_start, c_end, c_thread, q_start, q_thread) -> np.ndarray:
    """Position of each query's enclosing container (rule in :func:`enclosing`), -1 for none."""
    found = np.full(len(q_start), -1, dtype=np.int64)
    for code in np.unique(q_thread):
        rows = np.flatnonzero(c_thread == code)
        if len(rows) == 0:
            continue
        keys = (-c_end[rows], c_start[rows])  # by start, longest first (as the loader writes frames)
        order = rows if in_lexsort_order(keys) else rows[np.lexsort(keys)]
        # An end that is not a number never ends (a stack walk never pops it).
        ends = np.where(np.isnan(c_end[order]), np.inf, c_end[order])
        mine = np.flatnonzero(q_thread == code)
        t = q_start[mine]
        hit = _last_above(ends, np.searchsorted(c_start[order], t, side="right"), t)
        found[mine] = np.where(hit >= 0, order[np.clip(hit, 0, None)], -1)
    return found


def in_lexsort_order(sort_keys: tuple) -> bool:
    """Whether rows are already in ``np.lexsort(sort_keys)`` order (last key first), ties included;
    False where a float key holds NaN (let the sort place it)."""
    if any(np.isnan(key).any() for key in sort_keys if key.dtype.kind == "f"):
        return False
    tied = np.ones(max(len(sort_keys[0]) - 1, 0), dtype=bool)
    for key in reversed(sort_keys):
        a, b = key[:-1], key[1:]
        if (tied & (a > b)).any():
            return False
        tied &= a == b
    return True


_BLOCK = 64  # positions per block of _last_above: a query scans two blocks and ~log2(n / 64) block maxima
_CHUNK = 1 << 15  # queries per block scan (a _CHUNK x _BLOCK matrix at a time)


def _last_above(values: np.ndarray, k: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each query i, the largest position j < k[i] with values[j] > t[i]; -1 where none."""
    n_blocks = -(-len(values) // _BLOCK)
    blocks = np.full(n_blocks * _BLOCK, -np.inf)
    blocks[:len(values)] = values
    blocks = blocks.reshape(n_blocks, _BLOCK)
    own = np.clip(k - 1, 0, None) // _BLOCK
    out = _last_in_blocks(blocks, own, k - own * _BLOCK, t)
    todo = np.flatnonzero((out < 0) & (own > 0))
    # Blocks before the query's own: the last whose maximum exceeds t, by binary lifting over a
    # sparse table of block maxima (level l: max of 2**l blocks starting at each block).
    levels = [blocks.max(axis=1)]
    while 2 ** len(levels) <= n_blocks:
        width = 2 ** (len(levels) - 1)
        levels.append(np.maximum(levels[-1][:-width], levels[-1][width:]))
    cur, limit = own[todo], t[todo]
    for level in range(len(levels) - 1, -1, -1):
        cand = cur - 2 ** level
        ok = cand >= 0
        ok[ok] = levels[level][cand[ok]] <= limit[ok]
        cur = np.where(ok, cand, cur)
    back = cur - 1
    hit = back >= 0
    out[todo[hit]] = _last_in_blocks(blocks, back[hit], np.full(int(hit.sum()), _BLOCK), limit[hit])
    return out


def _last_in_blocks(blocks: np.ndarray, block: np.ndarray, count: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per query: the last position among the first ``count`` of block ``block`` whose value
    exceeds ``t``, as a position in the flat array; -1 where none."""
    out = np.full(len(block), -1, dtype=np.int64)
    columns = np.arange(_BLOCK)
    for lo in range(0, len(block), _CHUNK):
        b, c, limit = block[lo:lo + _CHUNK], count[lo:lo + _CHUNK], t[lo:lo + _CHUNK]
        above = (blocks[b] > limit[:, None]) & (columns < c[:, None])
        last = _BLOCK - 1 - np.argmax(above[:, ::-1], axis=1)
        out[lo:lo + _CHUNK] = np.where(above.any(axis=1), b * _BLOCK + last, -1)
    return out


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
    ``parent`` column, label -> parent label, -1 at the top), in no particular order."""
    if _labels_are_positions(parents.index):
        return _marked_upward(parents.to_numpy(dtype=np.int64), np.asarray(labels, dtype=np.int64))
    marked = set(np.asarray(labels, dtype=np.int64).tolist())
    frontier = parents.reindex(list(marked)).dropna().astype(np.int64)
    while True:
        frontier = frontier[(frontier >= 0) & ~frontier.isin(marked)]
        if frontier.empty:
            return np.fromiter(marked, dtype=np.int64, count=len(marked))
        marked.update(frontier.tolist())
        frontier = parents.reindex(frontier.unique()).dropna().astype(np.int64)


def _marked_upward(up: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``with_ancestors`` over a table labelled 0..n-1 (``up``: parent label per row): one pass per
    level over the rows reached, marks in a boolean array. A label outside the table is kept and
    ends its walk, as in the general case."""
    n = len(up)
    marked = np.zeros(n, dtype=bool)
    extra = [labels[(labels < 0) | (labels >= n)]]
    frontier = labels[(labels >= 0) & (labels < n)]
    while len(frontier):  # each row has one parent: the frontier never grows
        marked[frontier] = True
        frontier = up[frontier]
        frontier = frontier[frontier >= 0]
        extra.append(frontier[frontier >= n])
        frontier = frontier[frontier < n]
        frontier = frontier[~marked[frontier]]
    return np.concatenate([np.flatnonzero(marked), np.unique(np.concatenate(extra))])


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
    if _labels_are_positions(events.index):
        return np.where((labels >= 0) & (labels < len(events.index)), labels, -1)
    return events.index.get_indexer(labels)


def _labels_are_positions(index: pd.Index) -> bool:
    """Whether ``index`` is the usual 0..n-1, where a row's label is its position."""
    return isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
