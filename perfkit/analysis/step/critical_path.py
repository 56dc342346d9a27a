"""``critical_path(trace)``: the chain of host work, launches, kernels, copies and sync waits that
bounds each step, and its time by kind.

The dependency model is Holistic Trace Analysis's (``CriticalPathAnalysis``): work on one host
thread runs in order; a kernel or copy starts after its launch call and after the previous work on
its stream; a blocking call (``lanes.host_blocking``: ``syncs.blocking_calls`` and copies from
pageable memory) returns after the GPU work it waits for. The path is found backwards from the step's end, each
time following the dependency that was satisfied last (the one that held the work back):

* on a GPU stream, from a kernel's start to the previous work on the stream when that ended after
  the kernel was launched (the kernel was queued), else to its launch call (the launch held it);
  one that starts more than ``QUEUE_SLACK_US`` after both (for a copy that starts inside its blocking
  call: after the call began) goes to the work on another stream that ended last before it
  (``cudaStreamWaitEvent``, e.g. on a collective);
* on a host thread, back along the thread until a blocking call, then to the latest GPU work that
  ended inside the call (the work the call waited for), or through the call when none did;
* the main thread (``timeline.thread_table``: the one that marks the steps) hands the path to
  another thread where it waits while that thread runs ops (``lanes.RankTimeline.handoff``: the
  main thread inside ``loss.backward()``'s ``run_backward`` while the autograd engine's thread runs
  the backward ops, or with no traced work of its own while another thread runs ops);
* a thread other than the rank's main thread is followed back to the start of its current burst
  of ops; before that it was waiting for the main thread, so the path continues there (HTA does not
  link threads and starts the path instead).

Each microsecond of the path has one kind (``KINDS``): ``kernel`` / ``comm`` / ``memcpy`` (GPU
work: compute kernels, collective kernels (NCCL/RCCL), copies; memsets count as memcpy), ``launch`` (launch calls on the path, and the delay from a launch call's return to
the start of the kernel it held, or the call up to the start of a kernel that starts before its call
returns), ``sync_wait`` (inside a blocking call but not explained by GPU work on the path: the wake-up
after the GPU finished, a call that waited for something not in the trace, or a copy from pageable
memory being staged before its copy starts), ``host`` (host ops and Python frames), ``idle`` (no traced
activity where the path is: untraced host code, e.g. Python in a trace without ``with_stack=True``,
or a stream waiting for queued work). The path is cut at the step boundaries, so per step the kinds
sum to ``path_us`` <= ``wall_us``; ``path_us`` < ``wall_us`` only where the chain starts inside the
step (e.g. at a kernel whose launch is not in the trace).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import repeat

import numpy as np
import pandas as pd

from ...errors import ParameterError
from ...results import html_section, html_table, html_text, html_warnings
from ...text import jsonable
from ...trace.steps import full_step_windows
from .lanes import (CLOCK_SLACK_US, GPU_COMM, GPU_COPY, GPU_KERNEL, QUEUE_SLACK_US, lane_name, other_stream,
                    rank_timelines)

KINDS = ("host", "launch", "kernel", "comm", "memcpy", "sync_wait", "idle")

_GPU_KIND = {GPU_KERNEL: "kernel", GPU_COPY: "memcpy", GPU_COMM: "comm"}

STEP_COLUMNS = ["rank", "step", "start_us", "end_us", "wall_us", "path_us", *[f"{k}_us" for k in KINDS], "bound_by"]
SEGMENT_COLUMNS = ["rank", "step", "kind", "start_us", "end_us", "lane", "label"]


@dataclass(frozen=True, eq=False, repr=False)
class CriticalPathResult:
    """``steps``: one row per step window (``STEP_COLUMNS``; times in us; ``bound_by`` is the kind
    with the most time). ``segments``: the path itself, latest first (``SEGMENT_COLUMNS``): ``lane``
    names the host thread or GPU stream it runs on, ``label`` the event it runs through in
    ``trace.events`` (-1 for stretches of host time and gaps)."""

    steps: pd.DataFrame
    segments: pd.DataFrame
    warnings: tuple

    def to_frame(self) -> pd.DataFrame:
        return self.steps.copy()

    @property
    def by_kind(self) -> dict:
        """Path time per kind over all steps, in us."""
        return {k: float(self.steps[f"{k}_us"].sum()) for k in KINDS}

    @property
    def total(self) -> dict:
        s = self.steps
        return {"steps": int(len(s)), "wall_us": float(s["wall_us"].sum()), "path_us": float(s["path_us"].sum()),
                "by_kind": self.by_kind}

    def to_json(self) -> dict:
        rows = [{"rank": int(r["rank"]), "step": int(r["step"]), "start_us": r["start_us"], "wall_us": r["wall_us"],
                 "path_us": r["path_us"], "by_kind": {k: r[f"{k}_us"] for k in KINDS}, "bound_by": r["bound_by"]}
                for r in self.steps.to_dict("records")]
        return jsonable({"steps": rows, "total": self.total, "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        t = self.total
        share = ", ".join(f"{k} {100 * v / t['path_us']:.0f}%" for k, v in t["by_kind"].items() if v > 0) \
            if t["path_us"] > 0 else "empty"
        return f"<CriticalPathResult {t['steps']} steps, path {t['path_us'] / 1e3:.3f} ms: {share}>"

    def _repr_html_(self) -> str:
        t = self.total
        return html_section("Critical path", html_text(f"{t['path_us'] / 1e3:,.3f} ms of {t['wall_us'] / 1e3:,.3f} ms"),
                            html_table(self.steps), html_warnings(self.warnings))


# The path kinds each verdict expects to find longest on a step's path; outside them, ``path_note`` says why the
# two measures differ (a step's verdict weighs what the GPU waits for; the path, the chain of dependencies).
_PATH_KINDS = {"GPU-bound": {"kernel", "memcpy"}, "GPU-bound (host ahead)": {"kernel", "memcpy", "comm"},
               "communication-bound": {"comm", "sync_wait"}, "input-bound": {"host", "idle"},
               "launch-bound": {"host", "launch", "idle"}, "host-compute-bound": {"host", "idle"},
               "sync-bound": {"sync_wait", "kernel", "memcpy"}, "CPU-only trace": {"host", "idle"},
               "compiling": {"host", "idle"}}
_GPU_SIDE = {"kernel", "memcpy", "comm"}


def path_note(bound_by: str, verdict: str) -> str:
    """Why a step's longest path kind differs from its verdict, or "" when they agree (warm-up, a partial step
    and a verdict perfkit cannot judge agree with any kind)."""
    expected = _PATH_KINDS.get(verdict)
    if expected is None or bound_by in expected or not bound_by:
        return ""
    if bound_by in _GPU_SIDE:
        return (f"the path runs through the GPU's {bound_by} work, but the GPU idles enough of the step for the "
                f"host to limit it ({verdict})")
    if verdict == "communication-bound":
        return (f"the path runs through the host ({bound_by}) up to the collectives, which then wait for a slower "
                "peer (communication-bound: perfkit ranks)")
    return (f"the path's {bound_by} time overlaps the GPU work the host queued ahead: the GPU stays busy "
            f"({verdict})")


def critical_path(trace, *, annotation: str | None = None) -> CriticalPathResult:
    """Critical path of each full step window of ``trace`` (the module doc gives the model and
    kinds; partial steps at the profiler window's edge are left out, with a warning: ``trace.steps.stub_steps``).

    ``annotation``: compute it over each instance of this host annotation instead (a name or a
    name prefix, e.g. ``"ProfilerStep"`` or a record_function label), numbered 0, 1, ... in time
    order. Raises ParameterError when no event matches ``annotation``. A trace without GPU events
    gets a host-only path, with a warning. Computed once per trace and annotation (step_anatomy walks
    the same path): the result is shared.
    """
    return trace.derived(("critical_path", annotation), lambda t: _critical_path(t, annotation))


def _critical_path(trace, annotation: str | None) -> CriticalPathResult:
    windows, stubs = full_step_windows(trace) if annotation is None else (annotation_windows(trace, annotation), ())
    result = path_over(trace, windows, rank_timelines(trace))
    return replace(result, warnings=result.warnings + stubs)


def path_over(trace, windows: pd.DataFrame, timelines: dict) -> CriticalPathResult:
    """:func:`critical_path` over given windows, with the ranks' timelines already built."""
    rows, walks = [], []
    for win in windows.itertuples(index=False):
        segs = walk_step(timelines[win.rank], win.start_us, win.end_us) if win.rank in timelines else []
        rows.append(_step_row(win, segs))
        walks.append((win.rank, win.step, segs))
    steps = pd.DataFrame(rows, columns=STEP_COLUMNS)
    return CriticalPathResult(steps=steps, segments=_segment_frame(walks), warnings=_warnings(trace, timelines))


def _segment_frame(walks: list) -> pd.DataFrame:
    """The ``SEGMENT_COLUMNS`` table of each window's (rank, step, segments), built column-wise."""
    flat = [seg for _, _, segs in walks for seg in segs]
    if not flat:
        return pd.DataFrame([], columns=SEGMENT_COLUMNS)
    counts = [len(segs) for _, _, segs in walks]
    columns = [np.repeat([w[0] for w in walks], counts), np.repeat([w[1] for w in walks], counts), *zip(*flat)]
    return pd.DataFrame({name: list(col) if isinstance(col, tuple) else col
                         for name, col in zip(SEGMENT_COLUMNS, columns)})


def annotation_windows(trace, annotation: str) -> pd.DataFrame:
    """Windows (rank, step, start_us, end_us, dur_us) of the host events named ``annotation`` or
    starting with it, numbered per rank in time order. Raises ParameterError when there are none."""
    ev = trace.events
    host = ev[(ev["ph"] == "X") & ~ev["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"])]
    names = host["name"].astype(str)
    hits = host[(names == annotation) | names.str.startswith(annotation)].sort_values(["rank", "ts_us"])
    if hits.empty:
        raise ParameterError(f"no host event is named {annotation!r} (or starts with it); pass a "
                             "record_function label or 'ProfilerStep'")
    out = pd.DataFrame({"rank": hits["rank"].to_numpy(), "start_us": hits["ts_us"].to_numpy(),
                        "end_us": (hits["ts_us"] + hits["dur_us"]).to_numpy()})
    out.insert(1, "step", out.groupby("rank").cumcount().to_numpy())
    return out.assign(dur_us=out["end_us"] - out["start_us"])


