"""Leak hunt: run a step function many times and decide whether memory grows with steps.

``hunt_leak(step)`` samples, every ``sample_every`` steps after a warm-up: process RSS
(psutil), CUDA allocated/reserved bytes (when the device is CUDA), the number of
gc-tracked Python objects (with a per-type count) and ``tracemalloc``'s current size. Each
series gets a least-squares slope with a t-based confidence interval, scaled to growth per
1,000 steps.

Verdict rule (thresholds are parameters, defaults below):

* deterministic series decide: ``tracemalloc_bytes`` (Python heap, numpy buffers),
  ``cuda_allocated_bytes`` and ``objects``. They do not move unless something is kept.
* "leak" when the CI lower bound of any of them is above its threshold;
  "no leak" when every CI upper bound is below its threshold and RSS does not grow
  confidently faster than ``rss_threshold_bytes``; otherwise "inconclusive".
* RSS is noisy (allocator caching, page reuse), so it is supporting evidence only; a
  confident RSS-only growth makes the verdict "inconclusive" with a finding.

Default thresholds, per 1,000 steps: 64 KiB of Python heap or CUDA allocated memory (a
leaked scalar CUDA tensor costs a 512 B allocator block, 500 KiB per 1,000 steps; a clean
tiny-MLP loop on CPU measures ~10 KiB), 100 objects (one leaked object per step is 1,000),
8 MiB of RSS (glibc arenas and page reuse move RSS by a few MiB in loops that keep nothing).

Measurement: after the warm-up every existing object is frozen (``gc.freeze()``, undone at
the end), so each sample's ``gc.collect()`` and type count walk only objects created since;
the collect keeps uncollected cyclic garbage from looking like growth. Object counts are
therefore counts of objects created after the warm-up. Note: CPU tensor storage is
invisible to tracemalloc (torch allocates it in C++); tensor *objects* show in the counts.

The result type and its findings are in ``leak_result``.
"""
from __future__ import annotations

import gc
import os
import time
import tracemalloc
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil

from ..device import is_cuda, resolve_device, synchronize
from ..errors import ParameterError
from .leak_result import COLUMNS, LeakResult, SeriesGrowth, is_user_line
from ..stats import fit_slope

PRIMARY = ("tracemalloc_bytes", "cuda_allocated_bytes", "objects")
UNITS = {c: "objects" if c == "objects" else "bytes" for c in COLUMNS[1:]}
DEFAULT_THRESHOLD_BYTES = 64 * 1024
DEFAULT_THRESHOLD_OBJECTS = 100
DEFAULT_RSS_THRESHOLD_BYTES = 8 * 1024 * 1024
# perfkit's own files: its harness and monitor thread allocate while a hunt runs, but never hold the user's leak
_PERFKIT = os.path.join(str(Path(__file__).resolve().parents[1]), "")
_WORKLOADS = os.path.join(_PERFKIT, "workloads", "")


def hunt_leak(step, *, steps: int = 300, warmup: int = 30, sample_every: int = 10, device: str = "auto",
              track_objects: bool = True, tracemalloc_frames: int = 1,
              threshold_bytes: float = DEFAULT_THRESHOLD_BYTES,
              threshold_objects: float = DEFAULT_THRESHOLD_OBJECTS,
              rss_threshold_bytes: float = DEFAULT_RSS_THRESHOLD_BYTES,
              confidence: float = 0.95, top: int = 10) -> LeakResult:
    """Call ``step()`` ``warmup`` + ``steps`` times and decide whether memory leaks.

    Thresholds are growth per 1,000 steps (bytes, objects); see the module docstring for the
    rule. ``top`` limits the growing types and lines tables. Raises ParameterError for
    non-positive counts, fewer than 3 samples, or a confidence outside (0, 1).
    """
    _check_params(steps, warmup, sample_every, tracemalloc_frames, confidence)
    dev = _device(device)
    thresholds = {**dict.fromkeys(COLUMNS[1:], threshold_bytes), "objects": threshold_objects,
                  "rss_bytes": rss_threshold_bytes}
    started_here = not tracemalloc.is_tracing()
    if started_here:
        tracemalloc.start(tracemalloc_frames)
    try:
        t0 = time.perf_counter()
        rec = _run(step, steps, warmup, sample_every, dev, track_objects)
        elapsed = time.perf_counter() - t0
    finally:
        if started_here:
            tracemalloc.stop()
    growth = tuple(g for name in COLUMNS[1:] if (g := _growth(rec.table, name, thresholds[name], confidence)))
    verdict, decided_by = _verdict(growth)
    warns = _warnings(rec, started_here)
    return LeakResult(verdict, decided_by, growth, tuple(map(tuple, rec.table.tolist())),
                      _top_types(rec.first_types, rec.last_types, top, threshold_objects * steps / 1000),
                      _top_lines(rec, top),
                      int(steps), int(warmup), int(sample_every), dev, elapsed, warns)


