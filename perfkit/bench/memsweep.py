"""Peak memory against problem size: measure it, fit a growth line, predict where a budget runs out.

``memory_sweep(run, sizes)`` calls ``run(size)`` once per size, smallest first, and records the
peak memory each call allocates on top of what was live before it. ``warmup`` calls at the
smallest size are measured first and dropped: lazy initialization (and the profiler's own
start-up, ~66 MB on the first CPU session) would otherwise be billed to the first point.

* CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus
  ``memory_allocated`` before the call (the caching allocator's count of tensor bytes). The
  reserved peak (``max_memory_reserved``, what fragmentation turns into an out-of-memory error)
  is kept beside it.
* CPU: torch's CPU allocator as the profiler sees it (``torch.profiler`` with
  ``profile_memory=True`` reports every allocation and free of c10's CPU allocator with its
  signed size; the peak is the largest running sum) plus ``tracemalloc``'s peak for the Python
  heap (numpy arrays, Python objects). The CPU peak is an upper bound when both peaks fall at
  different times. Why the profiler: benchmarks/bench_memsweep.py measures a planted buffer of
  2,048 bytes per sample (1 GiB at 524,288 samples). The profiler reads 2,048.0 B/sample in
  process; tracemalloc 0 (c10 allocates outside Python's allocator); the process's RSS
  high-water mark 0 (torch's import already set it higher); RSS sampled every 1 ms 2,230
  (misses calls shorter than the interval); RSS in a fresh subprocess per size 2,048.0, but at
  ~2 s per size and only for code importable in a child.

Growth: ``perfkit.stats.fit_slope`` (the least-squares line with a t-based slope CI
that the leak hunt's growth rates also come from) of peak bytes on ``size ** power``. The budget
runs out at ``((budget - intercept) / slope) ** (1 / power)``, with a range from the slope's CI.
"""
from __future__ import annotations

import math
import time
import tracemalloc
from dataclasses import dataclass, fields, replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..device import is_cuda, resolve_device, synchronize
from ..errors import ParameterError, PerfkitError
from ..results import Finding, findings_frame, html_section, html_table, html_warnings, rank_findings
from ..stats import SlopeFit, fit_slope
from ..workloads.base import check_int
from ..workloads.registry import make_workload, workload_module

# Below this r2 the line does not describe the growth and the prediction is not to be trusted.
MIN_R2 = 0.98
# Predictions this many times beyond the largest measured size are flagged as extrapolations.
EXTRAPOLATION_WARN = 10.0
_MEMORY_EVENT = "[memory]"


