"""Call trees of host threads: Python frames (``with_stack=True``), or host ops where a thread has none.

A thread with python_function events gets a tree of its Python frames. A frame's parent is the
frame its ``Python parent id`` names when that frame is on the same thread, starts no later and is
still running when the child starts; otherwise (ids missing, pointing elsewhere, or contradicting
the timestamps) the parent is found by time containment: the innermost earlier frame of the thread
still running when the frame starts. Threads without Python frames (a trace recorded without
stacks, the autograd thread) get a tree of their host ops instead (cpu_op, record_function ranges
and runtime calls; ``ProfilerStep#`` windows left out), nested as ``timeline.host_parents`` says.

Real traces are not always properly nested (a child ending 1 us after its parent, siblings that
overlap after rounding), so each frame is clipped to its parent and to the end of its previous
sibling. The clipped intervals nest exactly; self time is a frame's clipped length minus its
children's, and the self times of a thread sum to the union of its top-level frames.

Names are normalized so one function is one key: ``"torch/nn/modules/module.py(1779): _call_impl"``
is ``_call_impl`` in that file at line 1779 (the function's first line), ``"<built-in method to of
Tensor object at 0x7ce2...>"`` is ``Tensor.to``, ``"<built-in method conv2d of type object at 0x...>"`` (``torch.conv2d``) is
``conv2d`` and ``"<built-in function isinstance>"`` is ``isinstance`` (no file, line -1).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace.ancestry import in_lexsort_order
from ..trace.names import starts_with
from ..trace.nesting import depths
from ..trace.steps import STEP_PREFIX
from ..trace.threads import event_threads
from .host_ops import DATALOADER_PREFIX, HOST_CATEGORIES
from .stacks import parse_frame
from .timeline import host_parents

_METHOD = re.compile(r"^<built-in method (?P<meth>\S*) of (?P<cls>.+?) object at 0x[0-9a-fA-F]+>$")
# Classes whose name says nothing about the method: ``torch.conv2d`` is "<built-in method conv2d of
# type object at 0x...>" (torch._C._VariableFunctions) and pybind11 functions are bound records.
_BARE_CLASSES = ("type", "PyCapsule")
_FUNCTION = re.compile(r"^<built-in function (?P<func>.+?)>$")
# Waiting primitives: the thread sleeps in them, so their time is waiting, not work. Sources: the
# CPython standard library's blocking calls (threading, queue, multiprocessing, selectors, time).
WAITING_BUILTINS = {"sleep", "select", "poll", "waitpid", "_thread.lock.acquire", "_thread.RLock.acquire",
                    "_multiprocessing.SemLock.acquire", "select.epoll.poll", "select.poll.poll",
                    "_socket.socket.recv", "_socket.socket.recv_into", "_socket.socket.accept"}
WAITING_FUNCTIONS = {
    "threading.py": {"wait", "join", "_wait_for_tstate_lock", "acquire"},
    "queue.py": {"get", "put", "join"},
    "selectors.py": {"select"},
    "multiprocessing/connection.py": {"wait", "poll", "_poll", "recv", "_recv", "_recv_bytes"},
    "multiprocessing/queues.py": {"get"},
    "multiprocessing/synchronize.py": {"wait", "acquire", "__enter__"},
    "concurrent/futures/_base.py": {"result", "wait"},
    "time.py": {"sleep"},
}
KEY_COLUMNS = ["function", "file", "line", "waiting", "label"]
FRAME_COLUMNS = ["label", "thread", "rank", "start_us", "end_us", "parent", "depth", "key", "self_us", "python",
                 "by_time", "region"]


def normalize(name: str) -> tuple[str, str, int]:
    """``(function, file, line)`` of a frame or op name; file "" and line -1 where there is none."""
    parsed = parse_frame(name)
    if parsed is not None:
        return parsed[2], parsed[0], parsed[1]
    m = _METHOD.match(name)
    if m:
        cls, meth = m.group("cls"), m.group("meth") or "<unnamed>"
        return (meth if cls in _BARE_CLASSES or cls.startswith("pybind11") else f"{cls}.{meth}"), "", -1
    m = _FUNCTION.match(name)
    return (m.group("func") if m else name), "", -1


def is_waiting(function: str, file: str) -> bool:
    """Whether a normalized frame is a waiting primitive (``WAITING_BUILTINS``/``WAITING_FUNCTIONS``)."""
    if not file:
        return function in WAITING_BUILTINS
    for suffix, names in WAITING_FUNCTIONS.items():
        if function in names and (file == suffix or file.endswith("/" + suffix)):
            return True
    return False


def frame_table(trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Frames of every host thread (columns ``FRAME_COLUMNS``, one row per event, sorted by thread
    then start) and the keys they point to (``KEY_COLUMNS``, indexed by ``key``).

    ``label``: the event's label in ``trace.events``; ``start_us``/``end_us``: the clipped interval;
    ``parent``: row position of the parent frame in this table (-1 for a top-level frame);
    ``self_us``: clipped length minus the children's; ``python``: a Python frame (else a host op);
    ``by_time``: a Python frame whose parent id was missing or contradicted the timestamps but that
    runs inside another frame, so it was nested by time; ``region``: a record_function range other
    than DataLoader ``__next__`` (it marks a region of code rather than doing work).
    """
    raw = _raw_frames(trace)
    raw["op_parent"] = _op_parents(trace, raw)
    keys, key_of_name = _keys(raw["name"])
    n = len(raw)
    order = np.lexsort((np.arange(n), -raw["end"].to_numpy(), raw["start"].to_numpy(), raw["thread"].to_numpy()))
    raw = raw.iloc[order].reset_index(drop=True)
    thread, start, end = raw["thread"].to_numpy(), raw["start"].to_numpy(), raw["end"].to_numpy()
    parent, by_id = _resolve_parents(raw, thread, start, end)
    depth = depths(parent).astype(np.int64)
    s, e = _clip(parent, depth, thread, start, end)
    length = e - s
    child = parent >= 0
    self_us = length - np.bincount(parent[child], weights=length[child], minlength=n)
    columns = {
        "label": raw["label"].to_numpy(), "thread": thread, "rank": raw["rank"].to_numpy(), "start_us": s,
        "end_us": e, "parent": parent, "depth": depth, "key": key_of_name[raw["name"].cat.codes.to_numpy()],
        "self_us": np.clip(self_us, 0.0, None), "python": raw["python"].to_numpy(),
        "by_time": raw["python"].to_numpy() & ~by_id & (parent >= 0), "region": raw["region"].to_numpy()}
    # copy=False: one block per column; consolidating a dozen 1M-row columns is a copy nothing needs.
    return pd.DataFrame(_sorted_by_clipped(columns), copy=False), keys