# --- the walk -----------------------------------------------------------------------------------
# States: ("gpu", row, t): inside GPU event ``row`` at time t; ("host", thread, t): on a host thread
# just before t; ("sync", thread, k, t): inside blocking call k of the thread at t. Each step emits
# segments (kind, start, end, lane, label) ending where the previous one started.

def walk_step(tl, start: float, end: float) -> list:
    """Segments of the critical path of [start, end) on one rank, latest first."""
    segs: list = []
    state = _start(tl, end)
    budget = 4 * len(tl.gpu["start"]) + 4 * sum(len(h.block_start) for h in tl.hosts.values()) \
        + 4 * len(tl.handoff.starts) + 64
    while state is not None and budget > 0:
        budget -= 1
        if state[0] == "gpu":
            state = _gpu_step(tl, state[1], state[2], start, segs)
        elif state[0] == "host":
            state = _host_step(tl, state[1], state[2], start, segs)
        else:
            state = _sync_step(tl, state[1], state[2], state[3], start, segs)
    return segs


def _start(tl, end: float):
    """The GPU event running at the step's end (latest-ending one over streams), else the main thread."""
    best, best_end = -1, -np.inf
    g = tl.gpu
    for a, b in tl.lanes.values():
        k = a + np.searchsorted(g["start"][a:b], end, side="left") - 1
        if k >= a and g["end"][k] >= end and g["end"][k] > best_end:
            best, best_end = int(k), g["end"][k]
    return ("gpu", best, end) if best >= 0 else ("host", tl.main, end)


