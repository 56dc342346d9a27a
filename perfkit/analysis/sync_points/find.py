"""``syncs(trace)``: every point where the host waits for the GPU, where it comes from, and how
long it blocks; and, apart from them, the scalar reads that did not wait.

Candidates (host side):

* blocking runtime calls (``classify.SYNC_RUNTIME``: stream/device/event synchronize, cudaMemcpy,
  hipMemcpy, hipMemcpyWithStream);
* blocking copy launches: device-to-host copies launched synchronously or into non-pinned memory
  (``memcpy_dtoh``), and host-to-device copies from pageable memory (``memcpy_htod_pageable``): a
  ``cudaMemcpyAsync`` whose GPU copy reads "Pageable -> Device" returns only after the data is
  copied, so its duration is host time blocked (the pinned version of the copy returns at once and
  its wait shows up where the host synchronizes, e.g. ``cudaEventSynchronize``);
* ops that read device data on the host (``host_ops.SYNC_OPS``: aten::item / _local_scalar_dense,
  nonzero, is_nonzero, masked_select, unique, repeat_interleave).

Per-step figures (``per_step``, findings) count only the entries inside full step windows
(``in_steps``); entries before the first or after the last profiled step (a ``cudaDeviceSynchronize``
after the loop) are totalled apart as ``outside_steps`` and get no in-step advice.

One Python-level call is one entry. Candidates nested in a sync op belong to its outermost sync op
(aten::is_nonzero -> aten::item -> aten::_local_scalar_dense -> cudaStreamSynchronize is one
``is_nonzero``); a blocking call or copy inside an op that launched a device-to-host copy belongs
to that op (``memcpy_dtoh``: ``.cpu()`` is one sync, not a copy plus a stream sync), likewise for a
pageable host-to-device copy (``memcpy_htod_pageable``). The entry's time is the host duration of
that outermost event. Nesting is the loader's ``parent`` column (ties at whole microseconds resolved
there, so a zero-length ``aten::item`` keeps its ``_local_scalar_dense``).

``gpu_confirmed``: the host waited on the device there: a blocking runtime call or blocking copy is
the entry or lies inside it. In a trace with CUDA/HIP runtime events only those entries are sync
points (``total["count"]``, ``by_kind``, sites, findings); a scalar read with no device wait under
it (``aten::item``/``nonzero`` on a CPU tensor) is a *host scalar read*: listed on its own line
(``host_reads``, ``total["host_scalar_reads"]``), never counted as a sync. On a CPU-only trace (no
runtime events) nothing can be confirmed: every scalar read is listed as a *possible* sync point,
counted, with a warning (it syncs when its tensor lives on the GPU); an aten::item issued from inside
another op that is not a sync op (aten::std, fused Adam, aten::multinomial's aten::_assert_async) is
that op's CPU implementation and is left out, with a warning.

``cuda_sync`` events are the GPU timeline's view of the same synchronize calls (same correlation
id): they are never added to the totals, only listed in ``gpu_side`` with how many match a host
call. "Stream Wait Event" is a GPU-side wait between streams and does not block the host.

Source lines come from ``stacks.user_frames``: the innermost user function running when the entry
started, as ``file``, ``line`` (the line where that function starts: Kineto records no more; run
``perfkit detect SCRIPT`` for the exact call line) and ``func``, plus ``inner_*``, the innermost
library frame (e.g. a ``transformers`` model function that called ``.to()``). A function already
running when the profiler started carries the line it was on then; :mod:`.sites` makes that one line
per function (``running_line`` where only that line is known), so one call site is one site, and
marks ``torch_internal`` the entries torch's own code issued deep below the user's call.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.ancestry import Ancestors
from ...trace.names import starts_with
from ...trace.schema import LAUNCH_CATEGORIES
from ...trace.steps import STEP_PREFIX, full_step_windows
from ..classify import SYNC_RUNTIME, copies_frame
from ..host_ops import REQUIRED_COLUMNS, SYNC_OPS
from ..stacks import user_frames
from .result import EPISODE_COLUMNS, SyncResult, sync_findings
from .sites import canonical_lines, torch_internal

# The GPU-side events syncs links to their launch: copies (direction, memory) and cuda_sync waits.
_LINKED = ("gpu_memcpy", "cuda_sync")


def syncs(trace) -> SyncResult:
    """Find every host-blocking event of ``trace`` (see the module doc for the rules), with its
    blocked time (us), step, enclosing op and user source line, and the host scalar reads that did
    not wait. Never raises for traces without GPU events, steps or Python stacks: those become
    warnings. Raises ParameterError when the events table lacks a column it needs. Computed once per
    trace (diagnose, summary and step_anatomy all ask for it): the result is shared, so copy a table
    before changing it in place."""
    trace.require(*REQUIRED_COLUMNS)
    return trace.derived("syncs", _syncs)


def _syncs(trace) -> SyncResult:
    links = trace.launches(_LINKED)
    copies = _copy_launches(trace, links)
    candidates = _candidates(trace, copies)
    tree = _Tree(trace.events)
    anchors = _anchors(candidates, tree, copies)
    cpu_only = not _complete(trace.events, LAUNCH_CATEGORIES).any()
    events, internal = _drop_cpu_internal(_episodes(trace, anchors, tree), cpu_only)
    windows, stubs = full_step_windows(trace)
    n_steps, wall_us = max(len(windows), 1), float(windows["dur_us"].sum())
    events = events.assign(in_steps=in_windows(events, windows))
    gpu_side = _gpu_side(trace, candidates, links)
    counted = events[events["gpu_confirmed"] | cpu_only]
    return SyncResult(events=events, gpu_side=gpu_side, n_steps=n_steps, wall_us=wall_us, cpu_only=cpu_only,
                      findings=sync_findings(counted, n_steps, wall_us, cpu_only=cpu_only),
                      warnings=_warnings(trace, cpu_only, gpu_side) + internal + stubs)


def in_windows(events: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """Whether each event (``rank``, ``step``) lies in one of ``windows`` (full step windows)."""
    if events.empty:
        return np.zeros(0, dtype=bool)
    keys = set(zip(windows["rank"].astype(np.int64), windows["step"].astype(np.int64)))
    return np.fromiter(((int(r), int(s)) in keys for r, s in zip(events["rank"], events["step"])), dtype=bool,
                       count=len(events))


# --- candidates and anchors ----------------------------------------------------------------------

def blocking_calls(trace, host: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``host`` (host events of ``trace``) that block the calling thread: blocking runtime
    calls and blocking copy launches, device-to-host and pageable host-to-device (the runtime side
    of the rules above; their intervals are host time blocked)."""
    blocking = trace.derived("blocking_calls", _blocking_labels)
    return host.loc[host.index.intersection(blocking)]


