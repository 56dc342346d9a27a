"""Each host thread's timeline cut into segments, with flags saying what each one is: the host side of the
dependency graph ``graph.rank_graphs`` builds and ``replay`` runs forward.

A thread's timeline runs from its first traced event to its last. It is cut at every point the replay or a
fix needs: the start and end of every launch and blocking call, of its host work (ops, runtime calls, Python
frames, DataLoader ranges), compile spans, warm-up calls, the step windows and the points other threads wait
for. Each piece between two cuts (a **segment**) is one kind of time, given by bits of ``flags`` (``F_*``),
tested at its midpoint:

* ``F_TRACED``: inside traced host work; outside it the time is untraced (Python in a trace without stacks,
  code outside every op);
* ``F_LAUNCH``: inside a launch call (a runtime or driver call linked to GPU work, or named as a launch);
* ``F_ISSUING``: the host issuing GPU work: inside a launch call, inside an op that launches (less the ops in
  it that launch nothing), in the gap between two launch calls of the thread at most
  ``rules.DENSE_LAUNCH_GAP_US`` apart (the Python around eager ops, Triton's launcher), or in Python with no op
  under it inside a frame during which the rank launches GPU work (on any of its threads: ``loss.backward()``'s
  frames drive the autograd engine's launches; a module's forward, the optimizer's wrapper), between two of the
  rank's launch calls at most ``ISSUING_PYTHON_US`` apart; Python further from a launch (``<module>`` or ``main``
  with nothing traced for milliseconds, a preprocessing loop of small CPU ops) is the host's own time;
* ``F_OWN``: inside an op that launches nothing (host compute: CPU tensors, allocations, bookkeeping);
* ``F_BLOCKING``: inside a blocking call (``lanes.host_blocking``); ``F_PAGEABLE``: inside one that copies
  from pageable memory to the device (its own copy is what it waits for);
* ``F_LOADER``: inside a DataLoader ``__next__`` range; ``F_COMPILE``: inside a compile span;
* ``F_WARMUP``: inside a warm-up call or a cold first step (``warmup.warmup_events``); ``steady`` holds the
  segment's length at the call's later median (what it costs once warm);
* ``F_OPTIMIZER``: inside the optimizer's ``Optimizer.step#...`` or ``Optimizer.zero_grad#...`` range (torch's
  profiler records them around every optimizer call).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...trace import intervals
from ...trace.intervals import Coverage
from ...trace.names import starts_with
from ...trace.threads import event_threads, thread_codes
from ..compile import compile_spans
from ..host_ops import DATALOADER_PREFIX
from .layers import host_work, working_frames
from .rules import DENSE_LAUNCH_GAP_US

F_TRACED, F_LAUNCH, F_ISSUING, F_OWN, F_BLOCKING, F_PAGEABLE, F_LOADER, F_COMPILE, F_WARMUP, F_OPTIMIZER = (
    1 << k for k in range(10))
OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
# Python between two launches at most this far apart is the framework issuing them (nn.Module's __call__,
# autograd's and the optimizer's wrappers: 5-300 us a call in the eager H200 MLPs of data/traces/gpu); further
# apart, it is code of its own (perfkit rule).
ISSUING_PYTHON_US = 1000.0


@dataclass(frozen=True)
class ThreadSets:
    """Interval sets of one rank, each ``{thread code: (starts, ends)}``: the inputs of the flags (module doc).
    ``warm`` also carries each warm-up interval's steady/recorded length ratio (``warm_scale``)."""

    issuing: dict
    own: dict
    loader: dict
    compiling: dict
    warm: dict
    warm_scale: dict
    pageable: dict
    optimizer: dict
    driving: dict
    launch_times: tuple
    dense: dict


