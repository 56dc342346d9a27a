"""The dependency graph of each rank's timeline, which ``replay`` runs forward with the recorded durations.

The model is the critical path's (``critical_path`` module doc), written as edges so that it can run forward:

* **Host.** Each thread's timeline is cut into segments (``segments``). Segments between two points where the
  thread waits form a **run**; a run starts once the thread's previous run has ended and its dependencies are met,
  then takes the sum of its segments' lengths. A thread waits
  - at a **blocking call**, for the GPU work the call waits for: on the call's stream (every stream of the rank
    when the trace does not say which), the last work launched before or by the call, where that work ended
    before the call returned. The part of the call before that work ended has length 0 in the graph (it is the
    wait itself); the rest (the wake-up) keeps its length;
  - the **main thread**, where it waits while another thread runs ops (``lanes.RankTimeline.handoff``: the autograd
    engine's thread inside ``loss.backward()``): its segments in each such stretch (an **episode**: the hand-off
    within one gap of its own work) have length 0, and it goes on once every other thread active there reaches the
    episode's end;
  - **another thread**, at each stretch of work it starts outside an episode (and at its first inside one): it
    starts when the main thread reaches that point. Inside an episode its own gaps keep their length.
  The main thread's first run starts at its recorded time; untraced time between its events is a segment like
  any other, so it keeps its length.
* **GPU.** A kernel, copy or memset starts once the previous work on its stream has ended plus the gap between them,
  its launch call has reached the point that releases it (the call's return, or its start for work that began
  inside the call) plus the launch latency, and, when it started more than ``QUEUE_SLACK_US`` after both, the work
  on another stream it waited for (``lanes.other_stream``). The latency after the dependency that held it back in
  the recording is kept, unless it lasted ``gpu_edges.HELD_WAIT_US`` or more (after a launch, also at least
  ``LAUNCH_LATENCY_TIMES`` the rank's median launch latency): such work waited for something the trace does not
  show (work queued before the window, another process) and keeps its recorded start as a floor (``base``), so no
  fix moves it earlier; ``wait_lost`` says how long it waited. The latency after a dependency that did not hold it
  back is the rank's typical one, at most what was recorded. Work with no launch call in the trace (queued before
  the window) starts when it did.
* **Peers.** A collective lasts until its slowest peer arrives, and the trace shows one rank: it keeps its recorded
  length, its wait for the peers included. A fix is a change to the code every rank runs, so the peers save what
  this rank saves and the skew between them stays (a fix that only one rank needs is not one the replay models).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...trace.steps import full_step_windows
from ..host_ops import HOST_CATEGORIES, host_events
from ..sync_points.find import pageable_copy_calls
from .gpu_edges import gpu_edges
from .order import topological_order
from .lanes import CLOCK_SLACK_US, rank_timelines
from .segments import F_BLOCKING, F_TRACED, cut_thread, host_point, thread_sets
from .warmup import warmup_events

@dataclass(frozen=True, eq=False)
class RankGraph:
    """One rank's graph, every time in us. ``seg``: host segments, thread by thread in time order (``start``,
    ``end``, ``flags``, ``steady``, ``dur``: their length in the graph, ``thread``: index into ``threads``,
    ``run``, ``window``: row of ``windows`` or -1). ``runs``: ``thread``, ``first`` (first segment), ``base``
    (absolute start, -inf where a dependency decides). ``gpu``: the rank's GPU events in stream order (``start``,
    ``end``, ``dur``, ``lane``, ``kind``, ``label`` in ``trace.events``, ``prev``, ``gap``, ``launch_seg`` and
    ``launch_at_end`` (the host point that releases it, -1 for none; ``released_at_start``: 1 where that point is
    the launch call's start, the end of the segment before the call), ``launch_lat``, ``cross`` and
    ``cross_lat`` (the event on another stream it waits for), ``base``, ``window``: the window its launch lies
    in). ``waits``: a run starts after GPU event ``gpu`` ends plus ``lat``. ``hdeps``: a run starts after the
    host point (``seg``, ``at_end``) plus ``lat``. ``windows``: the rank's full step windows, with the points
    their boundaries map to. ``order``: a topological order of the nodes (runs, then GPU events offset by the
    number of runs). ``notes``: what the graph leaves out (waits the trace does not explain)."""

    rank: int
    main: int
    threads: tuple
    seg: dict
    runs: dict
    gpu: dict
    waits: dict
    hdeps: dict
    windows: pd.DataFrame
    order: np.ndarray
    typical: dict
    notes: dict = field(default_factory=dict)


def rank_graphs(trace) -> dict:
    """``{rank: RankGraph}`` for every rank with host events and a full step window (module doc), built once
    per trace (shared: transforms copy what they change)."""
    return trace.derived("rank_graphs", _rank_graphs)


def _rank_graphs(trace) -> dict:
    timelines = rank_timelines(trace)
    windows, _ = full_step_windows(trace)
    host = host_events(trace, HOST_CATEGORIES)
    links = trace.launches()
    warmup = warmup_events(trace, host=host, links=links)
    pageable = pageable_copy_calls(trace)
    out = {}
    for rank, tl in timelines.items():
        mine = windows[windows["rank"] == rank].reset_index(drop=True)
        if mine.empty or tl.main not in tl.hosts:
            continue
        sets = thread_sets(trace, rank, list(tl.hosts), host, links, warmup, pageable)
        g = build(rank, tl, sets, mine, _host_span(trace, rank))
        if g is not None:
            out[rank] = g
    return out


def _host_span(trace, rank: int) -> tuple | None:
    """(first, last) of the rank's steps that host events mark (``ProfilerStep#``, DataLoader or optimizer ranges;
    not a whole-trace window, which GPU work may widen past the host's)."""
    steps = trace.steps
    mine = steps[(steps["rank"] == rank).to_numpy() & (steps["source"] != "whole trace").to_numpy()]
    return (float(mine["start_us"].min()), float(mine["end_us"].max())) if len(mine) else None