def _gpu_step(tl, row: int, t: float, floor: float, segs: list):
    g = tl.gpu
    start, lane = g["start"][row], int(g["lane"][row])
    _emit(segs, _GPU_KIND[int(g["kind"][row])], max(start, floor), t, lane_name(lane), g["label"][row])
    if start <= floor:
        return None
    prev, thread = int(g["prev"][row]), int(g["launch_thread"][row])
    # An event that starts inside its launch call (a blocking copy) could start from the call's start:
    # a late start then waited for the previous work on its stream or for another stream, not for the call.
    launched = (g["launch_start"][row] if g["launch_end"][row] > start else g["launch_end"][row]) \
        if thread >= 0 else -np.inf
    ready = max(g["end"][prev] if prev >= 0 else -np.inf, launched)
    other = other_stream(tl, row, ready) if start - ready > QUEUE_SLACK_US else -1
    if other >= 0:
        return _to_gpu(tl, other, start, floor, segs, lane)
    if prev >= 0 and (thread < 0 or g["end"][prev] >= g["launch_start"][row]):
        return _to_gpu(tl, prev, start, floor, segs, lane)
    if thread >= 0:
        # Launch delay: from the call's return to the kernel's start, or, for a kernel that started
        # before its call returned (a synchronous cudaMemcpy), the call up to the kernel's start.
        # A blocking launch (a copy from pageable memory) holds the thread until the copy starts: sync_wait.
        inside = g["launch_end"][row] > start
        t_host = min(g["launch_start"][row], start) if inside else g["launch_end"][row]
        kind = "sync_wait" if inside and g["launch_blocks"][row] else "launch"
        _emit(segs, kind, max(t_host, floor), start, lane_name(lane), g["label"][row])
        return ("host", thread, t_host) if t_host > floor else None
    return None