def _blocking_labels(trace) -> pd.Index:
    """Labels of the runtime calls and copy launches of ``trace`` that block (see blocking_calls)."""
    candidates = _candidates(trace, _copy_launches(trace, trace.launches(("gpu_memcpy",))))
    return candidates.index[candidates["source"] != "op"]


def pageable_copy_calls(trace) -> pd.Index:
    """Labels of the copy launches of ``trace`` that block because they copy from pageable host memory to the
    device (``memcpy_htod_pageable``): their own copy is what they wait for."""
    return _blocking_copies(_copy_launches(trace, trace.launches(("gpu_memcpy",))))["memcpy_htod_pageable"]


def _complete(ev: pd.DataFrame, categories) -> np.ndarray:
    return (ev["ph"] == "X").to_numpy() & ev["cat"].isin(categories).to_numpy()


def _copy_launches(trace, links: pd.DataFrame) -> pd.DataFrame:
    """Launch calls of GPU copies: index = launch label; ``direction``, ``memory``, ``launch_name``."""
    copies = copies_frame(trace.events)
    links = links[links["gpu_index"].isin(copies.index)]
    out = pd.DataFrame({"direction": copies["direction"].reindex(links["gpu_index"]).to_numpy(),
                        "memory": copies["memory"].reindex(links["gpu_index"]).to_numpy(),
                        "launch_name": links["launch_name"].to_numpy()}, index=links["cpu_index"].to_numpy())
    return out[~out.index.duplicated()]


def _blocking_copies(copies: pd.DataFrame) -> dict[str, pd.Index]:
    """Launch labels of copies that block the host, by kind (memcpy_dtoh first: it wins a tie)."""
    sync_launch = copies["launch_name"].isin(list(SYNC_RUNTIME))
    dtoh = (copies["direction"] == "DtoH") & ((copies["memory"] != "pinned") | sync_launch)
    htod = (copies["direction"] == "HtoD") & (copies["memory"] == "pageable")
    return {"memcpy_dtoh": copies.index[dtoh], "memcpy_htod_pageable": copies.index[htod]}


def _candidates(trace, copies: pd.DataFrame) -> pd.DataFrame:
    """Host events that may block: index = event label; ``kind`` and ``source`` (runtime/copy/op)."""
    ev = trace.events
    runtime = ev.loc[_complete(ev, LAUNCH_CATEGORIES) & ev["name"].isin(list(SYNC_RUNTIME)).to_numpy(), "name"]
    frame = pd.DataFrame({"kind": runtime.astype(str).map(SYNC_RUNTIME).to_numpy(), "source": "runtime"},
                         index=runtime.index)
    for kind, labels in _blocking_copies(copies).items():
        frame.loc[frame.index.intersection(labels), "kind"] = kind
        extra = labels.difference(frame.index)
        frame = pd.concat([frame, pd.DataFrame({"kind": kind, "source": "copy"}, index=extra)])
    ops = ev.loc[_complete(ev, ("cpu_op",)) & ev["name"].isin(list(SYNC_OPS)).to_numpy(), "name"].astype(str)
    return pd.concat([frame, pd.DataFrame({"kind": ops.map(SYNC_OPS).to_numpy(), "source": "op"}, index=ops.index)])


