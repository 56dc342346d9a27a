"""Call nesting of host events, computed once per trace file at load time (then cached with it).

Adds three columns to a file's events table (see :mod:`perfkit.trace.schema`): ``parent``, ``depth``
and ``step``.

Host events (``schema.NESTED_CATEGORIES``: cpu_op, user_annotation, cuda_runtime, cuda_driver) nest
per thread (pid, tid). Events are visited in start order: by start time, then External id (the
profiler numbers ops and annotations as they start; a runtime call carries the id of the op that
issued it and comes after that op), then the longer one first, then file order. An event's parent
is the innermost earlier event still running when it starts (its end is after the event's start).
Runtime and driver calls never contain an op or an annotation.

Ties. Timestamps of traces before ~2024 are whole microseconds, so an op and the op it calls can
share one microsecond with ``dur`` 0 (``aten::item`` and its ``aten::_local_scalar_dense`` at the
same ``ts``, External id + 1). When a zero-duration event starts exactly when an earlier event ends
(zero-length events included), the timestamps cannot tell child from next sibling. Such an event is
the child of the innermost such open event K (walking up from the previous event) when

* it is a runtime/driver call carrying K's External id (the op that issued it), or
* K's name and its name occur as parent and direct child elsewhere in the same file where the
  timestamps leave no doubt (the child starts before the parent ends), or are a call PyTorch
  always makes (``KNOWN_CALLS``: ``aten::item`` -> ``aten::_local_scalar_dense`` and the copy chain);

otherwise it is K's next sibling, and K is closed. A chain of zero-duration calls at one microsecond,
item1 {lsd1}, item2 {lsd2} (consecutive External ids), so nests as item1 > lsd1 and item2 > lsd2:
item2 is neither lsd1's nor item1's child (item never calls item), so both close before it. A
zero-length parent is never dropped just because its end equals the next start.

python_function frames form their own tree: their ``parent`` is the frame named by their
``Python parent id`` (Kineto's exact link, which ties cannot confuse). That frame may be on another
thread: Python hooks that the autograd engine runs on its own thread point to the main thread's
``run_backward`` frame. A host event's ``parent`` is never a python_function frame and vice versa.

``step``: the ``step`` number of the file's step (:mod:`perfkit.trace.steps`) whose [start, end)
holds the event's start, for host events and python_function frames; -1 outside every step and for
every other event (GPU-side, instant and flow-like events: locate those with
``steps.window_index``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .names import is_in
from .schema import LAUNCH_CATEGORIES, NESTED_CATEGORIES
from .steps import locate

# Calls PyTorch's native implementations always make (aten/src/ATen/native/Scalar.cpp: item calls
# _local_scalar_dense; TensorConversions.cpp: to -> _to_copy -> empty/copy_): parent and child even
# when a trace has no unambiguous example of the pair.
KNOWN_CALLS = frozenset({
    ("aten::item", "aten::_local_scalar_dense"), ("aten::is_nonzero", "aten::item"),
    ("aten::to", "aten::_to_copy"), ("aten::_to_copy", "aten::copy_"),
    ("aten::_to_copy", "aten::empty_strided"), ("aten::_to_copy", "aten::empty"),
})
NO_STEP = -1
_INF = np.iinfo(np.int64).max


def add_nesting(events: pd.DataFrame, steps: pd.DataFrame) -> None:
    """Add ``parent`` (row label, -1), ``depth`` (-1 for events outside both trees) and ``step``
    columns to one file's ``events`` (RangeIndex) in place; ``steps`` is that file's step table."""
    n = len(events)
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.full(n, -1, dtype=np.int32)
    complete = (events["ph"] == "X").to_numpy()
    host = complete & is_in(events["cat"], NESTED_CATEGORIES)
    python = complete & is_in(events["cat"], ["python_function"])
    for rows, tree in ((np.flatnonzero(host), _host_tree), (np.flatnonzero(python), _python_tree)):
        if len(rows):
            local_parent, local_depth = tree(events, rows)
            parent[rows] = np.append(rows, -1)[local_parent]  # -1 reads the appended -1
            depth[rows] = local_depth
    events["parent"] = parent
    events["depth"] = depth
    events["step"] = _step_numbers(events, host | python, steps)


def shift_parents(events: pd.DataFrame, offset: int) -> pd.DataFrame:
    """``events`` with ``parent`` labels moved by ``offset`` rows (when files are concatenated)."""
    if offset == 0 or "parent" not in events.columns:
        return events
    parent = events["parent"].to_numpy()
    return events.assign(parent=np.where(parent >= 0, parent + offset, -1))


def _step_numbers(events: pd.DataFrame, mask: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    out = np.full(len(events), NO_STEP, dtype=np.int64)
    if len(steps) and mask.any():
        where = locate(steps["start_us"].to_numpy(), steps["end_us"].to_numpy(), events["ts_us"].to_numpy()[mask])
        out[mask] = np.append(steps["step"].to_numpy(), NO_STEP)[where]  # -1 reads NO_STEP
    return out


# --- host events -----------------------------------------------------------------------------------

def _host_tree(events: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent position, depth) per host event at ``rows`` of ``events`` (positions into ``rows``,
    -1 for roots). Reads the columns' arrays at ``rows`` only, never a copy of the frame."""
    start, end = _nanoseconds(events["ts_us"].to_numpy()[rows], events["dur_us"].to_numpy()[rows])
    thread = _threads(events, rows)
    launch = is_in(events["cat"], LAUNCH_CATEGORIES)[rows]
    ext = _op_links(events["external_id"].to_numpy()[rows], events["correlation"].to_numpy()[rows], launch)
    order = _start_order(start, end, thread, ext, launch)
    parent = _sweep(order, start, end, thread, launch)
    names, categories = _name_codes(events["name"], rows)
    calls = _calls(parent, names, launch, categories)
    _resolve_ties(order, parent, start, end, thread, launch, ext, names, calls)
    return parent, depths(parent)