def build(rank: int, tl, sets, windows: pd.DataFrame, span: tuple | None = None) -> RankGraph | None:
    """The graph of one rank's timeline ``tl`` (``lanes.RankTimeline``), its thread interval sets (``segments``)
    and its full step windows; ``span``: what the main thread's timeline covers at least. None where the host
    threads hold no time at all (every host event of zero duration): there is no host work to replay."""
    threads = (tl.main, *sorted(c for c in tl.hosts if c != tl.main))
    episodes = _episodes(tl)
    calls = _launch_calls(tl)
    blocks = {code: _block_deps(tl, tl.hosts[code]) for code in threads}
    parts, anchors = [], []
    for i, code in enumerate(threads[1:], start=1):
        seg = _cut(tl, code, sets, calls, blocks[code], episodes.ravel())
        keep = _op_activity(tl.hosts[code].ops, episodes, seg)
        seg = {k: v[keep] for k, v in seg.items()}
        parts.append((i, seg))
        anchors.append(seg["start"][_gap_before(seg)])
    points = np.concatenate([episodes.ravel(), windows["start_us"], windows["end_us"], *anchors])
    parts.insert(0, (0, _cut(tl, tl.main, sets, calls, blocks[tl.main], points, span)))
    seg = _segments(parts, blocks, threads, episodes)
    if not len(seg["start"]):
        return None
    shadows = [_shadows(seg, i, blocks[code]) for i, code in enumerate(threads)]
    runs, hdeps = _runs(seg, [np.concatenate([blocks[c]["start"], seg["start"][sh[1]]]) for c, sh in
                              zip(threads, shadows)], episodes)
    runs["shadow"] = np.isin(runs["first"], np.concatenate([sh[1] for sh in shadows]))
    gpu, notes, typical = gpu_edges(tl, seg, threads)
    waits = _waits(seg, runs, blocks, threads, gpu, shadows)
    win = _window_points(seg, windows)
    seg["window"] = _seg_windows(seg, win)
    gpu["window"] = _gpu_windows(gpu, seg, win)
    order = topological_order(seg, runs, gpu, waits, hdeps)
    return RankGraph(rank=rank, main=0, threads=threads, seg=seg, runs=runs, gpu=gpu, waits=waits, hdeps=hdeps,
                     windows=win, order=order, typical=typical, notes=notes)


# --- host side ----------------------------------------------------------------------------------------------