class _Tree:
    """The host-event tree of ``Trace.events`` with the marks a sync walk needs: ops (cpu_op,
    ``ProfilerStep#`` excluded) and sync ops (:data:`SYNC_OPS`)."""

    def __init__(self, ev: pd.DataFrame):
        self.up = Ancestors(ev)
        self.index, self.names = ev.index, ev["name"]
        self.is_op = _complete(ev, ("cpu_op",)) & ~starts_with(ev["name"], STEP_PREFIX)
        self.is_sync_op = self.is_op & ev["name"].isin(list(SYNC_OPS)).to_numpy()

    def positions(self, labels) -> np.ndarray:
        return self.up.positions(labels)

    def walk(self, start: np.ndarray) -> dict[str, np.ndarray]:
        """Positions, per start position: ``op`` (innermost cpu_op strictly above, -1), ``top``
        (outermost cpu_op among itself and its ancestors, -1) and ``sync_op`` (outermost sync op
        among itself and its ancestors, -1)."""
        return self.up.walk(start, inner={"op": self.is_op}, outer={"top": self.is_op, "sync_op": self.is_sync_op})


def _anchors(candidates: pd.DataFrame, tree: _Tree, copies: pd.DataFrame) -> pd.DataFrame:
    """Per candidate: ``anchor`` (label of the event the entry is counted on) and ``anchor_kind``:
    the outermost sync op around it, else the op that launched a blocking copy, else itself."""
    if candidates.empty:
        return candidates.assign(anchor=pd.Series(dtype=np.int64), anchor_kind=pd.Series(dtype=object))
    labels = tree.index.to_numpy()
    walk = tree.walk(tree.positions(candidates.index))
    sync_op = walk["sync_op"]
    anchor = np.where(sync_op >= 0, labels[np.clip(sync_op, 0, None)], -1)
    kind = np.array([SYNC_OPS.get(n, "") for n in _name_of(tree.names, sync_op)], dtype=object)
    enclosing = np.where(walk["op"] >= 0, labels[np.clip(walk["op"], 0, None)], -1)
    not_op = (candidates["source"] != "op").to_numpy()
    for copy_kind, launches in _blocking_copies(copies).items():
        launch_ops = tree.walk(tree.positions(launches))["op"]
        copy_ops = labels[launch_ops[launch_ops >= 0]]
        hit = (anchor < 0) & not_op & np.isin(enclosing, copy_ops)
        anchor, kind = np.where(hit, enclosing, anchor), np.where(hit, copy_kind, kind)
    self_anchor = anchor < 0
    anchor = np.where(self_anchor, candidates.index.to_numpy(), anchor)
    kind = np.where(self_anchor, candidates["kind"].to_numpy(), kind)
    return candidates.assign(anchor=anchor.astype(np.int64), anchor_kind=kind)


# --- entries -------------------------------------------------------------------------------------

def _episodes(trace, anchors: pd.DataFrame, tree: _Tree) -> pd.DataFrame:
    """One row per anchor (``EPISODE_COLUMNS``), sorted by start time."""
    if anchors.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in EPISODE_COLUMNS}).astype(
            {"rank": np.int64, "step": np.int64, "ts_us": float, "blocked_us": float, "gpu_confirmed": bool,
             "running_line": bool, "torch_internal": bool})
    waits = anchors[anchors["source"] != "op"]
    confirmed = waits.groupby("anchor").size()
    # The call that waited: a blocking copy launch before a sync call, else the first sync call.
    waits = waits.assign(rank_=(waits["source"] != "copy").to_numpy(), label_=waits.index.to_numpy())
    call = waits.sort_values(["anchor", "rank_", "label_"]).drop_duplicates("anchor").set_index("anchor")["label_"]
    first = anchors.drop_duplicates("anchor").set_index("anchor")
    ev = trace.events.loc[first.index]
    walk = tree.walk(tree.positions(ev.index))
    names = tree.names
    op_pos = np.where(tree.is_op[tree.positions(ev.index)], tree.positions(ev.index), walk["op"])
    frame = pd.DataFrame({
        "kind": first["anchor_kind"].to_numpy(), "name": ev["name"].astype(str).to_numpy(),
        "op": _name_of(names, op_pos), "top_op": _name_of(names, walk["top"]),
        "rank": ev["rank"].to_numpy(dtype=np.int64), "step": ev["step"].to_numpy(dtype=np.int64),
        "ts_us": ev["ts_us"].to_numpy(), "blocked_us": ev["dur_us"].to_numpy(),
        "gpu_confirmed": confirmed.reindex(ev.index, fill_value=0).to_numpy() > 0,
        "call": _name_of(names, tree.positions(call.reindex(ev.index, fill_value=-1).to_numpy())),
    }, index=ev.index)
    frames = user_frames(trace, ev)
    frame = frame.join(canonical_lines(trace, frames)).assign(torch_internal=torch_internal(trace, ev, frames))
    return frame[EPISODE_COLUMNS].sort_values("ts_us", kind="stable")