def _check_params(steps, warmup, sample_every, frames, confidence) -> None:
    if int(steps) < 1 or int(sample_every) < 1 or int(warmup) < 0:
        raise ParameterError(f"hunt_leak: steps={steps}, sample_every={sample_every} must be >= 1 "
                             f"and warmup={warmup} >= 0")
    if int(steps) >= 1 and int(sample_every) >= 1 and len(_marks(steps, sample_every)) < 3:
        raise ParameterError(f"hunt_leak: steps={steps} with sample_every={sample_every} gives fewer "
                             "than 3 samples; lower sample_every or run more steps")
    if int(frames) < 1:
        raise ParameterError(f"hunt_leak: tracemalloc_frames={frames} must be >= 1")
    if not 0 < confidence < 1:
        raise ParameterError(f"hunt_leak: confidence={confidence} must be in (0, 1)")


def _device(device: str) -> str:
    """Resolved device; "cpu" when torch is not installed (a pure-Python step)."""
    try:
        return resolve_device(device)
    except ImportError:
        if str(device) not in ("auto", "cpu"):
            raise ParameterError(f"hunt_leak: device={device!r} needs torch, which is not installed")
        return "cpu"


def _marks(steps, sample_every) -> list[int]:
    """Steps after which to sample: 0, every ``sample_every``, and the last step."""
    marks = list(range(0, int(steps) + 1, int(sample_every)))
    return marks + ([int(steps)] if marks[-1] != int(steps) else [])


@dataclass
class _Recording:
    table: np.ndarray
    first_types: Counter | None = None
    last_types: Counter | None = None
    marks: list = field(default_factory=list)
    proc: object = None
    first_snapshot: object = None
    last_snapshot: object = None
    froze: bool = True


def _run(step, steps, warmup, sample_every, device, track_objects) -> _Recording:
    """Warm up, set up the hunt's own bookkeeping, then freeze every object that exists
    (``gc.freeze``) so the per-sample ``gc.collect()`` and object count only walk objects
    created since, and step and sample."""
    for _ in range(int(warmup)):
        step()
    marks = _marks(steps, sample_every)
    rec = _Recording(np.full((len(marks), len(COLUMNS)), np.nan), marks=marks, proc=psutil.Process())
    _prime(rec)
    gc.collect()
    rec.first_snapshot = tracemalloc.take_snapshot()
    rec.froze = gc.get_freeze_count() == 0
    if rec.froze:
        gc.freeze()
    try:
        _sample_loop(step, rec, device, track_objects)
    finally:
        if rec.froze:
            gc.unfreeze()
    rec.last_snapshot = tracemalloc.take_snapshot()
    return rec


def _sample_loop(step, rec: _Recording, device: str, track_objects: bool) -> None:
    """Cyclic garbage is collected before each reading (it would otherwise pile up in the
    oldest generation and look like growth). The hunt's bookkeeping (table, first snapshot,
    type counts) exists at constant size from the first reading on, so it adds no growth."""
    done = 0
    for row, mark in enumerate(rec.marks):
        while done < mark:
            step()
            done += 1
        gc.collect()
        if track_objects:
            _count_objects(rec, row)
        _sample(rec.table[row], mark, rec.proc, device)


def _prime(rec: _Recording) -> None:
    """Run each bookkeeping call once before the freeze: the first ``Counter(map(...))`` fills
    ``abc``'s weakref caches and the first psutil call builds its own state; done later, those
    objects would show up as growth between the first two samples."""
    rec.proc.memory_info()
    rec.first_types = Counter()
    rec.first_types.update(Counter(map(type, ())))


def _count_objects(rec: _Recording, row: int) -> None:
    """Count gc-tracked objects by type. ``first_types`` was created before the freeze and the
    latest count is dropped before counting, so neither is in the count."""
    rec.last_types = None
    objs = gc.get_objects()
    rec.table[row, COLUMNS.index("objects")] = len(objs)
    counts = Counter(map(type, objs))
    del objs
    if row == 0:
        rec.first_types.update(counts)
    rec.last_types = counts