def _sorted_by_clipped(columns: dict) -> dict:
    """Rows in (thread, clipped start, longest first, parent first) order, parent positions remapped:
    clipping can move a frame after a later sibling's children (rarely: the sort is skipped when
    no row moves)."""
    sort_keys = (columns["depth"], -columns["end_us"], columns["start_us"], columns["thread"])
    if in_lexsort_order(sort_keys):
        return columns
    order = np.lexsort(sort_keys)
    where = np.empty(len(order), dtype=np.int64)
    where[order] = np.arange(len(order))
    out = {name: values[order] for name, values in columns.items()}
    parent = out["parent"]
    out["parent"] = np.where(parent >= 0, where[np.clip(parent, 0, None)], -1)
    return out


def _raw_frames(trace) -> pd.DataFrame:
    """Python frames, plus host ops of the threads that have no Python frame (numpy masks over the
    whole table: boolean-indexing a 2M-row frame column by column is the slow part otherwise)."""
    ev = trace.events
    complete = (ev["ph"] == "X").to_numpy()
    is_py = complete & (ev["cat"] == "python_function").to_numpy()
    is_op = complete & ev["cat"].isin(HOST_CATEGORIES).to_numpy() & ~starts_with(ev["name"], STEP_PREFIX)
    codes = event_threads(trace)
    rows = np.flatnonzero(is_py | (is_op & ~np.isin(codes, np.unique(codes[is_py]))))
    region = (ev["cat"] == "user_annotation").to_numpy() & ~starts_with(ev["name"], DATALOADER_PREFIX)
    start = ev["ts_us"].to_numpy(dtype=np.float64)[rows]
    return pd.DataFrame({
        "label": ev.index.to_numpy()[rows], "thread": codes[rows], "rank": ev["rank"].to_numpy()[rows],
        "file_id": ev["file_id"].to_numpy()[rows], "start": start,
        "end": start + ev["dur_us"].to_numpy(dtype=np.float64)[rows],
        "name": pd.Categorical.from_codes(ev["name"].cat.codes.to_numpy()[rows], dtype=ev["name"].dtype),
        "python": is_py[rows], "region": region[rows], "python_id": ev["python_id"].to_numpy()[rows],
        "python_parent": ev["python_parent"].to_numpy()[rows]}, copy=False)