def thread_sets(trace, rank: int, threads, host: pd.DataFrame, links: pd.DataFrame, warmup: pd.DataFrame,
                pageable_calls: pd.Index) -> ThreadSets:
    """The interval sets of ``rank``'s threads (``threads``: their codes). ``host``: host events (``host_ops.host_events``), ``links``:
    ``trace.launches()``, ``warmup``: ``warmup.warmup_events(trace)``, ``pageable_calls``: labels of the
    blocking calls that copy from pageable memory."""
    mine = host[(host["rank"] == rank).to_numpy()]
    work, issuing = host_work(trace, mine, links)
    ops = (work["cat"] == "cpu_op").to_numpy()
    launching, own = work[issuing & ops], work[~issuing & ops]
    calls = work[issuing & ~ops]
    own_sets = _by_thread(own)
    issue = _less(_by_thread(pd.concat([launching, calls])), own_sets)
    gaps = _dense_gaps(calls)
    frames = working_frames(trace)
    frames = frames[(frames["rank"] == rank).to_numpy()]
    drives = _during_launches(frames, work[issuing])
    driving = _less(_by_thread(frames[drives]), _by_thread(frames[~drives]))
    starts = calls["ts_us"].to_numpy(dtype=np.float64)
    order = np.argsort(starts, kind="stable")
    launch_times = (starts[order], (starts + calls["dur_us"].to_numpy(dtype=np.float64))[order])
    loader = _by_thread(mine[starts_with(mine["name"], DATALOADER_PREFIX)])
    spans = compile_spans(trace)
    compiling = _by_thread(spans[(spans["rank"] == rank).to_numpy()])
    warm_rows = warmup[(warmup["rank"] == rank).to_numpy()] if len(warmup) else warmup
    scale = _warm_sets(trace, warm_rows, threads)
    warm = {code: (s, e) for code, (s, e, _) in scale.items()}
    pageable = _by_thread(host.loc[host.index.intersection(pageable_calls)])
    names = mine["name"]
    optimizer = _by_thread(mine[starts_with(names, OPTIMIZER_PREFIXES)])
    return ThreadSets(issuing=issue, own=own_sets, loader=loader, compiling=compiling, warm=warm,
                      warm_scale=scale, pageable=pageable, optimizer=optimizer, driving=driving,
                      launch_times=launch_times, dense=gaps)


def cut_thread(lane, code: int, sets: ThreadSets, points: np.ndarray, launch_calls: tuple,
               span: tuple | None = None) -> dict:
    """Segments of one thread (module doc) as arrays ``start``, ``end``, ``flags``, ``steady``. ``lane``: its
    ``lanes.HostLane``; ``points``: more cut points (step boundaries, points other threads wait for);
    ``launch_calls``: (starts, ends) of the thread's launch calls, each kept as its own segment; ``span``: a
    (first, last) the timeline must cover as well (the main thread's step windows: the untraced time at a
    step's edges is the step's)."""
    covers = [lane.work, lane.blocking]
    extra = [getattr(sets, name).get(code, _none()) for name in ("issuing", "own", "loader", "compiling", "warm",
                                                                 "pageable", "optimizer")]
    first, last = _span(lane, launch_calls)
    if span is not None:
        first, last = min(first, span[0]), max(last, span[1])
    cuts = [np.array([first, last]), points, *launch_calls, lane.block_start, lane.block_end]
    cuts += [c.starts for c in covers] + [c.ends for c in covers] + [x for pair in extra for x in pair]
    cuts += list(sets.dense.get(code, _none()))
    cut = np.unique(np.clip(np.concatenate([np.asarray(c, dtype=np.float64) for c in cuts]), first, last))
    start, end = cut[:-1], cut[1:]
    mid = (start + end) / 2
    flags = np.zeros(len(mid), dtype=np.int64)
    tests = [(lane.work, F_TRACED), (Coverage.of(*launch_calls), F_LAUNCH), (lane.blocking, F_BLOCKING)]
    tests += [(Coverage.of(*pair), bit) for pair, bit in zip(
        extra, (F_ISSUING, F_OWN, F_LOADER, F_COMPILE, F_WARMUP, F_PAGEABLE, F_OPTIMIZER))]
    for cover, bit in tests:
        flags[cover.covers(mid)] |= bit
    flags[(flags & F_LAUNCH) > 0] |= F_ISSUING
    dense = Coverage.of(*sets.dense.get(code, _none())).covers(mid) & ((flags & F_TRACED) == 0)
    flags[dense] |= F_ISSUING
    flags[_issuing_python(start, end, flags, Coverage.of(*sets.driving.get(code, _none())), lane.ops,
                          sets.launch_times)] |= F_ISSUING
    return {"start": start, "end": end, "flags": flags,
            "steady": (end - start) * _warm_factor(sets.warm_scale.get(code), mid)}


def _during_launches(frames: pd.DataFrame, issuing: pd.DataFrame) -> np.ndarray:
    """Which frames have launching work of their rank (any thread) starting inside them."""
    if frames.empty or issuing.empty:
        return np.zeros(len(frames), dtype=bool)
    starts = np.sort(issuing["ts_us"].to_numpy(dtype=np.float64))
    f_start = frames["ts_us"].to_numpy(dtype=np.float64)
    f_end = f_start + frames["dur_us"].to_numpy(dtype=np.float64)
    return np.searchsorted(starts, f_end, side="left") > np.searchsorted(starts, f_start, side="left")