def _episodes(tl) -> np.ndarray:
    """(n, 2) array of the main thread's episodes: per gap of its own work, the span of the hand-off in it."""
    h = tl.handoff
    if not len(h.starts):
        return np.zeros((0, 2))
    gap = np.searchsorted(tl.hosts[tl.main].work.ends, h.starts, side="right")
    frame = pd.DataFrame({"gap": gap, "start": h.starts, "end": h.ends}).groupby("gap").agg(
        start=("start", "min"), end=("end", "max"))
    return frame[["start", "end"]].to_numpy(dtype=np.float64)


def _inside(episodes: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Which [start, end) lie inside an episode."""
    if not len(episodes):
        return np.zeros(len(start), dtype=bool)
    k = np.searchsorted(episodes[:, 0], start, side="right") - 1
    ok = k >= 0
    return ok & (end <= episodes[np.clip(k, 0, None), 1])


def _op_activity(ops, episodes: np.ndarray, seg: dict) -> np.ndarray:
    """The segments of a thread other than the main one that the graph keeps: those its ops (and runtime calls)
    cover, and inside each episode everything from its first op there to its last (its gaps there are the
    backward pass's own). A thread with no op (a Python thread, the profiler's) keeps nothing: its frames hold no
    work another thread waits for."""
    keep = ops.covers((seg["start"] + seg["end"]) / 2)
    for a, b in _op_spans(ops, episodes):
        keep |= (seg["start"] >= a) & (seg["end"] <= b)
    return keep


def _op_spans(ops, episodes: np.ndarray) -> list:
    """Per episode, the span from the thread's first op in it to its last (none where it runs no op there)."""
    out = []
    for a, b in episodes:
        lo, hi = np.searchsorted(ops.ends, a, side="right"), np.searchsorted(ops.starts, b, side="left")
        if hi > lo:
            out.append((max(float(ops.starts[lo]), a), min(float(ops.ends[hi - 1]), b)))
    return out


def _gap_before(seg: dict) -> np.ndarray:
    """Segments that do not start where the previous one ended (the first included)."""
    start = seg["start"]
    return np.concatenate(([True], start[1:] != seg["end"][:-1])) if len(start) else np.zeros(0, dtype=bool)


def _launch_calls(tl) -> dict:
    """``{thread code: (starts, ends)}`` of the launch calls linked to the rank's GPU events."""
    g = tl.gpu
    ok = g["launch_thread"] >= 0
    frame = pd.DataFrame({"t": g["launch_thread"][ok], "s": g["launch_start"][ok], "e": g["launch_end"][ok]})
    frame = frame.drop_duplicates()
    return {int(t): (f["s"].to_numpy(dtype=np.float64), f["e"].to_numpy(dtype=np.float64))
            for t, f in frame.groupby("t")}


def _block_deps(tl, lane) -> dict:
    """Per blocking call of a thread: ``start``, ``end``, ``ready`` (when the work it waits for ended, clipped to
    the call) and ``deps``: (call, GPU row) pairs (module doc)."""
    g = tl.gpu
    launched = np.where(g["launch_thread"] >= 0, g["launch_start"], -np.inf)
    starts, ends = lane.block_start.astype(np.float64), lane.block_end.astype(np.float64)
    pairs = []
    for code, (a, b) in tl.lanes.items():
        if b <= a:
            continue
        suffix_min = np.minimum.accumulate(launched[a:b][::-1])[::-1]
        want = (lane.block_lane < 0) | (lane.block_lane == code)
        last = a + np.searchsorted(suffix_min, starts, side="right") - 1
        ok = want & (last >= a)
        ok &= g["end"][np.clip(last, a, b - 1)] <= ends + CLOCK_SLACK_US
        pairs.append(np.column_stack([np.flatnonzero(ok), last[ok]]))
    deps = np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)
    ready = starts.copy()
    if len(deps):
        np.maximum.at(ready, deps[:, 0], g["end"][deps[:, 1]])
    return {"start": starts, "end": ends, "ready": np.minimum(ready, ends), "deps": deps.astype(np.int64)}


def _cut(tl, code: int, sets, calls: dict, block: dict, points, span=None) -> dict:
    none = (np.zeros(0), np.zeros(0))
    return cut_thread(tl.hosts[code], code, sets, np.concatenate([np.asarray(points, dtype=np.float64),
                                                                  block["ready"]]), calls.get(code, none), span)


