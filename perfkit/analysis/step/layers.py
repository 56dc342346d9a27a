"""What the host and the GPU did in each step window: disjoint layers of time, warm-up set apart.

Per window (``trace.steps.step_windows``), all in microseconds, every layer computed with the warm-up calls
(``warmup.warmup_events``) taken out of the window (``warmup_us`` holds them; ``wall_us`` stays the
window's length):

* ``gpu_busy_us``: union of kernels, copies and memsets; ``comm_us``: union of collective kernels
  (NCCL/RCCL); ``comm_exposed_us``: the part of ``comm_us`` no other GPU work overlaps (communication
  not hidden under compute); these three are the whole window's, and ``gpu_busy_warmup_us`` and
  ``comm_exposed_warmup_us`` their parts during the warm-up calls: a share of the step less its
  warm-up takes them out of its numerator too (a 1,065 ms window with 572 ms of warm-up read "GPU busy
  52%" against the whole window, and exposed collectives 313 ms "of 266 ms");
* host layers, each outside the ones before it: ``dataloader_us`` (DataLoader ``__next__``),
  ``compile_us`` (compile spans), ``sync_us`` (blocking calls), then the rest of the ops split in
  ``launch_side_us`` (ops that launched GPU work, with their runtime calls, less the ops inside them
  that launched nothing: the host issuing work) and ``host_compute_us`` (ops that launched nothing:
  CPU tensors computed on the host, allocations, host-side bookkeeping);
  ``host_other_us`` = launch side + host compute; ``host_busy_us`` = all host layers;
* ``python_us``: Python frames running with no op under them (Python doing work);
* ``untraced_us``: time in which neither the GPU nor any traced host event was busy (untraced host
  code, e.g. Python in a trace recorded without ``with_stack=True``).
* ``sync_blocked_us``: union of the blocking calls alone (what ``syncs`` counts as blocked time);
* ``sync_comm_us``: the blocking calls, outside DataLoader and compile spans, during at least half of
  which collective kernels ran: the host waiting on communication (DLRM's ``.item()`` after an
  all_to_all), which is communication, not a host cause.
* ``sync_idle_us``: the GPU idle during the blocking calls and the refill after each one, outside
  DataLoader and compile spans: a sync returns once the GPU's queue is empty, so the GPU then idles until
  the host issues the next work (``refills``). It tells syncs that drain the GPU from syncs that wait on
  a queue the GPU works through anyway (``rules.sync_eligible``); the refill's host work stays in the
  layers below.
* ``dataloader_idle_us``, ``launch_side_idle_us``, ``host_compute_idle_us``, ``python_idle_us``: the
  same layers counted only while the GPU is idle: what the host did while the GPU waited for it
  (launching while the GPU still has queued work keeps no GPU waiting); ``python_launch_idle_us``:
  the part of ``python_idle_us`` in frames that issue GPU work (a launch runs inside them);
  ``untraced_launch_idle_us``: the part of ``untraced_us`` with the GPU idle that lies between two launch
  calls of a thread at most ``rules.DENSE_LAUNCH_GAP_US`` apart: the host issuing work in code the trace
  does not show (Python without stacks, Triton's launcher).
* ``copy_busy_us``: union of the window's copies and memsets (the GPU moving data, not computing).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace import intervals
from ...trace.ancestry import with_ancestors
from ...trace.intervals import window_cover
from ...trace.names import starts_with
from ...trace.schema import GPU_CATEGORIES, LAUNCH_CATEGORIES
from ...trace.steps import STEP_PREFIX
from ...trace.threads import thread_codes
from ..classify import is_comm, launch_mask
from ..compile import compile_spans
from ..host_ops import DATALOADER_PREFIX, HOST_WORK_CATEGORIES
from ..sync_points.find import blocking_calls
from .rules import DENSE_LAUNCH_GAP_US

LAYER_COLUMNS = ["warmup_us", "gpu_busy_us", "gpu_busy_warmup_us", "copy_busy_us", "comm_us", "comm_exposed_us",
                 "comm_exposed_warmup_us", "dataloader_us", "compile_us", "sync_us",
                 "sync_blocked_us", "sync_comm_us", "sync_idle_us", "launch_side_us", "host_compute_us", "host_other_us", "host_busy_us",
                 "python_us", "untraced_us", "dataloader_idle_us", "launch_side_idle_us", "host_compute_idle_us",
                 "python_idle_us", "python_launch_idle_us", "untraced_launch_idle_us"]
_SPAN = ["rank", "ts_us", "dur_us"]
_THREAD_SPAN = [*_SPAN, "file_id", "pid", "tid"]


def step_layers(trace, host: pd.DataFrame, nested: pd.DataFrame, windows: pd.DataFrame,
                warmup: pd.DataFrame, *, links: pd.DataFrame | None = None,
                work: tuple | None = None) -> pd.DataFrame:
    """``LAYER_COLUMNS`` per row of ``windows``. ``host``: host events (``host_ops.host_events``),
    ``nested``: their ``trace.ancestry.nest``; ``warmup``: ``warmup.warmup_events(trace)``; ``links``:
    ``trace.launches()`` and ``work``: ``host_work(trace, host)`` when the caller has them."""
    cold = warmup[_SPAN] if len(warmup) else _empty()
    work, issuing = host_work(trace, host, links) if work is None else work
    # Only the columns the layers read: row selections below copy every column they keep.
    ops = (work["cat"] == "cpu_op").to_numpy()
    calls = work[(work["cat"].isin(LAUNCH_CATEGORIES)).to_numpy() & launch_mask(work["name"])][_THREAD_SPAN]
    work = work[_THREAD_SPAN]
    launching = _less(work[issuing], work[~issuing & ops])
    python = working_frames(trace)[_THREAD_SPAN]
    drives = _drives_launches(python, work[issuing])
    driving = _less(python[drives], python[~drives])
    gpu = trace.gpu_events()
    comm = gpu[(gpu["cat"] == "kernel").to_numpy() & is_comm(gpu["name"])]
    compute = gpu.drop(comm.index)

    out = pd.DataFrame(index=windows.index)
    out["gpu_busy_us"] = window_cover(gpu, windows)
    out["copy_busy_us"] = window_cover(gpu[gpu["cat"].isin(("gpu_memcpy", "gpu_memset")).to_numpy()], windows)
    out["comm_us"] = window_cover(comm, windows)
    out["comm_exposed_us"] = np.maximum(out["gpu_busy_us"] - window_cover(compute, windows), 0.0)
    # Each set's union per rank once; a layer below is the union of a few of those unions.
    blocks = intervals.rank_unions
    work, python, gpu, driving, launching = (blocks(f) for f in (work, python, gpu, driving, launching))
    comm_blocks, compute_blocks = blocks(comm), blocks(compute)
    loader = blocks(host[starts_with(host["name"], DATALOADER_PREFIX)])
    compiling = blocks(compile_spans(trace))
    blocking = blocks(blocking_calls(trace, host))
    cold = pd.concat([cold, untraced_around(cold, _joined(work, python, gpu, loader, compiling))], ignore_index=True)
    cover = _Cover(windows, cold)
    base = cover.base
    out["warmup_us"] = base
    dl, dl_compile = cover(loader), cover(loader, compiling)
    layered = cover(loader, compiling, blocking)
    with_launch = cover(loader, compiling, blocking, launching)
    everything = np.maximum(cover(work, loader, compiling), layered)
    out["dataloader_us"] = dl
    out["compile_us"] = dl_compile - dl
    out["sync_us"] = layered - dl_compile
    out["sync_blocked_us"] = cover(blocking)
    out["launch_side_us"] = np.maximum(with_launch - layered, 0.0)
    out["host_other_us"] = np.maximum(everything - layered, 0.0)
    out["host_compute_us"] = np.maximum(out["host_other_us"] - out["launch_side_us"], 0.0)
    out["host_busy_us"] = everything
    out["python_us"] = np.maximum(cover(work, loader, compiling, blocking, python) - everything, 0.0)
    traced = cover(work, loader, compiling, blocking, python, gpu)
    out["untraced_us"] = np.maximum(windows["dur_us"].to_numpy() - base - traced, 0.0)
    between = blocks(_dense_launch_gaps(calls))
    # cover() and traced both leave the warm-up out already (a second "- base" read 0 in any step with warm-up)
    out["untraced_launch_idle_us"] = np.minimum(np.maximum(
        cover(work, loader, compiling, blocking, python, gpu, between) - traced, 0.0), out["untraced_us"])
    stalled = _joined(blocking, refills(blocking, gpu))
    out["sync_comm_us"] = np.maximum(cover(loader, compiling, mostly_under(blocking, comm_blocks)) - dl_compile, 0.0)
    # The same layers counted only while the GPU idles: what the host did when the GPU waited.
    busy = cover(gpu)
    out["gpu_busy_warmup_us"] = np.maximum(out["gpu_busy_us"].to_numpy() - busy, 0.0)
    steady_exposed = np.maximum(cover(comm_blocks, compute_blocks) - cover(compute_blocks), 0.0)
    out["comm_exposed_warmup_us"] = np.maximum(out["comm_exposed_us"].to_numpy() - steady_exposed, 0.0)
    dl_idle = cover(loader, gpu) - busy
    layered_idle = cover(loader, compiling, blocking, gpu)
    out["sync_idle_us"] = np.maximum(cover(loader, compiling, stalled, gpu) - cover(loader, compiling, gpu), 0.0)
    out["dataloader_idle_us"] = np.maximum(dl_idle, 0.0)
    out["launch_side_idle_us"] = np.maximum(cover(loader, compiling, blocking, launching, gpu) - layered_idle, 0.0)
    everything_idle = np.maximum(cover(work, loader, compiling, gpu), layered_idle)
    out["host_compute_idle_us"] = np.maximum(everything_idle - layered_idle - out["launch_side_idle_us"], 0.0)
    out["python_idle_us"] = np.maximum(cover(work, loader, compiling, blocking, python, gpu) - everything_idle, 0.0)
    out["python_launch_idle_us"] = np.minimum(
        np.maximum(cover(work, loader, compiling, blocking, driving, gpu) - everything_idle, 0.0), out["python_idle_us"])
    return out[LAYER_COLUMNS]


def _dense_launch_gaps(calls: pd.DataFrame) -> pd.DataFrame:
    """(rank, ts_us, dur_us) of the gaps between consecutive launch calls of a thread that are at most
    ``DENSE_LAUNCH_GAP_US`` long."""
    if calls.empty:
        return _empty()
    order = np.lexsort((calls["ts_us"].to_numpy(), thread_codes(calls)))
    c = calls.iloc[order]
    thread = thread_codes(c)
    end = (c["ts_us"] + c["dur_us"]).to_numpy(dtype=np.float64)
    start = c["ts_us"].to_numpy(dtype=np.float64)
    gap = start[1:] - end[:-1]
    keep = (thread[1:] == thread[:-1]) & (gap > 0) & (gap <= DENSE_LAUNCH_GAP_US)
    return pd.DataFrame({"rank": c["rank"].to_numpy()[1:][keep], "ts_us": end[:-1][keep], "dur_us": gap[keep]})


def refills(blocking: dict, gpu: dict) -> dict:
    """``{rank: (starts, ends)}``: from the end of each block of blocking calls to the start of the next
    GPU work on its rank (nothing where no GPU work follows). Both arguments are ``rank_unions``."""
    out = {}
    for rank, (starts, ends) in blocking.items():
        gpu_starts = gpu.get(rank, (np.empty(0), np.empty(0)))[0]
        nxt = np.searchsorted(gpu_starts, ends, side="left")
        has = nxt < len(gpu_starts)
        out[rank] = (ends[has], gpu_starts[nxt[has]])
    return out


def mostly_under(blocks: dict, under: dict) -> dict:
    """The blocks of ``blocks`` (``{rank: (starts, ends)}``) that ``under`` covers for at least half their length."""
    out = {}
    for rank, (starts, ends) in blocks.items():
        if rank not in under or not len(starts):
            continue
        covered = intervals.Coverage.of(*under[rank]).within(starts, ends)
        keep = covered >= 0.5 * (ends - starts)
        out[rank] = (starts[keep], ends[keep])
    return out


def _joined(*sets: dict) -> dict:
    """``{rank: (starts, ends)}`` sets as one (overlaps kept: covers take unions)."""
    return {r: tuple(np.concatenate([p[i] for p in (s.get(r) for s in sets) if p is not None]) for i in (0, 1))
            for r in set().union(*sets)}


def untraced_around(cold: pd.DataFrame, traced: dict) -> pd.DataFrame:
    """(rank, ts_us, dur_us) of the untraced time on either side of each warm-up call: the gaps with no traced
    host or GPU event (``traced``: ``{rank: (starts, ends)}``) before and after the stretch of traced activity
    holding the call, when the call is at least half of that stretch. First calls and the untraced host code
    around them (lazy set-up in Python a trace without stacks does not show) are one warm-up: an A100 model's
    first call held a 629.6 ms cudaLaunchKernel and 293 ms of untraced host time around it."""
    rows = []
    for rank, calls in cold.groupby("rank", sort=False):
        if rank not in traced:
            continue
        starts, ends = intervals.union(*traced[rank])
        for ts, dur in zip(calls["ts_us"].to_numpy(dtype=np.float64), calls["dur_us"].to_numpy(dtype=np.float64)):
            b = int(np.searchsorted(starts, ts, side="right")) - 1
            if b < 0 or ends[b] - starts[b] > 2 * dur:
                continue
            if b > 0:
                rows.append((rank, ends[b - 1], starts[b] - ends[b - 1]))
            if b + 1 < len(starts):
                rows.append((rank, ends[b], starts[b + 1] - ends[b]))
    return pd.DataFrame(rows, columns=_SPAN).astype({"ts_us": np.float64, "dur_us": np.float64})


class _Cover:
    """Covered length of each step window by the union of some interval sets and the warm-up calls,
    less the warm-up calls' own cover (``base``). Each set comes reduced to its union per rank
    (``intervals.rank_unions``): the union of unions is the union of the events, so the lengths are
    those of ``intervals.window_cover`` over the events, computed from far fewer intervals."""

    def __init__(self, windows: pd.DataFrame, cold: pd.DataFrame):
        self.windows = windows
        self.cold = intervals.rank_unions(cold)
        self.base = intervals.cover_within(self.cold, windows)

    def __call__(self, *sets: dict) -> np.ndarray:
        if not any(sets):
            return np.zeros(len(self.windows))
        merged = {}
        for rank in set().union(*sets, self.cold):
            parts = [s[rank] for s in (*sets, self.cold) if rank in s]
            merged[rank] = (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        return intervals.cover_within(merged, self.windows) - self.base


def _drives_launches(frames: pd.DataFrame, issuing: pd.DataFrame) -> np.ndarray:
    """Which Python frames have a launching op or launch call running inside them on their thread:
    their own time is the Python that issues GPU work (a module's forward), not Python doing work of
    its own (an environment step, a tokenizer)."""
    out = np.zeros(len(frames), dtype=bool)
    if frames.empty or issuing.empty:
        return out
    f_thread, i_thread = thread_codes(frames), thread_codes(issuing)
    f_start = frames["ts_us"].to_numpy(dtype=np.float64)
    f_end = f_start + frames["dur_us"].to_numpy(dtype=np.float64)
    i_start = issuing["ts_us"].to_numpy(dtype=np.float64)
    for code in np.unique(f_thread):
        starts = np.sort(i_start[i_thread == code])
        rows = np.flatnonzero(f_thread == code)
        out[rows] = np.searchsorted(starts, f_end[rows], side="left") > np.searchsorted(starts, f_start[rows], side="left")
    return out


def host_work(trace, host: pd.DataFrame, links: pd.DataFrame | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows of ``host`` that are host work (ops and runtime calls, ``ProfilerStep#`` windows
    left out) and which of them issue GPU work (``launching_ops``; ``links``: ``trace.launches()``)."""
    work = host[host["cat"].isin(HOST_WORK_CATEGORIES) & ~starts_with(host["name"], STEP_PREFIX)]
    return work, launching_ops(trace, work, links)


def working_frames(trace) -> pd.DataFrame:
    """The Python frames (``python_function``) that may hold Python at work: every frame but the loop's. A frame
    that spans a whole step window of its rank (``<module>``, ``main()``, ``train()`` around the profiled steps) is
    the loop's: time under it that no deeper event covers is untraced, not Python working or issuing GPU work
    (a frame spanning the loop with nothing traced inside it for milliseconds says nothing of what ran there).
    Computed once per trace (shared)."""
    return trace.derived("working_frames", _working_frames)


def _working_frames(trace) -> pd.DataFrame:
    ev = trace.events
    frames = ev[(ev["ph"] == "X").to_numpy() & (ev["cat"] == "python_function").to_numpy()]
    if frames.empty:
        return frames
    steps = trace.steps
    loop = np.zeros(len(frames), dtype=bool)
    ranks = frames["rank"].to_numpy()
    start = frames["ts_us"].to_numpy(dtype=np.float64)
    end = start + frames["dur_us"].to_numpy(dtype=np.float64)
    for rank in np.unique(ranks):
        mine = steps[(steps["rank"] == rank).to_numpy()].sort_values("start_us")
        if mine.empty:
            continue
        w_start, w_end = mine["start_us"].to_numpy(dtype=np.float64), mine["end_us"].to_numpy(dtype=np.float64)
        at = ranks == rank
        k = np.searchsorted(w_start, start[at], side="left")
        inside = k < len(w_start)
        hit = np.zeros(at.sum(), dtype=bool)
        hit[inside] = w_end[k[inside]] <= end[at][inside]
        loop[at] = hit
    return frames[~loop]


def launching_ops(trace, work: pd.DataFrame, links: pd.DataFrame | None = None) -> np.ndarray:
    """Rows of ``work`` that issue GPU work: launch calls (runtime and driver calls linked to a GPU
    event, or named as launches) and the ops that enclose one. ``links``: ``trace.launches()`` (of
    any GPU-side categories) when the caller has it."""
    calls = work[work["cat"].isin(LAUNCH_CATEGORIES)]
    links = trace.launches(GPU_CATEGORIES) if links is None else links[links["gpu_cat"].isin(GPU_CATEGORIES)]
    linked = calls.index.isin(links["cpu_index"].to_numpy())
    named = launch_mask(calls["name"]) if len(calls) else linked
    return work.index.isin(with_ancestors(trace.events["parent"], calls.index[linked | named]))


def host_compute_ops(trace, host: pd.DataFrame, nested: pd.DataFrame, in_steps: np.ndarray, *,
                     links: pd.DataFrame | None = None, work: tuple | None = None) -> pd.DataFrame:
    """The cpu_ops that launched no GPU work and are not inside another such op (at the top, or
    directly inside an op that launches), inside the windows (``in_steps``: a mask over ``host``),
    by name: ``name``, ``calls``, ``total_us``, most time first. ``links``: ``trace.launches()`` and
    ``work``: ``host_work(trace, host)`` when the caller has them."""
    work, issuing = host_work(trace, host, links) if work is None else work
    enclosing = nested["op"].reindex(work.index).to_numpy()
    outer = (enclosing < 0) | np.isin(enclosing, work.index[issuing])
    keep = (work["cat"] == "cpu_op").to_numpy() & outer & ~issuing \
        & pd.Series(in_steps, index=host.index).reindex(work.index).to_numpy()
    ops = work[keep]
    table = ops.groupby("name", observed=True, sort=False)["dur_us"].agg(calls="size", total_us="sum").reset_index()
    return table.sort_values("total_us", ascending=False, ignore_index=True)


def _less(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Intervals (rank, ts_us, dur_us) of the union of ``a`` less the union of ``b``, thread by thread."""
    if a.empty:
        return _empty()
    a_thread, b_thread = thread_codes(a), thread_codes(b)
    a_start, b_start = a["ts_us"].to_numpy(dtype=np.float64), b["ts_us"].to_numpy(dtype=np.float64)
    a_end, b_end = a_start + a["dur_us"].to_numpy(dtype=np.float64), b_start + b["dur_us"].to_numpy(dtype=np.float64)
    ranks = a["rank"].to_numpy()
    parts = []
    for code in np.unique(a_thread):
        mine, other = a_thread == code, b_thread == code
        s, e = intervals.subtract(a_start[mine], a_end[mine], b_start[other], b_end[other])
        parts.append(pd.DataFrame({"rank": int(ranks[mine][0]), "ts_us": s, "dur_us": e - s}))
    return pd.concat(parts, ignore_index=True)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"rank": pd.Series(dtype=np.int64), "ts_us": pd.Series(dtype=np.float64),
                         "dur_us": pd.Series(dtype=np.float64)})
