"""The rare slow step (``perfkit profile --trigger slow:1.5x --keep 3``, the callbacks' ``trigger=``).

Every step after ``wait`` is recorded in a profiler cycle of its own (the recorder's one-step schedule) and
offered here when it ends, with its time. A step whose time is ``factor`` times the running median of the
steps before it (once ``MIN_STEPS`` are timed) is written; the slowest ``keep`` are kept, a faster one
removed when a slower one comes. The first step within ``MEDIAN_BAND`` of the running median is written
once, as the baseline to compare the slow ones with (TraceLens's anomaly recipe: diff a slow step against
a typical one). Levanter's spec of a run's step times: min / median / max over every step timed.
Traces not kept are never written, so the cost of watching every step is the profiler's, not the disk's.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path

from ..errors import ParameterError
from ..workloads.base import check_int
from ..workloads.record import export_gzipped_trace
from .output import write_trace

SPEC = re.compile(r"^slow:(\d+(?:\.\d+)?)x$")
MIN_STEPS = 5  # steps timed before their median is a baseline (fewer: one slow start-up step sets it)
MEDIAN_BAND = 0.10  # a step within 10% of the running median stands for a typical step
MAX_FACTOR = 1000.0


def parse_trigger(spec) -> float:
    """The factor of ``"slow:1.5x"``. Raises ParameterError for any other text or a factor not above 1."""
    match = SPEC.match(str(spec).strip())
    factor = float(match.group(1)) if match else None
    if factor is None or not 1.0 < factor <= MAX_FACTOR:
        raise ParameterError(f"trigger {spec!r}: pass slow:FACTORx with a factor above 1 (slow:1.5x records the "
                             "steps that take 1.5 times the running median)")
    return factor


class SlowTrigger:
    """Decide, for each recorded step, whether its trace is written (see the module's docstring).

    ``name_trace(kind, step)``: the path of a kept trace, kind "slow" or "median". After the run: ``slow``
    (``(seconds, step, path)`` slowest first), ``median`` (the same, or None), ``times`` ((step, seconds) of
    every step offered), ``warnings`` (traces that could not be written), ``stats()``."""

    def __init__(self, spec, keep: int, name_trace, *, min_steps: int = MIN_STEPS,
                 export=export_gzipped_trace):
        self.factor = parse_trigger(spec)
        check_int("keep", keep, 1)
        self.spec, self.keep, self.name_trace, self.min_steps = str(spec), keep, name_trace, min_steps
        self._export = export
        self.slow: list[tuple[float, int, Path]] = []
        self.median: tuple[float, int, Path] | None = None
        self.times: list[tuple[int, float]] = []
        self.warnings: list[str] = []

    def offer(self, prof, step: int, seconds: float | None) -> None:
        """A recorded step has ended (``seconds`` None: cut short, not a step to judge)."""
        if seconds is None:
            return
        baseline = self.baseline_s()
        self.times.append((step, seconds))
        if baseline is None:
            return
        if seconds >= self.factor * baseline:
            if len(self.slow) < self.keep or seconds > self.slow[-1][0]:
                self._keep_slow(prof, step, seconds)
        elif self.median is None and abs(seconds - baseline) <= MEDIAN_BAND * baseline:
            path = self._write(prof, "median", step)
            self.median = (seconds, step, path) if path else None

    def baseline_s(self) -> float | None:
        """The running median of the steps timed so far; None before ``min_steps``."""
        if len(self.times) < self.min_steps:
            return None
        return statistics.median(t for _, t in self.times)

    def _keep_slow(self, prof, step: int, seconds: float) -> None:
        path = self._write(prof, "slow", step)
        if path is None:
            return
        self.slow = sorted(self.slow + [(seconds, step, path)], key=lambda kept: -kept[0])
        for _, _, dropped in self.slow[self.keep:]:
            Path(dropped).unlink(missing_ok=True)
        self.slow = self.slow[:self.keep]

    def _write(self, prof, kind: str, step: int) -> Path | None:
        written, note = write_trace(prof, self.name_trace(kind, step), self._export)
        if note:
            self.warnings.append(note)
        return written

    def stats(self) -> dict:
        """``{steps, min_ms, median_ms, max_ms}`` over every step timed (None values when none was)."""
        times = [t for _, t in self.times]
        if not times:
            return {"steps": 0, "min_ms": None, "median_ms": None, "max_ms": None}
        return {"steps": len(times), "min_ms": min(times) * 1e3, "median_ms": statistics.median(times) * 1e3,
                "max_ms": max(times) * 1e3}

    def to_json(self) -> dict:
        kept = [{"step": step, "ms": s * 1e3, "trace": str(path)} for s, step, path in self.slow]
        median = None if self.median is None else {"step": self.median[1], "ms": self.median[0] * 1e3,
                                                   "trace": str(self.median[2])}
        return {"trigger": self.spec, "factor": self.factor, "keep": self.keep, **self.stats(), "slow": kept,
                "median": median}