def _issuing_python(start, end, flags, driving, ops, launches: tuple) -> np.ndarray:
    """Segments of Python with no op under it, inside a frame during which the rank launches, between two of its
    launch calls (``launches``: starts and ends, by start) at most ``ISSUING_PYTHON_US`` apart (module doc)."""
    mid = (start + end) / 2
    python = ((flags & F_TRACED) > 0) & ((flags & (F_ISSUING | F_OWN | F_BLOCKING)) == 0) & ~ops.covers(mid)
    candidate = python & driving.covers(mid)
    l_start, l_end = launches
    if not candidate.any() or not len(l_start):
        return np.zeros(len(mid), dtype=bool)
    before = np.searchsorted(l_start, mid, side="right") - 1
    after = before + 1
    ok = (before >= 0) & (after < len(l_start))
    gap = np.where(ok, l_start[np.clip(after, 0, len(l_start) - 1)] - np.maximum.accumulate(l_end)[np.clip(before, 0, None)],
                   np.inf)
    return candidate & (gap <= ISSUING_PYTHON_US)


def _span(lane, launch_calls: tuple) -> tuple[float, float]:
    starts = [lane.work.starts[:1], launch_calls[0][:1], lane.block_start[:1]]
    ends = [lane.work.ends[-1:], launch_calls[1][-1:], lane.block_end[-1:]]
    return float(np.min(np.concatenate(starts))), float(np.max(np.concatenate(ends)))


def _warm_factor(scale, mid: np.ndarray) -> np.ndarray:
    """Per segment: the steady/recorded length ratio of the warm-up interval holding it, 1 outside them."""
    out = np.ones(len(mid))
    if scale is None or not len(scale[0]):
        return out
    starts, ends, ratio = scale
    k = np.searchsorted(starts, mid, side="right") - 1
    inside = (k >= 0) & (mid < ends[np.clip(k, 0, None)])
    out[inside] = ratio[k[inside]]
    return out


def _warm_sets(trace, rows: pd.DataFrame, threads) -> dict:
    """``{thread code: (starts, ends, steady ratio)}`` of the warm-up intervals: a warm-up call (on its thread)
    costs its later median once warm; a cold first step (label -1) costs its rank's later median step, on every
    thread of the rank."""
    if rows is None or rows.empty:
        return {}
    labels = rows["label"].to_numpy(dtype=np.int64)
    codes = np.where(labels >= 0, event_threads(trace)[np.clip(labels, 0, None)], -1)
    start = rows["ts_us"].to_numpy(dtype=np.float64)
    end = start + rows["dur_us"].to_numpy(dtype=np.float64)
    ratio = np.clip(rows["later_median_us"].to_numpy(dtype=np.float64)
                    / np.maximum(rows["dur_us"].to_numpy(dtype=np.float64), 1e-9), 0.0, 1.0)
    out = {}
    for code in threads:
        keep = (codes == code) | (labels < 0)
        if keep.any():
            order = np.argsort(start[keep], kind="stable")
            out[int(code)] = (start[keep][order], end[keep][order], ratio[keep][order])
    return out


def _by_thread(frame: pd.DataFrame) -> dict:
    """``{thread code: (starts, ends)}`` of a frame of events."""
    if frame.empty:
        return {}
    codes = thread_codes(frame)
    start = frame["ts_us"].to_numpy(dtype=np.float64)
    end = start + frame["dur_us"].to_numpy(dtype=np.float64)
    return {int(c): (start[codes == c], end[codes == c]) for c in np.unique(codes)}


def _less(a: dict, b: dict) -> dict:
    return {t: intervals.subtract(*pair, *b.get(t, _none())) for t, pair in a.items()}


def _dense_gaps(calls: pd.DataFrame) -> dict:
    """Per thread, the gaps between consecutive launch calls at most ``DENSE_LAUNCH_GAP_US`` long."""
    out = {}
    for code, (start, end) in _by_thread(calls).items():
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
        gap = s[1:] - e[:-1]
        keep = (gap > 0) & (gap <= DENSE_LAUNCH_GAP_US)
        out[code] = (e[:-1][keep], s[1:][keep])
    return out


def _none() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(0), np.zeros(0)


def host_point(seg: dict, thread: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(segment, at_end) of host times ``t`` on thread index ``thread``: the end of the segment ending at ``t``,
    else the start of the segment starting at ``t``; segment -1 where neither is (``t`` is no cut point)."""
    mine = np.flatnonzero(seg["thread"] == thread)
    t = np.asarray(t, dtype=np.float64)
    seg_out = np.full(len(t), -1, dtype=np.int64)
    at_end = np.ones(len(t), dtype=bool)
    if not len(mine):
        return seg_out, at_end
    ends, starts = seg["end"][mine], seg["start"][mine]
    k = np.searchsorted(ends, t, side="left")
    hit = (k < len(mine)) & (ends[np.clip(k, 0, len(mine) - 1)] == t)
    seg_out[hit] = mine[k[hit]]
    j = np.searchsorted(starts, t, side="left")
    first = ~hit & (j < len(mine)) & (starts[np.clip(j, 0, len(mine) - 1)] == t)
    seg_out[first] = mine[j[first]]
    at_end[first] = False
    return seg_out, at_end