def _start_order(start: np.ndarray, end: np.ndarray, thread: np.ndarray, ext: np.ndarray,
                 launch: np.ndarray) -> np.ndarray:
    """Positions in start order: by thread and start, then External id (a runtime call without one
    after the ops starting with it), then the longer first, then file order. One stable sort of the
    (thread, start) key, which files mostly hold in order already, then a lexsort of its runs of
    equal keys only; a plain lexsort of all keys when (thread, start) needs two keys."""
    keys = _thread_start_keys(thread, start)
    if len(keys) > 1:
        return np.lexsort((start - end, *_link_keys(ext, launch), *keys))
    order = np.argsort(keys[0], kind="stable")
    key = keys[0][order]
    tied = ~_firsts(key)
    tied[:-1] |= tied[1:]
    at = np.flatnonzero(tied)
    if len(at):
        sub = order[at]
        order[at] = sub[np.lexsort((start[sub] - end[sub], *_link_keys(ext[sub], launch[sub]), key[at]))]
    return order


def _threads(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """A number >= 0 per (pid, tid) of the events at ``rows`` (from their codes; -1: missing)."""
    keys = [_name_codes(events[col], rows)[0].astype(np.int64) + 1 for col in ("pid", "tid")]
    return keys[0] * (int(keys[1].max()) + 1) + keys[1]


def _thread_start_keys(thread: np.ndarray, start: np.ndarray) -> tuple:
    """The last keys of the start-order lexsort: (start, thread), or one key holding both when it
    fits in 63 bits (one sort pass less)."""
    span = int(start.max()) + 1 if len(start) else 1
    if int(thread.max(initial=0)) < 2**62 // span:
        return (thread.astype(np.int64) * span + start,)
    return start, thread


def _link_keys(ext: np.ndarray, launch: np.ndarray) -> tuple:
    """The middle keys of the start-order lexsort: (launch, External id), a runtime call without
    one last; one key holding both when the ids fit (one sort pass less)."""
    missing = (ext < 0) & launch
    if int(ext.max(initial=-1)) < 2**61 - 1:
        return (np.where(missing, 2**61, ext + 1) * 2 + launch,)
    return launch, np.where(missing, np.iinfo(np.int64).max, ext)


def _name_codes(column: pd.Series, rows: np.ndarray) -> tuple[np.ndarray, list]:
    """(code of each value at ``rows``, the distinct values the codes number)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy()[rows], [str(c) for c in column.cat.categories]
    codes, uniques = pd.factorize(column.astype(str).to_numpy()[rows])
    return codes, [str(u) for u in uniques]


def _op_links(ext: np.ndarray, correlation: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """External ids, with those of runtime calls set to -1 where they are not links to an op: Kineto
    before ~2024 wrote a runtime call's correlation id as its External id."""
    both = launch & (ext >= 0) & (correlation >= 0)
    if both.any() and (ext[both] == correlation[both]).all():
        return np.where(launch, -1, ext)
    return ext


def _nanoseconds(ts_us: np.ndarray, dur_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer start/end in ns relative to the first start, so equal microseconds compare equal."""
    ts = ts_us.astype(np.float64, copy=False)
    rel = ts - ts.min()
    start = np.rint(rel * 1000.0).astype(np.int64)
    return start, start + np.rint(dur_us.astype(np.float64, copy=False) * 1000.0).astype(np.int64)


def _sweep(order: np.ndarray, start: np.ndarray, end: np.ndarray, thread: np.ndarray,
           launch: np.ndarray) -> np.ndarray:
    """Strict nesting: the parent is the innermost open event whose end is after the start; a
    runtime/driver call is closed for any op or annotation.

    In start order on a thread, the innermost event still open when event j starts is the latest
    earlier event that ends after j's start, and it is found by walking up from j's predecessor:
    every event between an event k and k's parent ended before k started, so it ended before j
    started too. The walk runs for all events at once by pointer jumping (:func:`_walk_up`): ops
    and annotations among themselves (runtime calls are closed for them), then runtime calls over
    everything. That skip is safe while no op starts inside a runtime call that is still running;
    a thread where one does (no profiler writes that) goes through :func:`_sweep_stack`."""
    n = len(order)
    s, e, th, la = start[order], end[order], thread[order], launch[order]
    head = _firsts(th)
    if _op_starts_in_a_call(s, e, th, la):
        return _sweep_stack(order, start, end, thread, launch)
    parent = np.full(n, -1, dtype=np.int64)
    ops = np.flatnonzero(~la)
    if len(ops):
        s_ops, e_ops = s[ops], e[ops]
        root = ~_open_before(s_ops, e_ops, _firsts(th[ops]))  # its walk would go all the way up
        up = _walk_up(e_ops, s_ops, np.where(root, -1, np.arange(len(ops)) - 1), np.flatnonzero(~root))
        parent[ops] = np.append(ops, -1)[up]
    calls = np.flatnonzero(la)
    if len(calls):
        up = parent.copy()  # final for ops: a walk may jump through them
        up[calls] = np.where(head[calls], -1, calls - 1)
        parent[calls] = _walk_up(e, s, up, calls)[calls]
    out = np.empty(n, dtype=np.int64)
    out[order] = np.append(order, -1)[parent]
    return out


def _firsts(keys: np.ndarray) -> np.ndarray:
    """Per position of a sorted ``keys``: is it the first with its key (a thread's first event)?"""
    head = np.ones(len(keys), dtype=bool)
    head[1:] = keys[1:] != keys[:-1]
    return head


def _walk_up(end: np.ndarray, start: np.ndarray, up: np.ndarray, active: np.ndarray) -> np.ndarray:
    """For each ``active`` position j, replace ``up[j]`` (an earlier position, -1 for none) by
    ``up[up[j]]`` until it ended after j's start (``end > start[j]``) or is -1. Positions are
    updated together, so each jump also shortens the walks of the later positions that pass
    through them."""
    ends = np.append(end, _INF)  # read at -1: a walk that reaches -1 stops there
    t = start[active]
    up[active[t == _INF]] = -1  # nothing ends after it: it walks to -1
    active, t = active[t < _INF], t[t < _INF]
    while len(active):
        k = up[active]
        going = ends[k] <= t
        active, t = active[going], t[going]
        up[active] = up[k[going]]
    return up


def _open_before(start: np.ndarray, end: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per position of runs in start order (``first``: where a run starts): does an earlier event of
    its run end after its start? A running maximum per run; with over 64 runs (threads), no loop:
    true past each run's first position."""
    heads = np.flatnonzero(first)
    if len(heads) > 64:
        return ~first
    out = np.zeros(len(start), dtype=bool)
    for lo, hi in zip(heads.tolist(), [*heads[1:].tolist(), len(start)]):
        out[lo + 1:hi] = np.maximum.accumulate(end[lo:hi - 1]) > start[lo + 1:hi]
    return out


def _op_starts_in_a_call(start: np.ndarray, end: np.ndarray, thread: np.ndarray, launch: np.ndarray) -> bool:
    """In start order (thread by thread): does an op start before an earlier runtime call of its
    thread ends? Starts only grow along a thread: only a call still running when the next event
    starts can be, and it is checked against the next op."""
    calls, ops = np.flatnonzero(launch[:-1]), np.flatnonzero(~launch)
    calls = calls[end[calls] > start[calls + 1]]
    if not len(calls) or not len(ops):
        return False
    op = ops[np.minimum(np.searchsorted(ops, calls), len(ops) - 1)]
    return bool(((op > calls) & (thread[op] == thread[calls]) & (start[op] < end[calls])).any())


def _sweep_stack(order: np.ndarray, start: np.ndarray, end: np.ndarray, thread: np.ndarray,
                 launch: np.ndarray) -> np.ndarray:
    """:func:`_sweep` with an explicit stack, thread by thread in sorted order, with a root
    sentinel (end +inf) at the bottom of each stack."""
    n = len(order)
    end_sorted = end[order]
    for_launch = np.append(end_sorted, _INF).tolist()
    for_other = np.append(np.where(launch[order], -_INF, end_sorted), _INF).tolist()
    starts, is_launch = start[order].tolist(), launch[order].tolist()
    cuts = (np.flatnonzero(np.diff(thread[order])) + 1).tolist()
    parent = [n] * n
    for lo, hi in zip([0, *cuts], [*cuts, n]):
        stack = [n]
        pop, push = stack.pop, stack.append
        for j in range(lo, hi):
            t, ends = starts[j], for_launch if is_launch[j] else for_other
            while ends[stack[-1]] <= t:
                pop()
            parent[j] = stack[-1]
            push(j)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.append(order, -1)[np.asarray(parent, dtype=np.int64)]
    return out


def _calls(parent: np.ndarray, names: np.ndarray, launch: np.ndarray, categories: list) -> dict:
    """(parent name code, child name code) of every strict parent/child pair, plus ``KNOWN_CALLS``,
    each as parent * width + child: a set (``pairs``) and a sorted array ending in _INF, which no
    code equals (``sorted``); ``categories``: the name of each code."""
    child = np.flatnonzero(parent >= 0)
    child = child[~launch[parent[child]]]
    width = max(int(names.max()) + 1 if len(names) else 1, len(categories))
    codes = np.sort(names[parent[child]].astype(np.int64) * width + names[child])
    pairs = set(codes[np.r_[True, codes[1:] != codes[:-1]]].tolist() if len(codes) else [])
    code = {c: i for i, c in enumerate(categories)}
    pairs.update(code[a] * width + code[b] for a, b in KNOWN_CALLS if a in code and b in code)
    return {"width": width, "pairs": pairs, "sorted": np.array([*sorted(pairs), _INF], dtype=np.int64)}


def _resolve_ties(order, parent, start, end, thread, launch, ext, names, calls) -> None:
    """Re-parent zero-duration events that start exactly when an open event ends (module doc).

    A candidate walks up from its predecessor to the first event that takes it (or its strict parent).
    The predecessor's test reads nothing another candidate sets: it runs for all at once. Only an op
    of the thread ending at the candidate's start can take it; those left with one walk on one by
    one in start order, as a walk reads the parents earlier candidates got."""
    candidates, before = _candidates(np.asarray(order, dtype=np.int64), parent, start, end, thread)
    names = names.astype(np.int64)
    taken = _takes(before, candidates, start, end, launch, ext, names, calls)
    parent[candidates[taken]] = before[taken]
    rest = ~taken
    rest[rest] = _closed_at_start(candidates[rest], start, end, thread, launch)
    width, pairs = calls["width"], calls["pairs"]
    for i, k in zip(candidates[rest].tolist(), before[rest].tolist()):
        strict, t = parent[i], start[i]
        while k >= 0 and k != strict:
            if end[k] == t and not launch[k] and (
                    ext[i] == ext[k] if launch[i] and ext[i] >= 0 else int(names[k]) * width + int(names[i]) in pairs):
                parent[i] = k
                break
            k = parent[k]


def _candidates(order, parent, start, end, thread) -> tuple[np.ndarray, np.ndarray]:
    """(zero-duration events in start order whose thread predecessor is not their parent, that one)."""
    at = np.flatnonzero((start == end)[order])
    zero, before = order[at], order[at - 1]  # at 0 reads the last position: at > 0 drops it
    keep = (at > 0) & (thread[before] == thread[zero]) & (before != parent[zero])
    return zero[keep], before[keep]


def _takes(k: np.ndarray, i: np.ndarray, start, end, launch, ext, names, calls) -> np.ndarray:
    """Per pair: does event ``k`` (ending at ``i``'s start, not a runtime call) take event ``i`` as
    its child: the op of runtime call ``i``'s External id, or a known parent of ``i``'s name?"""
    linked = launch[i] & (ext[i] >= 0)
    known, code = calls["sorted"], names[k] * calls["width"] + names[i]
    called = known[np.searchsorted(known, code)] == code
    return (end[k] == start[i]) & ~launch[k] & np.where(linked, ext[i] == ext[k], called)


def _closed_at_start(rows: np.ndarray, start, end, thread, launch) -> np.ndarray:
    """Per zero-duration event at ``rows`` (in start order): does another event of its thread, not a
    runtime call, end at its start? All true when (thread, time) does not fit one 63-bit key."""
    lo, hi = int(start.min()), int(start.max())
    span = hi - lo + 1
    if int(thread.max()) >= 2**62 // span:
        return np.ones(len(rows), dtype=bool)
    others = np.flatnonzero(~launch & (end >= lo) & (end <= hi))
    ends = np.sort(thread[others].astype(np.int64) * span + (end[others] - lo))
    keys = thread[rows].astype(np.int64) * span + (start[rows] - lo)
    at = np.searchsorted(ends, keys)
    ends = np.append(ends, -1)  # keys are >= 0: past the last end nothing is equal
    # An event that is not a runtime call finds itself (its end is its start): it needs a second.
    return ends[at + ~launch[rows]] == keys


# --- python_function frames ------------------------------------------------------------------------

def _python_tree(events: pd.DataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parent position, depth) per frame at ``rows`` from ``Python parent id`` (an id below the
    frame's own: the parent started first; anything else is treated as a root)."""
    ids = events["python_id"].to_numpy()[rows]
    wanted = events["python_parent"].to_numpy()[rows]
    by_id = np.argsort(ids, kind="stable")
    at = np.clip(np.searchsorted(ids[by_id], wanted), 0, max(len(ids) - 1, 0))
    found = (wanted >= 0) & (ids[by_id][at] == wanted) & (wanted < ids)
    parent = np.where(found, by_id[at], -1).astype(np.int64)
    return parent, depths(parent)


def depths(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each node of an acyclic parent array (pointer doubling over the nodes
    still short of a root)."""
    depth = (parent >= 0).astype(np.int32)
    jump = parent.copy()
    live = np.flatnonzero(parent >= 0)
    while len(live):
        up = jump[live]
        depth[live] += depth[up]
        jump[live] = up = jump[up]
        live = live[up >= 0]
    return depth
