"""Host-op tables shared by the trace analyses: op-name tables, call nesting, self time, and
interval coverage inside step windows.

Nesting is computed once by the loader (``parent``/``depth`` columns, rules in
:mod:`perfkit.trace.nesting`): on one thread an event is the child of the innermost earlier event still
running when it starts, with zero-duration ties at whole microseconds resolved there. Self time is an
event's duration minus the durations of its direct children on the same thread, the "Self CPU" of
``prof.key_averages()``: runtime calls (``cudaLaunchKernel``, ``cudaStreamSynchronize``) are children
of the op that issued them, so they appear as rows of their own.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ParameterError
from ..trace.schema import GPU_CATEGORIES, LAUNCH_CATEGORIES, NESTED_CATEGORIES

# Host categories whose events nest on a thread (the loader's ``parent``/``depth``); python_function
# frames have their own tree (``parent`` from ``Python parent id``, used by stacks.py).
HOST_CATEGORIES = NESTED_CATEGORIES
# Host work that keeps a thread busy: annotations are excluded because a record_function around a
# whole step would mark the host busy for all of it.
HOST_WORK_CATEGORIES = ("cpu_op", *LAUNCH_CATEGORIES)
STEP_PREFIX = "ProfilerStep#"
DATALOADER_PREFIX = "enumerate(DataLoader)"
COPY_OPS = ("aten::to", "aten::_to_copy", "aten::copy_")
# Ops that read device data on the host (or size an output from it) and so wait for the GPU when
# their input lives there. Sources: PyTorch CUDA semantics notes and the ops that
# torch.cuda.set_sync_debug_mode("warn") reports.
SYNC_OPS = {
    "aten::item": "item", "aten::_local_scalar_dense": "item",
    "aten::nonzero": "nonzero", "aten::is_nonzero": "is_nonzero",
    "aten::masked_select": "dynamic_shape", "aten::_unique2": "dynamic_shape",
    "aten::unique_consecutive": "dynamic_shape", "aten::unique_dim": "dynamic_shape",
    "aten::repeat_interleave": "dynamic_shape",
}


REQUIRED_COLUMNS = ("name", "cat", "ph", "ts_us", "dur_us", "pid", "tid", "file_id", "rank", "device", "stream",
                    "correlation", "bytes", "parent", "depth", "step")


def host_events(trace, categories=HOST_CATEGORIES) -> pd.DataFrame:
    """Complete host events of ``categories`` with ``name`` and ``cat`` as plain strings.
    Raises ParameterError (via ``Trace.require``) when the events table lacks a needed column."""
    trace.require(*REQUIRED_COLUMNS)
    ev = trace.select(*categories)
    return ev.assign(name=ev["name"].astype(str), cat=ev["cat"].astype(str))


def thread_key(frame: pd.DataFrame) -> np.ndarray:
    """One integer per (file, pid, tid) thread of ``frame``'s rows."""
    if frame.empty:
        return np.zeros(0, dtype=np.int64)
    keys = frame[["file_id", "pid", "tid"]].astype({"pid": str, "tid": str})
    return keys.groupby(["file_id", "pid", "tid"], sort=False).ngroup().to_numpy()


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
    parent = _positions(events.index.to_numpy(), events["parent"].to_numpy())
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


def _positions(labels: np.ndarray, parent_labels: np.ndarray) -> np.ndarray:
    """Positions in ``labels`` of each parent label, -1 where the parent is absent."""
    if len(labels) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    at = np.clip(np.searchsorted(labels[order], parent_labels), 0, len(labels) - 1)
    found = (parent_labels >= 0) & (labels[order][at] == parent_labels)
    return np.where(found, order[at], -1).astype(np.int64)


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


OP_TABLE_COLUMNS = ["name", "cat", "count", "total_us", "self_us", "mean_us", "self_pct", "total_pct"]


def op_table(events: pd.DataFrame, nested: pd.DataFrame) -> pd.DataFrame:
    """Per (name, cat) of host work (cpu_op and runtime/driver calls; annotations and
    ``ProfilerStep#`` windows left out): ``count``, ``total_us`` (inclusive), ``self_us``,
    ``mean_us``, ``self_pct`` (share of all self time) and ``total_pct`` (inclusive time as a share
    of the host's busy time: the union of host work per thread, summed over threads). Sorted by
    self time."""
    keep = events["cat"].astype(str).isin(HOST_WORK_CATEGORIES).to_numpy() & ~starts_with(events["name"], STEP_PREFIX)
    work = events[keep]
    if work.empty:
        return pd.DataFrame(columns=OP_TABLE_COLUMNS)
    frame = pd.DataFrame({"name": work["name"].astype(str), "cat": work["cat"].astype(str),
                          "dur_us": work["dur_us"], "self_us": nested["self_us"][keep]})
    table = frame.groupby(["name", "cat"], sort=False).agg(
        count=("dur_us", "size"), total_us=("dur_us", "sum"), self_us=("self_us", "sum")).reset_index()
    table["mean_us"] = table["total_us"] / table["count"]
    table["self_pct"] = 100.0 * table["self_us"] / max(table["self_us"].sum(), 1e-12)
    table["total_pct"] = 100.0 * table["total_us"] / max(thread_busy_us(work), 1e-12)
    return table.sort_values(["self_us", "name"], ascending=[False, True], ignore_index=True)[OP_TABLE_COLUMNS]