def _to_gpu(tl, row: int, t: float, floor: float, segs: list, lane: int):
    """Continue inside GPU event ``row`` from ``t`` (idle after its end); work from before the window ends the path."""
    if tl.gpu["early"][row]:
        return None
    t_gpu = min(tl.gpu["end"][row], t)
    _emit(segs, "idle", max(t_gpu, floor), t, lane_name(lane), -1)
    return ("gpu", row, t_gpu) if t_gpu > floor else None


def _host_step(tl, thread: int, t: float, floor: float, segs: list):
    lane = tl.hosts.get(thread)
    name = tl.thread_labels.get(thread, str(thread))
    if lane is None:
        _emit(segs, "idle", floor, t, name, -1)
        return None
    k = int(np.searchsorted(lane.block_start, t, side="left")) - 1
    block_end = lane.block_end[k] if k >= 0 else -np.inf
    lower = min(max(block_end, floor), t)
    if thread != tl.main:
        burst = _burst_start(lane.ops, t)
        if burst == t:
            burst = _burst_start(lane.work, t)
        if burst > lower:
            _emit_host(segs, lane, burst, t, name)
            return ("host", tl.main, burst)
    else:
        handed = _handoff(tl, t, lower)
        if handed is not None:
            at, other = handed
            _emit_host(segs, lane, at, t, name)
            return ("host", other, at)
    _emit_host(segs, lane, lower, t, name)
    if lower <= floor:
        return None
    return ("sync", thread, k, lower)


def _handoff(tl, t: float, lower: float):
    """(time, thread): the latest moment in (lower, t] at which the main thread waited while another
    thread ran ops (``RankTimeline.handoff``), and the thread that ran them then; None if none."""
    h = tl.handoff
    j = int(np.searchsorted(h.starts, t, side="left")) - 1
    if j < 0 or h.ends[j] <= lower:
        return None
    at = min(float(h.ends[j]), t)
    best, best_start = None, np.inf
    for code, lane in tl.hosts.items():
        if code == tl.main or not len(lane.ops.starts):
            continue
        k = int(np.searchsorted(lane.ops.starts, at, side="left")) - 1
        if k >= 0 and lane.ops.ends[k] >= at and lane.ops.starts[k] < best_start:
            best, best_start = code, lane.ops.starts[k]
    return (at, best) if best is not None else None


def _burst_start(work, t: float) -> float:
    """Start of the block of work running at ``t`` on the thread, or ``t`` in a gap."""
    k = int(np.searchsorted(work.starts, t, side="left")) - 1
    return float(work.starts[k]) if k >= 0 and work.ends[k] >= t else t