def _op_parents(trace, raw: pd.DataFrame) -> np.ndarray:
    """Label of each host-op frame's enclosing host event (-1 for Python frames and top-level ops)."""
    out = np.full(len(raw), -1, dtype=np.int64)
    ops = np.flatnonzero(~raw["python"].to_numpy())
    if len(ops):
        events = trace.events.loc[raw["label"].to_numpy()[ops]]
        out[ops] = host_parents(trace, events).to_numpy()
    return out


def _keys(names: pd.Series) -> tuple[pd.DataFrame, np.ndarray]:
    """Key table (one row per normalized function) and the key of each name category code."""
    index: dict[tuple, int] = {}
    codes = [index.setdefault(normalize(str(c)), len(index)) for c in names.cat.categories]
    keys = pd.DataFrame(list(index), columns=["function", "file", "line"]).astype({"line": np.int64})
    keys["waiting"] = [is_waiting(f, p) for f, p in zip(keys["function"], keys["file"])]
    keys["label"] = [_display(f, p, ln) for f, p, ln in zip(keys["function"], keys["file"], keys["line"])]
    return keys[KEY_COLUMNS], np.asarray(codes, dtype=np.int64)


def _display(function: str, file: str, line: int) -> str:
    return f"{function} ({file}:{line})" if file else function


def _resolve_parents(raw: pd.DataFrame, thread, start, end) -> tuple[np.ndarray, np.ndarray]:
    """Parent positions (the Python parent id, or for host ops the enclosing host event, where it is
    consistent; else time containment) and which rows got theirs from the id or host nesting."""
    n = len(raw)
    parent = np.full(n, -1, dtype=np.int64)
    cand = np.maximum(_id_candidates(raw), _label_candidates(raw))
    safe = np.clip(cand, 0, None)
    ok = (cand >= 0) & (cand < np.arange(n)) & (thread[safe] == thread) & (start <= end[safe])
    parent[ok] = cand[ok]
    todo = np.flatnonzero(~ok)
    # The walk reads Python lists fastest, but converting 1M-row columns costs more than walking a few rows.
    as_seq = (lambda a: a.tolist()) if len(todo) * 16 > n else (lambda a: a)
    _contain(todo.tolist(), parent, as_seq(thread), as_seq(start), as_seq(end))
    return parent, ok


def _id_candidates(raw: pd.DataFrame) -> np.ndarray:
    """Row of the frame each Python frame's parent id names (-1: none, or the id is not unique)."""
    cand = np.full(len(raw), -1, dtype=np.int64)
    py = raw["python"].to_numpy() & (raw["python_id"].to_numpy() >= 0)
    if not py.any():
        return cand
    ids = (raw["file_id"].to_numpy(dtype=np.int64) << 47) | raw["python_id"].to_numpy()
    wanted = (raw["file_id"].to_numpy(dtype=np.int64) << 47) | raw["python_parent"].to_numpy()
    # By sorting, not hashing: ids come nearly in order, so the sort and the lookups are cheap.
    rows = np.flatnonzero(py)
    order = np.argsort(ids[rows], kind="stable")
    rows, sorted_ids = rows[order], ids[rows][order]
    same = sorted_ids[1:] == sorted_ids[:-1]
    unique = ~(np.concatenate((same, [False])) | np.concatenate(([False], same)))
    rows, sorted_ids = rows[unique], sorted_ids[unique]
    at = np.clip(np.searchsorted(sorted_ids, wanted), 0, max(len(sorted_ids) - 1, 0))
    found = (sorted_ids[at] == wanted) if len(sorted_ids) else np.zeros(len(wanted), dtype=bool)
    cand = np.where(found, rows[at] if len(rows) else -1, -1)
    cand[~raw["python"].to_numpy() | (raw["python_parent"].to_numpy() < 0)] = -1
    return cand