def _drop_cpu_internal(events: pd.DataFrame, cpu_only: bool) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """On a trace without CUDA runtime events (``cpu_only``), drop ``item`` entries issued from inside
    another op that is not a sync op (aten::std, aten::multinomial via aten::_assert_async):
    those are the op's CPU implementation reading a scalar, which its CUDA kernel does not do.
    A user's own ``.item()`` is an outermost op and stays. Returns the kept events and a warning."""
    if not cpu_only or events.empty:
        return events, ()
    internal = (events["kind"] == "item") & (events["top_op"] != events["op"]) & ~events["top_op"].isin(
        list(SYNC_OPS)) & (events["top_op"] != "")
    if not internal.any():
        return events, ()
    tops = events.loc[internal, "top_op"].value_counts()
    listed = ", ".join(f"{op} {n}x" for op, n in tops.head(5).items())
    return events[~internal], (
        f"{int(internal.sum())} aten::item calls inside other ops ({listed}) were not counted: on this CPU-only "
        "trace they are those ops' CPU implementation, and their CUDA kernels do not read the value on the host; "
        "a trace with CUDA activity confirms any that do sync",)


def _name_of(names: pd.Series, positions: np.ndarray) -> np.ndarray:
    """Event names at ``positions`` of ``Trace.events`` ("" for -1)."""
    positions = np.asarray(positions, dtype=np.int64)
    out = np.full(len(positions), "", dtype=object)
    hit = positions >= 0
    out[hit] = names.iloc[positions[hit]].astype(str).to_numpy()
    return out


def _gpu_side(trace, candidates: pd.DataFrame, links: pd.DataFrame) -> pd.DataFrame:
    """cuda_sync events by name: count, GPU-side time (us), and how many have a blocking host call
    (``host_blocking``), a non-blocking one such as cudaEventQuery (``host_other``) or none in the
    trace (``unmatched``)."""
    gpu = trace.select("cuda_sync")
    if gpu.empty:
        return pd.DataFrame(columns=["name", "count", "gpu_us", "host_blocking", "host_other", "unmatched"])
    links = links[links["gpu_cat"] == "cuda_sync"].drop_duplicates("gpu_index").set_index("gpu_index")["cpu_index"]
    host = links.reindex(gpu.index)
    blocking = host.isin(candidates.index).to_numpy()
    frame = pd.DataFrame({"name": gpu["name"].astype(str), "dur_us": gpu["dur_us"], "blocking": blocking,
                          "other": host.notna().to_numpy() & ~blocking, "unmatched": host.isna().to_numpy()})
    return frame.groupby("name", sort=True).agg(
        count=("dur_us", "size"), gpu_us=("dur_us", "sum"), host_blocking=("blocking", "sum"),
        host_other=("other", "sum"), unmatched=("unmatched", "sum")).reset_index()


def _warnings(trace, cpu_only: bool, gpu_side: pd.DataFrame) -> tuple:
    out = []
    if cpu_only:
        out.append("no CUDA runtime events: nothing here waited on a GPU; scalar reads such as aten::item are "
                   "listed as possible sync points (they sync when their tensor is on the GPU), with their host "
                   "time as blocked time; re-profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    elif not trace.has_gpu_events:
        out.append("no GPU events: device-to-host copies cannot be identified; re-profile with "
                   "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    if not trace.has_python_stacks:
        out.append("no Python stacks: sync points have no source line; re-profile with with_stack=True")
    if len(trace.steps) == 0:
        out.append("no steps found: per-step counts are per trace; call prof.step() once per training step")
    host_waits = gpu_side[gpu_side["name"] != "Stream Wait Event"] if len(gpu_side) else gpu_side
    unmatched = int(host_waits["unmatched"].sum()) if len(host_waits) else 0
    if unmatched:
        out.append(f"{unmatched} cuda_sync events have no host call in the trace (not counted: the host side "
                   "of the wait is missing; was the profiler's CPU activity on?)")
    return tuple(out)