def thread_busy_us(events: pd.DataFrame) -> float:
    """Union of the events' intervals per thread, summed over threads (host CPU time), in us."""
    if events.empty:
        return 0.0
    start = events["ts_us"].to_numpy(dtype=np.float64)
    end = start + events["dur_us"].to_numpy(dtype=np.float64)
    total = 0.0
    keys = thread_key(events)
    for key in np.unique(keys):
        bs, be = merge_intervals(start[keys == key], end[keys == key])
        total += float((be - bs).sum())
    return total


def starts_with(names: pd.Series, prefix: str) -> np.ndarray:
    """Boolean array: which names start with ``prefix`` (computed once per category)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = names.cat.categories.astype(str).str.startswith(prefix)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, np.asarray(hits)[np.clip(codes, 0, None)], False)
    return names.astype(str).str.startswith(prefix).to_numpy(dtype=bool)


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


def contains(names: pd.Series, part: str) -> np.ndarray:
    """Boolean array: which names contain ``part`` (computed once per category)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = names.cat.categories.astype(str).str.contains(part, regex=False)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, np.asarray(hits)[np.clip(codes, 0, None)], False)
    return names.astype(str).str.contains(part, regex=False).to_numpy(dtype=bool)


# --- intervals inside windows --------------------------------------------------------------------

