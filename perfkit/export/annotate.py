"""``annotate(trace_path, out)``: the original trace plus perfkit's findings, for Perfetto UI and
chrome://tracing.

The original events are kept byte for byte: perfkit's events are inserted at the start of the
``traceEvents`` array (the trace-event format does not order events), so nothing the profiler wrote
is re-encoded or lost. Added, all with ``cat`` "perfkit" in one process named "perfkit" (a pid the
trace does not use), following the trace-event format (Google, "Trace Event Format"):

* metadata (``ph`` "M"): ``process_name``, ``process_sort_index`` (first), ``thread_name`` per track;
* track "critical path" (per rank): one complete event (``ph`` "X") per path segment, named by kind,
  with ``args`` step, lane and the event it runs through;
* track "GPU gaps (GPU n)": one complete event per idle interval, named by class, with ``args``
  step, thread, function, file, line;
* track "findings": instant events (``ph`` "i", scope "t"): one per step (wall time, critical path
  by kind, GPU idle by class) and one per gap finding at its longest gap;
* counters (``ph`` "C"): "GPU busy %" per device over fixed time buckets, and "GPU queue length"
  (GPU work launched and not finished) per device at every change.

Timestamps are the trace's own microseconds, so the added tracks line up with the original ones.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

try:  # ISA-L's deflate: several times zlib's at a similar size, same gzip format
    from isal import igzip as gzip
except ImportError:  # pragma: no cover - a platform without isal wheels
    import gzip

from ..analysis.step.critical_path import KINDS, path_over
from ..analysis.step.gaps import CLASSES, gaps_over, gpu_gaps
from ..analysis.step.lanes import rank_timelines
from ..atomic import atomic_write, refuse_clobber
from ..errors import ParameterError, TraceError
from ..trace import load_trace
from ..trace.intervals import Coverage
from ..trace.loader.load import resolve_paths
from ..trace.loader.metadata import top_level_events_key
from ..trace.loader.stream import read_text
from ..trace.steps import step_windows
from ..workbook import perf_log_path

CATEGORY = "perfkit"
# Busy-% buckets: at least 10 us wide, at most ~5000 of them over the trace (enough to see each
# step's shape in Perfetto without a counter sample per kernel).
MIN_BUCKET_US, MAX_BUCKETS = 10.0, 5000
TRACKS = {"findings": 1, "critical path": 2}


@dataclass(frozen=True)
class AnnotateResult:
    """Where the annotated trace went and how many events of each kind were added."""

    path: Path
    added: dict
    warnings: tuple = ()  # what the loader set aside (the annotated file keeps every original event)

    @property
    def total_added(self) -> int:
        return int(sum(self.added.values()))

    def __repr__(self) -> str:
        return f"<AnnotateResult {self.path.name}: +{self.total_added:,} events {self.added}>"


def annotate(trace_path, out, *, use_cache: bool = True, keep: tuple = ()) -> AnnotateResult:
    """Write ``trace_path`` (one .json/.json.gz trace file) plus perfkit's tracks to ``out``
    (gzip-compressed when it ends in ``.gz``), atomically. Raises TraceError for an unreadable
    trace and ParameterError when ``trace_path`` is not a single file, or ``out`` is the input or one of
    the ``keep`` files (``(what, path)`` pairs: the perf log of the notebook that writes it)."""
    paths = resolve_paths(trace_path)
    if len(paths) != 1:
        raise ParameterError(f"{trace_path}: annotate writes one trace file at a time; pass one of "
                             f"{', '.join(p.name for p in paths[:3])}")
    source, out = paths[0], Path(out)
    if str(out) != "-":
        refuse_clobber(out, [("the input trace", source), *((what, path) for what, path in keep)])
    trace = load_trace(source, use_cache=use_cache)
    events = added_events(trace)
    text = read_text(source)
    parts = _splice(source, memoryview(text), orjson.dumps(events)[1:-1])
    atomic_write(out, lambda tmp: _write(tmp, parts, gz=out.name.endswith(".gz")), user_output=True)
    counts = pd.Series([e["ph"] for e in events]).value_counts().to_dict() if events else {}
    return AnnotateResult(path=out, added={str(k): int(v) for k, v in counts.items()}, warnings=tuple(trace.warnings))


def write_annotated(trace, mode: str, annotated_path: str | os.PathLike = "",
                    perf_log: str | os.PathLike = "") -> Path | None:
    """A notebook's ``annotated_path`` parameter: :func:`annotate` the loaded ``trace``'s one file to
    ``annotated_path`` and return where it went; None when no path is given. Raises ParameterError when a
    path is given for a live run (``mode`` "live": its trace file is gone) or a multi-file trace
    (annotate takes one file), or when it is the trace or the notebook's ``perf_log`` (its
    ``perf_log_path``; "" is the workbook's)."""
    if not annotated_path:
        return None
    if mode == "live":
        raise ParameterError("annotated_path: a live run's trace is not kept; record it with "
                             "perfkit.record_trace(workload, 'run.json.gz') and analyze it in trace mode")
    files = [Path(f.path) for f in trace.files]
    if len(files) != 1:
        raise ParameterError(f"annotated_path: annotate writes one trace file and this trace has {len(files)}; "
                             "run perfkit annotate on each rank's file")
    return annotate(files[0], annotated_path, keep=(("the perf log", perf_log_path(perf_log)),)).path