def _segments(parts: list, blocks: dict, threads: tuple, episodes: np.ndarray) -> dict:
    """All threads' segments in one table, with ``dur``: 0 inside a blocking call before the work it waits for
    ended, and on the main thread inside an episode; the recorded length elsewhere."""
    out = {k: np.concatenate([p[k] for _, p in parts]) for k in ("start", "end", "flags", "steady")}
    out["thread"] = np.concatenate([np.full(len(p["start"]), i, dtype=np.int64) for i, p in parts])
    dur = out["end"] - out["start"]
    waiting = np.zeros(len(dur), dtype=bool)
    for i, code in enumerate(threads):
        b = blocks[code]
        mine = np.flatnonzero(out["thread"] == i)
        if len(b["start"]) and len(mine):
            k = np.searchsorted(b["start"], out["start"][mine], side="right") - 1
            inside = (k >= 0) & (out["end"][mine] <= b["ready"][np.clip(k, 0, None)])
            waiting[mine[inside & ((out["flags"][mine] & F_BLOCKING) > 0)]] = True
    main = out["thread"] == 0
    waiting |= main & _inside(episodes, out["start"], out["end"])
    out["dur"] = np.where(waiting, 0.0, dur)
    out["steady"] = np.where(waiting, 0.0, out["steady"])
    return out


def _runs(seg: dict, block_starts: list, episodes: np.ndarray) -> tuple[dict, dict]:
    """Runs (module doc) and the host dependencies of their starts: each blocking call starts a run (its wait);
    another thread's run after a gap waits for the main thread at that point; the main thread after an episode
    waits for every thread active in it. ``block_starts``: per thread index, its blocking calls' starts."""
    thread, start = seg["thread"], seg["start"]
    first_of_thread = np.concatenate(([True], thread[1:] != thread[:-1]))
    after_gap = first_of_thread | np.concatenate(([True], start[1:] != seg["end"][:-1]))
    new = after_gap.copy()
    for i, starts in enumerate(block_starts):
        new[_starting_at(seg, i, starts)] = True
    main = np.flatnonzero(thread == 0)
    if len(episodes):
        new[_starting_at(seg, 0, episodes[:, 1])] = True
    run_of = np.cumsum(new) - 1
    first = np.flatnonzero(new)
    base = np.full(len(first), -np.inf)
    run_thread = thread[first]
    base[first_of_thread[first] & (run_thread == 0)] = start[first][first_of_thread[first] & (run_thread == 0)]
    seg["run"] = run_of
    src, dst, lat = [], [], []
    anchored = after_gap[first] & (run_thread != 0)
    m_start, m_end = start[main], seg["end"][main]
    for r in np.flatnonzero(anchored):
        q = start[first[r]]
        at, offset = _main_point(q, episodes)
        k = np.searchsorted(m_end, at, side="left")
        if len(main) and m_start[0] < at and k < len(main) and m_end[k] == at:
            src.append(main[k]), dst.append(r), lat.append(offset)
        else:
            base[r] = q
    n_threads = len(block_starts)
    for e_start, e_end in episodes:
        at = _starting_at(seg, 0, [e_end])
        if not len(at):
            continue
        r_main = run_of[at[0]]
        for t in range(1, n_threads):
            mine = np.flatnonzero((thread == t) & (seg["end"] <= e_end) & (seg["end"] > e_start))
            if len(mine):
                src.append(mine[-1]), dst.append(r_main), lat.append(e_end - seg["end"][mine[-1]])
    runs = {"thread": run_thread, "first": first, "base": base}
    hdeps = {"run": np.asarray(dst, dtype=np.int64), "seg": np.asarray(src, dtype=np.int64),
             "at_end": np.ones(len(src), dtype=bool), "lat": np.asarray(lat, dtype=np.float64)}
    return runs, hdeps


def _starting_at(seg: dict, thread: int, t) -> np.ndarray:
    """Segments of thread index ``thread`` that start at one of the times ``t``."""
    mine = np.flatnonzero(seg["thread"] == thread)
    t = np.asarray(t, dtype=np.float64)
    if not len(mine) or not len(t):
        return np.zeros(0, dtype=np.int64)
    j = np.searchsorted(seg["start"][mine], t, side="left")
    ok = (j < len(mine)) & (seg["start"][mine][np.clip(j, 0, len(mine) - 1)] == t)
    return mine[j[ok]]