def _sync_step(tl, thread: int, k: int, t: float, floor: float, segs: list):
    """Inside blocking call ``k``: jump to the GPU work it waited for, else through the call."""
    lane = tl.hosts[thread]
    name, label, call_start = tl.thread_labels.get(thread, str(thread)), lane.block_label[k], lane.block_start[k]
    waited = _waited_for(tl, int(lane.block_lane[k]), call_start, t)
    if waited >= 0:
        t_gpu = min(tl.gpu["end"][waited], t)
        _emit(segs, "sync_wait", max(t_gpu, floor), t, name, label)
        return ("gpu", waited, t_gpu) if t_gpu > floor else None
    _emit(segs, "sync_wait", max(call_start, floor), t, name, label)
    return ("host", thread, call_start) if call_start > floor else None


def _waited_for(tl, lane: int, call_start: float, t: float) -> int:
    """The GPU event (on ``lane`` if known) that ended last inside (call_start, t], started before t."""
    ends, rows = tl.lane_by_end.get(lane, (tl.by_end, tl.by_end_rows)) if lane >= 0 else (tl.by_end, tl.by_end_rows)
    k = int(np.searchsorted(ends, t + CLOCK_SLACK_US, side="right")) - 1
    while k >= 0 and ends[k] > call_start:
        if tl.gpu["start"][rows[k]] < t and not tl.gpu["early"][rows[k]]:
            return int(rows[k])
        k -= 1
    return -1


def _emit(segs: list, kind: str, start: float, end: float, lane: str, label) -> None:
    if end > start:
        segs.append((kind, float(start), float(end), lane, int(label)))


def _emit_host(segs: list, lane, a: float, b: float, name: str) -> None:
    """Split host time [a, b) into runs of one kind (sync_wait > launch > host > idle), latest first."""
    if b <= a:
        return
    points = [np.array([a, b])]
    for cov in (lane.work, lane.calls, lane.blocking):
        lo, hi = np.searchsorted(cov.ends, a, side="right"), np.searchsorted(cov.starts, b, side="left")
        points += [cov.starts[lo:hi], cov.ends[lo:hi]]
    cuts = np.unique(np.clip(np.concatenate(points), a, b))
    mids = (cuts[:-1] + cuts[1:]) / 2
    code = {k: i for i, k in enumerate(KINDS)}
    kind = np.select([lane.blocking.covers(mids), lane.calls.covers(mids), lane.work.covers(mids)],
                     [code["sync_wait"], code["launch"], code["host"]], default=code["idle"])
    change = np.flatnonzero(np.concatenate(([True], kind[1:] != kind[:-1])))
    bounds = np.append(change, len(kind))
    starts, ends = cuts[bounds[:-1]][::-1], cuts[bounds[1:]][::-1]
    kept = ends > starts
    kinds = np.asarray(KINDS)[kind[change][::-1][kept]].tolist()
    segs.extend(zip(kinds, starts[kept].tolist(), ends[kept].tolist(), repeat(name), repeat(-1)))


def _step_row(win, segs: list) -> list:
    by_kind = dict.fromkeys(KINDS, 0.0)
    for kind, start, end, _, _ in segs:
        by_kind[kind] += end - start
    path = sum(by_kind.values())
    bound = max(KINDS, key=by_kind.get) if path > 0 else ""
    return [win.rank, win.step, win.start_us, win.end_us, win.end_us - win.start_us, path,
            *by_kind.values(), bound]


def _warnings(trace, timelines: dict) -> tuple:
    out = list(trace.warnings)  # what the loader set aside, said in every command's output
    if not trace.has_gpu_events:
        out.append("no GPU events: the critical path is the main thread's host time; re-profile with "
                   "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    orphans = sum(t.unlaunched for t in timelines.values())
    if orphans:
        out.append(f"{orphans:,} GPU events have no launch call in the trace: a path reaching one starts there (those "
                   "launched before the profiler's window, the previous step's tail, are never on it: gpu-kernels' rule)")
    if not (trace.events["cat"] == "cuda_sync").any() and trace.has_gpu_events:
        out.append("no cuda_sync events: blocking calls are matched to the GPU work that ended inside them by time "
                   "only (torch >= 2.1 records them)")
    return tuple(out)