@dataclass(frozen=True)
class MemoryPoint:
    """One measured size. Bytes are allocated on top of what was live before the call:
    ``peak_bytes`` (what the fit uses) = ``allocator_bytes`` (torch's allocator, CPU or CUDA)
    + ``python_bytes`` (tracemalloc peak, CPU only); ``reserved_bytes`` is CUDA's reserved peak."""

    size: float
    peak_bytes: int
    allocator_bytes: int
    python_bytes: int = 0
    reserved_bytes: int | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class MemorySweep:
    """Peak memory per size, the fitted line ``peak = intercept + slope * size ** power`` and the
    size at which ``budget_bytes`` runs out. ``oom_size`` is the first size that ran out of
    memory during the sweep (None if none did)."""

    points: tuple[MemoryPoint, ...]
    fit: SlopeFit | None
    power: float
    budget_bytes: float
    budget_source: str
    device: str
    method: str
    label: str = "size"
    oom_size: float | None = None
    warnings: tuple[str, ...] = ()

    @property
    def sizes(self) -> tuple[float, ...]:
        return tuple(p.size for p in self.points)

    @property
    def bytes_per_unit(self) -> float:
        """Fitted growth in bytes per unit of ``size ** power`` (NaN without a fit)."""
        return self.fit.slope if self.fit else math.nan

    def bytes_at(self, size: float) -> float:
        """Fitted peak bytes at ``size`` (NaN without a fit)."""
        return self.fit.intercept + self.fit.slope * float(size) ** self.power if self.fit else math.nan

    def size_at(self, budget_bytes: float) -> float:
        """Size whose fitted peak equals ``budget_bytes``; inf when memory does not grow."""
        return self._solve(budget_bytes, self.fit.slope) if self.fit else math.nan

    @property
    def predicted_size(self) -> float:
        """Size at which ``budget_bytes`` runs out (fitted); inf when memory does not grow."""
        return self.size_at(self.budget_bytes)

    @property
    def predicted_size_ci(self) -> tuple[float, float]:
        """Range of ``predicted_size`` from the slope's confidence interval (steeper -> smaller)."""
        if not self.fit:
            return (math.nan, math.nan)
        return (self._solve(self.budget_bytes, self.fit.high), self._solve(self.budget_bytes, self.fit.low))

    def _solve(self, budget: float, slope: float) -> float:
        if slope <= 0:
            return math.inf
        return max(0.0, (budget - self.fit.intercept) / slope) ** (1.0 / self.power)

    @property
    def extrapolation(self) -> float:
        """predicted_size / the largest size measured (above 1: beyond the data)."""
        top = max(self.sizes, default=0.0)
        return self.predicted_size / top if top > 0 else math.nan

    def to_frame(self) -> pd.DataFrame:
        """One row per size: size, peak_bytes, allocator_bytes, python_bytes, reserved_bytes,
        fitted_bytes, seconds."""
        rows = [{"size": p.size, "peak_bytes": p.peak_bytes, "allocator_bytes": p.allocator_bytes,
                 "python_bytes": p.python_bytes, "reserved_bytes": p.reserved_bytes,
                 "fitted_bytes": self.bytes_at(p.size), "seconds": p.seconds} for p in self.points]
        return pd.DataFrame(rows, columns=["size", "peak_bytes", "allocator_bytes", "python_bytes",
                                           "reserved_bytes", "fitted_bytes", "seconds"])

    def summary(self) -> dict:
        low, high = self.predicted_size_ci
        return {"label": self.label, "device": self.device, "method": self.method, "points": len(self.points),
                "bytes_per_unit": self.bytes_per_unit, "power": self.power,
                "intercept_bytes": self.fit.intercept if self.fit else math.nan,
                "r2": self.fit.r2 if self.fit else math.nan, "budget_bytes": self.budget_bytes,
                "predicted_size": self.predicted_size, "ci_low": low, "ci_high": high,
                "extrapolation": self.extrapolation, "oom_size": self.oom_size}

    @property
    def findings(self) -> tuple[Finding, ...]:
        return rank_findings(_findings(self))

    def __repr__(self) -> str:
        low, high = self.predicted_size_ci
        return (f"MemorySweep({self.label}: {_fmt_bytes(self.bytes_per_unit)}/unit, budget "
                f"{_fmt_bytes(self.budget_bytes)} runs out at {self.predicted_size:,.4g} "
                f"[{low:,.4g}, {high:,.4g}], {len(self.points)} points on {self.device})")

    def _repr_html_(self) -> str:
        return html_section(f"Memory vs {self.label} ({self.method})", html_table(pd.DataFrame([self.summary()])),
                            html_table(self.to_frame()), html_table(findings_frame(self.findings)),
                            html_warnings(self.warnings))


def memory_sweep(run: Callable[[float], object], sizes: Sequence[float], *, device: str = "auto",
                 budget_bytes: float | None = None, power: float = 1.0, warmup: int = 1,
                 python_heap: bool = True, confidence: float = 0.95, label: str = "size") -> MemorySweep:
    """Measure the peak memory of ``run(size)`` at each of ``sizes`` and fit its growth.

    ``device`` picks the allocator read (see the module docstring); ``budget_bytes`` defaults to
    the memory free at the start (CUDA: ``mem_get_info`` free plus this process's cached
    blocks; CPU: psutil's available RAM). ``power``: memory is modelled as linear in
    ``size ** power``. ``python_heap``: add tracemalloc's peak on CPU (slows Python-heavy code).
    A size that runs out of memory stops the sweep and is kept as ``oom_size``. Raises
    ParameterError for fewer than 3 distinct positive sizes or bad knobs, PerfkitError when a
    profiler is already running on CPU.
    """
    grid = _check(run, sizes, power, warmup, budget_bytes)
    dev = resolve_device(device)
    budget, source = (float(budget_bytes), "given") if budget_bytes is not None else default_budget(dev)
    measure = _cuda_peak if is_cuda(dev) else _cpu_peak
    for _ in range(warmup):  # measured and dropped: the first profiler session allocates too
        measure(lambda: run(grid[0]), grid[0], dev, python_heap)
    points, oom = _measure_all(run, grid, measure, dev, python_heap)
    fit = fit_slope([p.size ** power for p in points], [p.peak_bytes for p in points], confidence) \
        if len(points) >= 3 else None
    method = "cuda max_memory_allocated" if is_cuda(dev) else (
        "torch profiler CPU allocator" + (" + tracemalloc" if python_heap else ""))
    sweep = MemorySweep(tuple(points), fit, float(power), budget, source, dev, method, label, oom)
    return _with_warnings(sweep)