def added_events(trace) -> list[dict]:
    """perfkit's events for ``trace`` (see the module doc), metadata first."""
    pid = _free_pid(trace)
    windows, timelines = step_windows(trace), rank_timelines(trace)
    path = path_over(trace, windows, timelines)
    gaps = gaps_over(trace, windows, timelines) if trace.has_gpu_events else gpu_gaps(trace)
    tracks = dict(TRACKS)
    events = _path_events(path.segments, pid, tracks) + _gap_events(gaps, pid, tracks)
    events += _step_instants(path, gaps, pid) + _finding_instants(gaps, pid)
    if gaps.has_gpu:
        events += _busy_counters(timelines, pid) + _queue_counters(timelines, pid)
    return _metadata(pid, tracks) + events


def _free_pid(trace) -> int:
    pids = pd.to_numeric(pd.Series(trace.events["pid"].cat.categories.astype(str)), errors="coerce").dropna()
    return int(pids.max()) + 1 if len(pids) else 1


def _metadata(pid: int, tracks: dict) -> list[dict]:
    meta = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "perfkit"}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": -1}}]
    for name, tid in tracks.items():
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return meta


def _track(tracks: dict, name: str) -> int:
    return tracks.setdefault(name, max(tracks.values()) + 1)


def _path_events(segments: pd.DataFrame, pid: int, tracks: dict) -> list[dict]:
    many = segments["rank"].nunique() > 1
    tid = {r: _track(tracks, f"critical path rank {r}" if many else "critical path") for r in segments["rank"].unique()}
    cols = [segments[c].tolist() for c in ("rank", "step", "kind", "start_us", "end_us", "lane", "label")]
    return [{"ph": "X", "cat": CATEGORY, "name": kind, "pid": pid, "tid": tid[rank], "ts": start, "dur": end - start,
             "args": {"step": step, "lane": lane, "event": label}}
            for rank, step, kind, start, end, lane, label in zip(*cols)]


def _gap_events(gaps, pid: int, tracks: dict) -> list[dict]:
    g = gaps.gaps
    tid = {(r, d): _track(tracks, f"GPU gaps (rank {r} GPU {d})")
           for r, d in g[["rank", "device"]].drop_duplicates().itertuples(index=False)}
    cols = [g[c].tolist() for c in ("rank", "device", "step", "class", "start_us", "dur_us", "thread", "function",
                                    "file", "line")]
    return [{"ph": "X", "cat": CATEGORY, "name": cls, "pid": pid, "tid": tid[(rank, device)], "ts": start, "dur": dur,
             "args": {"step": step, "thread": thread, "function": function or None, "file": file or None,
                      "line": line if line >= 0 else None}}
            for rank, device, step, cls, start, dur, thread, function, file, line in zip(*cols)]