def _main_point(q: float, episodes: np.ndarray) -> tuple[float, float]:
    """The main-thread point another thread's run starting at ``q`` waits for, and the offset after it: the
    episode's start when ``q`` lies inside one (the main thread's time there has length 0), else ``q``."""
    if len(episodes):
        k = np.searchsorted(episodes[:, 0], q, side="right") - 1
        if k >= 0 and q < episodes[k, 1]:
            return float(episodes[k, 0]), float(q - episodes[k, 0])
    return float(q), 0.0


def _shadows(seg: dict, thread: int, block: dict) -> tuple[np.ndarray, np.ndarray]:
    """(call, segment) of the blocking calls of a thread directly followed by untraced time (module doc)."""
    ends = block["end"]
    after = _starting_at(seg, thread, ends)
    if not len(after):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    untraced = (seg["flags"][after] & F_TRACED) == 0
    calls = np.searchsorted(ends, seg["start"][after])
    return calls[untraced].astype(np.int64), after[untraced].astype(np.int64)


def _waits(seg: dict, runs: dict, blocks: dict, threads: tuple, gpu: dict, shadows: list) -> dict:
    """Each blocking call's run waits for its GPU dependencies (``_block_deps``): the wait ends when they end, at
    most a clock's slack later than the call's recorded return allows; its shadow (``_shadows``) waits for the
    same."""
    run, src, lat = [], [], []
    for i, code in enumerate(threads):
        b = blocks[code]
        first = np.flatnonzero(seg["thread"] == i)
        if not len(b["deps"]) or not len(first):  # no wait, or a thread with no segment (events of 0 us)
            continue
        j = np.searchsorted(seg["start"][first], b["start"][b["deps"][:, 0]], side="left")
        ok = j < len(first)
        seg_at = first[np.clip(j, 0, len(first) - 1)]
        waited = np.minimum(0.0, b["end"][b["deps"][:, 0]] - gpu["end"][b["deps"][:, 1]])
        run += seg["run"][seg_at[ok]].tolist()
        src += b["deps"][ok, 1].tolist()
        lat += waited[ok].tolist()
        calls, shadow_seg = shadows[i]
        shadow_of = dict(zip(calls.tolist(), shadow_seg.tolist()))
        for (call, gpu_row), w in zip(b["deps"].tolist(), waited.tolist()):
            if call in shadow_of:
                run.append(int(seg["run"][shadow_of[call]])), src.append(gpu_row), lat.append(w)
    return {"run": np.asarray(run, dtype=np.int64), "gpu": np.asarray(src, dtype=np.int64),
            "lat": np.asarray(lat, dtype=np.float64)}


# --- windows and order --------------------------------------------------------------------------------------

def _window_points(seg: dict, windows: pd.DataFrame) -> pd.DataFrame:
    """The windows with the main-thread points of their boundaries (``start_seg``/``start_at_end``,
    ``end_seg``/``end_at_end``; -1 where a boundary lies outside the main thread's span, as a whole-trace
    window widened to GPU work does)."""
    out = windows[["rank", "step", "start_us", "end_us", "dur_us"]].reset_index(drop=True).copy()
    for side in ("start", "end"):
        s, at_end = host_point(seg, 0, out[f"{side}_us"].to_numpy(dtype=np.float64))
        out[f"{side}_seg"], out[f"{side}_at_end"] = s, at_end
    return out


def _seg_windows(seg: dict, win: pd.DataFrame) -> np.ndarray:
    mid = (seg["start"] + seg["end"]) / 2
    return _locate(win, mid)


def _gpu_windows(gpu: dict, seg: dict, win: pd.DataFrame) -> np.ndarray:
    out = _locate(win, np.nan_to_num(gpu["launch_point"], nan=-np.inf))
    return np.where(gpu["launch_seg"] >= 0, out, -1)


def _locate(win: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    starts, ends = win["start_us"].to_numpy(dtype=np.float64), win["end_us"].to_numpy(dtype=np.float64)
    order = np.argsort(starts, kind="stable")
    k = np.searchsorted(starts[order], t, side="right") - 1
    ok = (k >= 0) & (t < ends[order][np.clip(k, 0, None)])
    return np.where(ok, order[np.clip(k, 0, None)], -1)