def _label_candidates(raw: pd.DataFrame) -> np.ndarray:
    """Row of each host-op frame's enclosing host event (``op_parent`` labels), -1 when that is not a frame."""
    labels = pd.Index(raw["label"].to_numpy())
    found = labels.get_indexer(raw["op_parent"].to_numpy())
    return np.where(raw["op_parent"].to_numpy() >= 0, found, -1)


def _contain(todo: list, parent: np.ndarray, thread: list, start: list, end: list) -> None:
    """Time containment for rows ``todo`` (ascending): walk up from the previous row of the thread
    to the first frame still running at the row's start. Rows before each one are already resolved."""
    for i in todo:
        c = i - 1
        while c >= 0 and thread[c] == thread[i] and not start[i] < end[c]:
            c = int(parent[c])
        parent[i] = c if c >= 0 and thread[c] == thread[i] else -1


def _clip(parent, depth, thread, start, end) -> tuple[np.ndarray, np.ndarray]:
    """Clip each frame to its parent, then to the latest end among its earlier siblings."""
    s, e = start.copy(), end.copy()
    if len(s) == 0:
        return s, e
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(depth.max() + 2))
    for k in range(len(bounds) - 1):
        rows = by_depth[bounds[k]:bounds[k + 1]]
        if k > 0:
            p = parent[rows]
            s[rows] = np.maximum(s[rows], s[p])
            e[rows] = np.maximum(np.minimum(e[rows], e[p]), s[rows])
            group = p
        else:
            group = thread[rows]
        rows = rows[np.argsort(group, kind="stable")]
        _clip_siblings(rows, np.sort(group, kind="stable"), s, e)
    return s, e


def _clip_siblings(rows: np.ndarray, group: np.ndarray, s: np.ndarray, e: np.ndarray) -> None:
    """Within each group (contiguous, in start order) start no earlier than any previous sibling's end."""
    running = pd.Series(e[rows]).groupby(group, sort=False).cummax().to_numpy()
    prev = np.empty_like(running)
    prev[0] = -np.inf
    prev[1:] = np.where(group[1:] == group[:-1], running[:-1], -np.inf)
    s[rows] = np.maximum(s[rows], prev)
    e[rows] = np.maximum(e[rows], s[rows])