def _step_instants(path, gaps, pid: int) -> list[dict]:
    idle = gaps.steps.set_index(["rank", "step"]) if gaps.has_gpu and len(gaps.steps) else None
    out = []
    for row in path.steps.itertuples(index=False):
        kinds = {k: round(getattr(row, f"{k}_us"), 3) for k in KINDS}
        args = {"wall_us": row.wall_us, "critical_path_us": kinds, "bound_by": row.bound_by}
        if idle is not None and (row.rank, row.step) in idle.index:
            rec = idle.loc[(row.rank, row.step)]
            args["gpu_busy_us"] = float(rec["gpu_busy_us"])
            args["gpu_idle_us"] = {c: float(rec[f"{c}_us"]) for c in CLASSES}
        out.append({"ph": "i", "s": "t", "cat": CATEGORY, "pid": pid, "tid": TRACKS["findings"], "ts": row.start_us,
                    "name": f"step {row.step}: {row.wall_us / 1e3:.3f} ms, critical path mostly {row.bound_by}",
                    "args": args})
    return out


def _finding_instants(gaps, pid: int) -> list[dict]:
    return [{"ph": "i", "s": "t", "cat": CATEGORY, "pid": pid, "tid": TRACKS["findings"],
             "ts": f.evidence["longest_start_us"], "name": f.title,
             "args": {"severity": f.severity, "fix": f.fix, "evidence": f.evidence}} for f in gaps.findings]


def _busy_counters(timelines: dict, pid: int) -> list[dict]:
    out = []
    for tl in timelines.values():
        g = tl.gpu
        if not len(g["start"]):
            continue
        device = ((g["lane"] >> 32) & 0xFFFF) - 1
        lo, hi = float(g["start"].min()), float(g["end"].max())
        width = max(MIN_BUCKET_US, (hi - lo) / MAX_BUCKETS)
        edges = np.arange(lo, hi + width, width)
        for dev in np.unique(device):
            rows = device == dev
            busy = Coverage.of(g["start"][rows], g["end"][rows]).within(edges[:-1], edges[1:]) / width * 100.0
            keep = np.concatenate(([True], np.abs(np.diff(busy)) > 1e-9))
            series = f"GPU {dev}"
            out += [{"ph": "C", "cat": CATEGORY, "name": "GPU busy %", "pid": pid, "ts": t, "args": {series: v}}
                    for t, v in zip(edges[:-1][keep].tolist(), np.round(busy[keep], 3).tolist())]
    return out


def _queue_counters(timelines: dict, pid: int) -> list[dict]:
    """Launched-and-unfinished GPU work per device: +1 at each launch call's start, -1 at the end of its work."""
    out = []
    for tl in timelines.values():
        g = tl.gpu
        launched = g["launch_thread"] >= 0
        device = ((g["lane"] >> 32) & 0xFFFF) - 1
        for dev in np.unique(device[launched]):
            rows = launched & (device == dev)
            t = np.concatenate([g["launch_start"][rows], g["end"][rows]])
            step = np.concatenate([np.ones(rows.sum()), -np.ones(rows.sum())])
            order = np.lexsort((-step, t))
            times, level = t[order], np.cumsum(step[order])
            last = np.append(times[1:] != times[:-1], True)
            series = f"GPU {dev}"
            out += [{"ph": "C", "cat": CATEGORY, "name": "GPU queue length", "pid": pid, "ts": ts, "args": {series: v}}
                    for ts, v in zip(times[last].tolist(), level[last].astype(np.int64).tolist())]
    return out


def _splice(source: Path, text: memoryview, added: bytes) -> list:
    """Pieces of the original JSON with ``added`` (comma-separated event objects) first in its
    event array; the original bytes are sliced, never copied."""
    head = bytes(text[:4096])
    first = len(head) - len(head.lstrip())
    m = top_level_events_key(text, first) if head[first:first + 1] == b"{" else None
    if m is None:
        head = bytes(text[:4096]).lstrip()
        if not head.startswith(b"["):
            raise TraceError(source, "no traceEvents array found", "Annotate a trace written by torch.profiler")
        at = bytes(text[:4096]).index(b"[") + 1
    else:
        at = m.end()
    if not added:
        return [text]
    empty = bytes(text[at:at + 4096]).lstrip().startswith(b"]")
    return [text[:at], added, b"" if empty else b",", text[at:]]


def _write(tmp: str, parts: list, *, gz: bool) -> None:
    # gzip level 1: several times faster than the default on large traces, still several times smaller than JSON.
    with (gzip.open(tmp, "wb", compresslevel=1) if gz else open(tmp, "wb")) as fh:
        for part in parts:
            fh.write(part)