def _sample(out: np.ndarray, mark: int, proc, device: str) -> None:
    """Fill one row: step, RSS, tracemalloc size and (on CUDA) allocator bytes."""
    synchronize(device)
    out[0] = mark
    out[2] = tracemalloc.get_traced_memory()[0]
    out[1] = proc.memory_info().rss
    if is_cuda(device):
        import torch  # heavy and optional: only for a CUDA device
        out[3] = torch.cuda.memory_allocated(device)
        out[4] = torch.cuda.memory_reserved(device)


def _growth(table: np.ndarray, name: str, threshold: float, confidence: float) -> SeriesGrowth | None:
    col = table[:, COLUMNS.index(name)]
    if np.isnan(col).all():
        return None
    slope, lo, hi = growth_per_1000(table[:, 0], col, confidence=confidence)
    return SeriesGrowth(name, UNITS[name], slope, lo, hi, float(threshold), len(col))


def growth_per_1000(steps, values, *, confidence: float = 0.95) -> tuple[float, float, float]:
    """``stats.fit_slope`` of ``values`` against ``steps`` scaled to per 1,000 steps: (slope,
    low, high); NaN with fewer than 3 points or a single step value."""
    x, y = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0:
        return (float("nan"),) * 3
    fit = fit_slope(x, y, confidence=confidence)
    return fit.slope * 1000, fit.low * 1000, fit.high * 1000


def _verdict(growth: tuple[SeriesGrowth, ...]) -> tuple[str, str]:
    """Apply the rule in the module docstring; returns (verdict, deciding series)."""
    primary = [g for g in growth if g.series in PRIMARY]
    if not primary:
        return "inconclusive", "rss_bytes" if any(g.series == "rss_bytes" for g in growth) else ""
    growing = [g for g in primary if g.state == "growing"]
    if growing:
        return "leak", max(growing, key=lambda g: g.ci_low / g.threshold).series
    rss = next((g for g in growth if g.series == "rss_bytes"), None)
    if rss is not None and rss.state == "growing":
        return "inconclusive", "rss_bytes"
    if all(g.state == "flat" for g in primary):
        return "no leak", max(primary, key=lambda g: g.ci_high / g.threshold).series
    return "inconclusive", next(g.series for g in primary if g.state == "unclear")


def _top_types(first: Counter | None, last: Counter | None, top: int, floor: float = 1) -> tuple:
    """The ``top`` object types that grew by ``floor`` or more between the two counts (the objects threshold
    over the steps run: fewer is no per-step growth by the hunt's own rule, e.g. the one sample a system monitor
    thread keeps), biggest growth first: (module.qualname, first, last)."""
    if first is None or last is None:
        return ()
    diffs = [(f"{t.__module__}.{t.__qualname__}", first.get(t, 0), n) for t, n in last.items()
             if n - first.get(t, 0) >= max(floor, 1)]
    diffs.sort(key=lambda r: r[2] - r[1], reverse=True)
    return tuple(diffs[:top])


def _top_lines(rec: _Recording, top: int) -> tuple:
    """Growing allocation lines, the user's first (``is_user_line``), then the libraries', each group
    biggest first, leaving out tracemalloc's and perfkit's own (its harness, its system monitor thread;
    its reference workloads stand in for the user's loop and stay)."""
    if rec.first_snapshot is None or rec.last_snapshot is None:
        return ()
    skip = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__)]
    first = rec.first_snapshot.filter_traces(skip)
    last = rec.last_snapshot.filter_traces(skip)
    stats = [s for s in last.compare_to(first, "lineno") if s.size_diff > 0 and not _own(s.traceback[0].filename)]
    stats.sort(key=lambda s: not is_user_line(s.traceback[0].filename))  # stable: biggest first within each
    return tuple((f"{s.traceback[0].filename}:{s.traceback[0].lineno}", int(s.size_diff), int(s.count_diff))
                 for s in stats[:top])


def _own(filename: str) -> bool:
    """Whether ``filename`` is one of perfkit's own modules (not its reference workloads)."""
    return filename.startswith(_PERFKIT) and not filename.startswith(_WORKLOADS)


def _warnings(rec: _Recording, started_here: bool) -> tuple[str, ...]:
    out = []
    if len(rec.table) < 10:
        out.append(f"only {len(rec.table)} samples: the growth CIs are wide; run more steps or "
                   "sample more often (sample_every)")
    if not rec.froze:
        out.append("gc.freeze() was already in use, so object counts include every object in the "
                   "process and each sample walks all of them (slower)")
    if not started_here:
        out.append("tracemalloc was already tracing: its size includes allocations made before the hunt")
    return tuple(out)