def _check(run, sizes, power: float, warmup: int, budget_bytes) -> list[float]:
    if not callable(run):
        raise ParameterError("memory_sweep(run, sizes): run must be a callable taking one size, "
                             "e.g. lambda n: planner(samples=n).step()")
    try:
        grid = sorted({float(s) for s in sizes})
    except (TypeError, ValueError):
        raise ParameterError(f"sizes={sizes!r}: pass numbers, e.g. [256, 512, 1024, 2048]") from None
    if len(grid) < 3 or grid[0] <= 0 or not all(math.isfinite(s) for s in grid):
        raise ParameterError(f"sizes={sizes!r}: need at least 3 distinct positive, finite sizes to fit a line")
    if not (isinstance(power, (int, float)) and math.isfinite(power) and power > 0):
        raise ParameterError(f"power={power!r}: must be a positive number (1: memory linear in size)")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ParameterError(f"warmup={warmup!r}: pass an int >= 0")
    if budget_bytes is not None and not (math.isfinite(float(budget_bytes)) and float(budget_bytes) > 0):
        raise ParameterError(f"budget_bytes={budget_bytes!r}: must be a positive number of bytes (e.g. 2**30)")
    return [int(s) if float(s).is_integer() else s for s in grid]


def default_budget(device: str) -> tuple[float, str]:
    """(bytes, how it was found): memory free for growth on ``device`` right now."""
    if is_cuda(device):
        import torch

        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return float(free + cached), "free CUDA memory (mem_get_info) plus this process's cached blocks"
    import psutil

    return float(psutil.virtual_memory().available), "available RAM (psutil)"


def _measure_all(run, grid, measure, device: str, python_heap: bool):
    points: list[MemoryPoint] = []
    for size in grid:
        try:
            points.append(measure(lambda: run(size), size, device, python_heap))
        except MemoryError:
            return points, size
        except RuntimeError as exc:  # torch.OutOfMemoryError is a RuntimeError
            if "out of memory" not in str(exc).lower():
                raise
            _release(device)
            return points, size
    return points, None


def _release(device: str) -> None:
    if is_cuda(device):
        import torch

        torch.cuda.empty_cache()


def _cuda_peak(call, size, device: str, python_heap: bool) -> MemoryPoint:
    import torch

    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    start = time.perf_counter()
    call()
    synchronize(device)
    seconds = time.perf_counter() - start
    peak = int(torch.cuda.max_memory_allocated(device) - before)
    return MemoryPoint(size, peak, peak, 0, int(torch.cuda.max_memory_reserved(device)), seconds)


def _cpu_peak(call, size, device: str, python_heap: bool) -> MemoryPoint:
    import torch
    from torch.profiler import ProfilerActivity, profile

    if torch._C._autograd._profiler_enabled():
        raise PerfkitError("memory_sweep on CPU reads torch's allocator through the profiler, and a "
                           "profiler is already running: call it outside torch.profiler.profile()")
    started = python_heap and not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        heap_before = tracemalloc.get_traced_memory()[0] if python_heap else 0
        tracemalloc.reset_peak()
        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            call()
        seconds = time.perf_counter() - start
        python = max(0, tracemalloc.get_traced_memory()[1] - heap_before) if python_heap else 0
    finally:
        if started:
            tracemalloc.stop()
    allocator = cpu_allocator_peak(prof.profiler.kineto_results.events())
    return MemoryPoint(size, allocator + python, allocator, python, None, seconds)