def subset(frames: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    """Rows ``keep`` of a frame table (whole threads), parent positions renumbered."""
    new_pos = np.cumsum(keep) - 1
    out = frames[keep].reset_index(drop=True)
    parent = out["parent"].to_numpy()
    out["parent"] = np.where(parent >= 0, new_pos[np.clip(parent, 0, None)], -1)
    return out


def innermost_segments(frames: pd.DataFrame) -> pd.DataFrame:
    """The frame running innermost at each moment of each thread: rows ``thread``, ``start_us``
    (the segment ends where the thread's next one starts) and ``frame`` (row position in
    ``frames``; -1 between top-level frames and where only a ``region`` range runs), sorted by
    (thread, start)."""
    start, end = frames["start_us"].to_numpy(), frames["end_us"].to_numpy()
    rows = np.flatnonzero(end > start)
    depth, thread = frames["depth"].to_numpy()[rows], frames["thread"].to_numpy()[rows]
    after = np.concatenate([rows, frames["parent"].to_numpy()[rows]])
    after = np.where((after >= 0) & frames["region"].to_numpy()[np.clip(after, 0, None)], -1, after)
    t = np.concatenate([start[rows], end[rows]])
    # At equal times: ends before starts, inner ends before outer ends, outer starts before inner;
    # as one int: ends top - depth (0..top), starts above them (top + 1 + depth).
    top = int(depth.max()) if len(depth) else 0
    tie = np.concatenate([top + 1 + depth, top - depth])
    thread = np.concatenate([thread, thread])
    order = _thread_time_tie_order(thread, t, tie)
    return pd.DataFrame({"thread": thread[order], "start_us": t[order], "frame": after[order]}, copy=False)


def _thread_time_tie_order(thread: np.ndarray, t: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """``np.lexsort((tie, t, thread))`` (``thread`` and ``tie`` small ints >= 0, ``t`` floats) by one
    stable sort of an int64 key holding all three where they fit: a frame table's starts come in
    order, and one sort that can use those runs beats a lexsort of three keys (0.35 -> 0.1 s on 2.5
    million frame edges). ``t`` enters as its offset from the smallest time, scaled by the largest
    power of two the key has room for: the offset keeps equal times equal and distinct ones in
    order, the scaling is exact, and the key is used only when every scaled time is whole."""
    if len(t) and np.isfinite(t).all() and thread.min() >= 0 and tie.min() >= 0:
        offset = t - t.min()
        thread_bits, tie_bits = int(thread.max()).bit_length(), int(tie.max()).bit_length()
        room = 62 - thread_bits - tie_bits - (int(offset.max()) + 1).bit_length()
        if room >= 0:
            scaled = np.ldexp(offset, room)
            if (scaled == np.floor(scaled)).all():
                key = (thread.astype(np.int64) << (62 - thread_bits)) | (scaled.astype(np.int64) << tie_bits) \
                    | tie.astype(np.int64)
                return np.argsort(key, kind="stable")
    return np.lexsort((tie, t, thread))


def dominant_frames(frames: pd.DataFrame, segments: pd.DataFrame, thread: np.ndarray, a: np.ndarray,
                    b: np.ndarray) -> np.ndarray:
    """For each interval [a, b) on ``thread``, the frame (row position) with the most self time
    inside it (-1 where no frame runs): what the thread was busy with then."""
    out = np.full(len(a), -1, dtype=np.int64)
    for code in np.unique(thread):
        seg = segments[segments["thread"] == code]
        q = np.flatnonzero(thread == code)
        if seg.empty or not len(q):
            continue
        s_start = seg["start_us"].to_numpy()
        s_end = np.append(s_start[1:], np.inf)
        lo = np.clip(np.searchsorted(s_start, a[q], side="right") - 1, 0, None)
        hi = np.searchsorted(s_start, b[q], side="left")
        counts = np.maximum(hi - lo, 0)
        which = np.repeat(np.arange(len(q)), counts)
        # Segment indices lo..hi-1 of every query, without a Python loop.
        idx = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts - lo, counts)
        overlap = np.minimum(s_end[idx], b[q][which]) - np.maximum(s_start[idx], a[q][which])
        frame = seg["frame"].to_numpy()[idx]
        keep = (frame >= 0) & (overlap > 0)
        if keep.any():
            best_q, best_frame = _most_time(which[keep], frame[keep], overlap[keep])
            out[q[best_q]] = best_frame
    return out


def _most_time(query: np.ndarray, frame: np.ndarray, us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the frame with the most summed ``us`` (ties: the highest frame position). One
    int64 key per (query, frame), summed over its runs after one stable sort (the pieces come by
    query already): 2.5x faster than grouping by the key on two million pieces."""
    width = int(frame.max()) + 1
    key = query.astype(np.int64) * width + frame
    order = np.argsort(key, kind="stable")
    key = key[order]
    first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    total, key = np.add.reduceat(us[order], first), key[first]
    group_q = key // width
    first = np.flatnonzero(np.concatenate(([True], group_q[1:] != group_q[:-1])))
    top = np.repeat(np.maximum.reduceat(total, first), np.diff(np.append(first, len(total))))
    hit = np.flatnonzero(total == top)
    last = hit[np.append(group_q[hit][1:] != group_q[hit][:-1], True)]
    return group_q[last], key[last] % width