def merge_intervals(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted blocks covering the union of [start, end) intervals."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    if len(s) == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    new_block = np.concatenate(([True], s[1:] > e[:-1]))
    block = np.cumsum(new_block) - 1
    block_start = s[new_block]
    block_end = np.zeros(block[-1] + 1)
    np.maximum.at(block_end, block, e)
    return block_start, block_end


def covered(block_start: np.ndarray, block_end: np.ndarray, win_start, win_end) -> np.ndarray:
    """Length of the disjoint sorted blocks that lies inside each [win_start, win_end)."""
    ws = np.asarray(win_start, dtype=np.float64)
    we = np.asarray(win_end, dtype=np.float64)
    if len(block_start) == 0:
        return np.zeros(len(ws))
    prefix = np.concatenate(([0.0], np.cumsum(block_end - block_start)))
    return np.maximum(_cover_before(block_start, block_end, prefix, we)
                      - _cover_before(block_start, block_end, prefix, ws), 0.0)


def _cover_before(bs, be, prefix, t):
    k = np.searchsorted(bs, t, side="right")
    last = np.clip(k - 1, 0, None)
    partial = np.where(k > 0, np.minimum(t, be[last]) - bs[last], 0.0)
    return prefix[last] * (k > 0) + np.maximum(partial, 0.0)


def window_cover(intervals: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """For each window (``rank``, ``start_us``, ``end_us``), the length of the union of the
    intervals (``rank``, ``ts_us``, ``dur_us``) of the same rank that falls inside it, in us."""
    out = np.zeros(len(windows))
    if intervals.empty or windows.empty:
        return out
    ranks = windows["rank"].to_numpy()
    for rank, grp in intervals.groupby("rank", sort=False, observed=True):
        mask = ranks == rank
        if mask.any():
            start = grp["ts_us"].to_numpy(dtype=np.float64)
            bs, be = merge_intervals(start, start + grp["dur_us"].to_numpy(dtype=np.float64))
            out[mask] = covered(bs, be, windows["start_us"].to_numpy()[mask], windows["end_us"].to_numpy()[mask])
    return out


def step_windows(trace) -> pd.DataFrame:
    """Step windows (rank, step, start_us, end_us, dur_us) to compute per-step numbers over.

    ``trace.steps``, except that a "whole trace" fallback step (which spans host events only) is
    widened to the rank's GPU activity too, so GPU work that ends after the last host call counts.
    A trace with no steps at all gets one window per rank spanning its events (step -1).
    """
    steps = trace.steps
    if len(steps):
        windows = steps[["rank", "step", "start_us", "end_us"]].reset_index(drop=True)
        whole = (steps["source"] == "whole trace").to_numpy()
        span = _activity_span(trace) if whole.any() else None
        if whole.any() and len(span):
            bounds = span.set_index("rank").reindex(windows["rank"])
            windows.loc[whole, "start_us"] = np.fmin(windows["start_us"], bounds["start_us"].to_numpy())[whole]
            windows.loc[whole, "end_us"] = np.fmax(windows["end_us"], bounds["end_us"].to_numpy())[whole]
    else:
        windows = _activity_span(trace).assign(step=-1)[["rank", "step", "start_us", "end_us"]]
    return windows.assign(dur_us=windows["end_us"] - windows["start_us"]).reset_index(drop=True)


# A first or last step shorter than this share of the shortest of its rank's other steps is a stub
# (perfkit rule: a profiler window cut a step short; real steps of one loop vary far less).
STUB_SHARE = 0.10


def stub_steps(windows: pd.DataFrame, share: float = STUB_SHARE) -> np.ndarray:
    """Boolean per row of ``windows`` (``step_windows``): is it a **stub**, a partial step at the
    edge of the profiler window? ``prof.step()`` opens ``ProfilerStep#N`` and the profiler stops
    microseconds later (an 18 us step beside 5 ms ones), or the first step starts mid-way; counted
    as a step, it halves every per-step number of a two-step trace. A step is a stub when it is the
    first or last step of its rank, the rank has other steps, and it lasts less than ``share`` of
    the shortest of those (not their median: a step that compiles for 26 s beside 245 ms steps must
    not make a 245 ms step look partial)."""
    out = np.zeros(len(windows), dtype=bool)
    for _, grp in windows.groupby("rank", sort=False):
        if len(grp) < 2:
            continue
        order = grp.sort_values("start_us").index.to_numpy()
        for edge in {order[0], order[-1]}:
            others = grp["dur_us"].drop(edge)
            out[windows.index.get_loc(edge)] = grp.at[edge, "dur_us"] < share * float(others.min())
    return out


def listed_steps(windows: pd.DataFrame) -> str:
    """Rows of ``step_windows`` as "step 2 (49 us), step 9 (1.204 ms)"."""
    return ", ".join(f"step {int(s)} ({us_text(d)})" for s, d in zip(windows["step"], windows["dur_us"]))


def stub_note(stubs: pd.DataFrame, n_full: int) -> str:
    """One line naming the stub windows left out of per-step figures (``stubs``: rows of
    ``step_windows``), or "" when there are none."""
    if stubs.empty:
        return ""
    return (f"dropped {len(stubs)} partial step(s) at the edge of the profiler window: {listed_steps(stubs)}, "
            f"each under {STUB_SHARE:.0%} of the shortest other step of its rank; per-step numbers use the "
            f"{n_full} full step(s)")


def full_step_windows(trace) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """``step_windows(trace)`` without its stubs (see :func:`stub_steps`), index reset: the windows
    to divide per-step figures by; and the warnings to add, the :func:`stub_note` naming what was
    left out (none when nothing was)."""
    windows = step_windows(trace)
    stub = stub_steps(windows)
    full = windows[~stub].reset_index(drop=True)
    note = stub_note(windows[stub], len(full))
    return full, (note,) if note else ()


def us_text(value: float) -> str:
    """Microseconds as "49 us" or "1.204 ms"."""
    return f"{value / 1e3:,.3f} ms" if abs(value) >= 1e3 else f"{value:,.0f} us"


def step_rows(windows: pd.DataFrame, host: pd.DataFrame) -> np.ndarray:
    """Row label of ``windows`` (from ``step_windows``) holding each host event, from the events'
    ``rank`` and ``step`` columns (a trace without steps has one window per rank, step -1); -1 outside
    every window. GPU-side events have no step: use ``trace.steps.window_index`` for them."""
    keys = windows[["rank", "step"]].astype(np.int64).reset_index(names="window").drop_duplicates(["rank", "step"])
    left = pd.DataFrame({"rank": host["rank"].to_numpy(dtype=np.int64), "step": host["step"].to_numpy(dtype=np.int64)})
    return left.merge(keys, on=["rank", "step"], how="left")["window"].fillna(-1).to_numpy(dtype=np.int64)


def _activity_span(trace) -> pd.DataFrame:
    """First start and last end of host and GPU events per rank."""
    ev = trace.events
    rows = np.flatnonzero((ev["ph"] == "X").to_numpy()
                          & ev["cat"].isin([*HOST_CATEGORIES, "python_function", *GPU_CATEGORIES]).to_numpy())
    if len(rows) == 0:
        return pd.DataFrame({"rank": pd.Series(dtype=np.int64), "start_us": pd.Series(dtype=float),
                             "end_us": pd.Series(dtype=float)})
    # Three columns of the matching rows, not the whole table: this runs on every per-step analysis.
    start = ev["ts_us"].to_numpy()[rows]
    span = pd.DataFrame({"rank": ev["rank"].to_numpy()[rows], "start_us": start,
                         "end_us": start + ev["dur_us"].to_numpy()[rows]})
    return span.groupby("rank").agg(start_us=("start_us", "min"), end_us=("end_us", "max")).reset_index()



def jsonable(value):
    """``value`` with numpy scalars made plain and non-finite floats made None (valid JSON)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if value is pd.NA:
        return None
    return value