def cpu_allocator_peak(events) -> int:
    """Largest running sum of the signed byte counts of CPU ``[memory]`` profiler events, in
    time order: the most bytes allocated inside the profiled window and live at once. Frees
    of blocks allocated before the window carry no size in torch and do not lower it."""
    import torch

    cpu = torch._C._autograd.DeviceType.CPU
    mem = sorted(((e.start_ns(), e.nbytes()) for e in events
                  if e.name() == _MEMORY_EVENT and e.device_type() == cpu), key=lambda t: t[0])
    if not mem:
        return 0
    return int(max(0, np.cumsum([b for _, b in mem]).max()))


def workload_memory_sweep(workload: str, field: str, values: Sequence[int], *, variant: str | None = None,
                          steps: int = 1, device: str = "auto", overrides: dict | None = None,
                          **sweep_kw) -> MemorySweep:
    """``memory_sweep`` over one config field of a registered workload: each point builds the
    workload with ``field=value`` (on top of ``variant`` and ``overrides``), runs ``steps``
    steps and closes it, so weights, buffers and activations are all counted. Other keywords
    go to ``memory_sweep``. Raises ParameterError for an unknown workload, variant or field.
    """
    check_int("steps", steps)
    valid = [f.name for f in fields(workload_module(workload).Config)]
    if field not in valid:
        raise ParameterError(f"field={field!r} is not a config field of workload {workload!r}: "
                             f"valid fields are {', '.join(valid)}")
    config = dict(overrides or {})

    def run(value):
        with make_workload(workload, device, variant=variant, **{**config, field: int(value)}) as w:
            for _ in range(steps):
                w.step()

    return memory_sweep(run, values, device=device, label=field, **sweep_kw)


def _with_warnings(s: MemorySweep) -> MemorySweep:
    out = []
    if s.oom_size is not None:
        out.append(f"{s.label}={s.oom_size:,.6g} ran out of memory during the sweep; the sweep stopped there")
    if s.fit is None:
        out.append(f"only {len(s.points)} sizes measured: a growth line needs 3; start the sweep smaller")
    elif s.fit.r2 < MIN_R2:
        out.append(f"peak memory is not a straight line in {s.label}**{s.power:g} (r2={s.fit.r2:.3f} < {MIN_R2}): "
                   "the prediction is unreliable; try power=2, or sweep a size memory is proportional to")
    elif s.extrapolation > EXTRAPOLATION_WARN:
        out.append(f"the prediction extrapolates {s.extrapolation:,.0f}x beyond the largest {s.label} measured: "
                   "caches and fragmentation can make it optimistic; confirm with one run near it")
    if s.fit is not None and s.bytes_per_unit <= 0:
        out.append(f"peak memory does not grow with {s.label}: no budget limit on it was found")
    return replace(s, warnings=tuple(out))


def _findings(s: MemorySweep) -> list[Finding]:
    out = []
    if s.oom_size is not None:
        out.append(Finding("high", f"out of memory at {s.label}={s.oom_size:,.6g}",
                           {"largest_measured": max(s.sizes, default=math.nan)},
                           f"keep {s.label} below the predicted limit, or cut the memory per unit",
                           "an out-of-memory error during the sweep"))
    if s.fit is not None and s.bytes_per_unit > 0:
        low, high = s.predicted_size_ci
        out.append(Finding("info", f"a {_fmt_bytes(s.budget_bytes)} budget runs out at {s.label}="
                           f"{s.predicted_size:,.0f} [{low:,.0f}, {high:,.0f}]",
                           {"bytes_per_unit": s.bytes_per_unit, "intercept_bytes": s.fit.intercept,
                            "r2": s.fit.r2, "budget": s.budget_source},
                           "", f"least-squares line of peak bytes on {s.label}**{s.power:g}, "
                           f"{s.fit.confidence:.0%} slope CI"))
    return out


def _fmt_bytes(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    for scale, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(value) >= scale:
            return f"{value / scale:,.3g} {suffix}"
    return f"{value:,.0f} B"
