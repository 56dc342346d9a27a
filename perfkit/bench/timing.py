"""Timing in one place: warm-up, device synchronization, an injectable clock, raw samples.

Every sample is the wall time of ``inner`` calls divided by ``inner`` (seconds per call),
taken between two ``synchronize(device)`` calls so queued GPU work is inside the timed
region. The clock is a parameter (``clock=time.perf_counter``) so tests can pass a fake one.
``time_callable`` (and ``perfkit.bench.compare``) keep per-sample control, which an interleaved
A/B loop needs and ``torch.utils.benchmark.Timer`` does not give.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..device import resolve_device, synchronize
from ..errors import MissingDependencyError, ParameterError
from ..results import html_section, html_table, html_warnings
from ..stats import robust_cv

Clock = Callable[[], float]

# Above this coefficient of variation a timing is flagged as noisy. pyperf warns from 10%
# ("the benchmark seems unstable"); we use the same threshold.
NOISY_CV = 0.10
# A sample this many times the median is an outlier worth mentioning.
OUTLIER_FACTOR = 3


@dataclass(frozen=True)
class TimingResult:
    """Raw per-call times (seconds) of one callable, plus how they were taken."""

    samples: tuple[float, ...]
    inner: int
    warmup: int
    device: str
    method: str
    warnings: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def median(self) -> float:
        return float(np.median(self.samples)) if self.samples else math.nan

    @property
    def mean(self) -> float:
        return float(np.mean(self.samples)) if self.samples else math.nan

    @property
    def iqr(self) -> float:
        if not self.samples:
            return math.nan
        q1, q3 = np.percentile(self.samples, [25, 75])
        return float(q3 - q1)

    @property
    def cv(self) -> float:
        """Robust coefficient of variation (``stats.robust_cv``)."""
        return robust_cv(self.samples)

    def to_frame(self) -> pd.DataFrame:
        """One row per sample: ``sample`` (index), ``seconds`` (per call)."""
        return pd.DataFrame({"sample": range(self.n), "seconds": list(self.samples)})

    def summary(self) -> dict:
        return {"n": self.n, "median_s": self.median, "mean_s": self.mean, "iqr_s": self.iqr,
                "cv": self.cv, "inner": self.inner, "warmup": self.warmup, "device": self.device,
                "method": self.method}

    def __repr__(self) -> str:
        return f"TimingResult(median={self.median * 1e3:.4g} ms, cv={self.cv:.1%}, n={self.n}, {self.device})"

    def _repr_html_(self) -> str:
        frame = pd.DataFrame([self.summary()])
        return html_section("Timing", html_table(frame), html_warnings(self.warnings))


def resolve_timing_device(device: str) -> str:
    """Like ``perfkit.device.resolve_device`` but lets CPU timing work without torch."""
    try:
        import torch  # noqa: F401  (heavy, optional: CPU timing works without it)
    except ImportError:
        if str(device) in ("auto", "cpu"):
            return "cpu"
        raise MissingDependencyError("torch", f"timing on device={device!r}") from None

    return resolve_device(device)


def time_call(fn: Callable[[], object], *, device: str = "cpu", clock: Clock = time.perf_counter,
              inner: int = 1) -> float:
    """Seconds per call of ``fn`` over ``inner`` back-to-back calls, synchronized on ``device``."""
    synchronize(device)
    start = clock()
    for _ in range(inner):
        fn()
    synchronize(device)
    return (clock() - start) / inner


def warm_up(fn: Callable[[], object], calls: int, *, device: str = "cpu",
            clock: Clock = time.perf_counter) -> tuple[float, ...]:
    """Call ``fn`` ``calls`` times, each timed and synchronized; returns the times (seconds)."""
    return tuple(time_call(fn, device=device, clock=clock) for _ in range(calls))


def collect(sample: Callable[[], float], *, repeats: int | None, min_time_s: float,
            min_repeats: int = 5, max_repeats: int = 10_000) -> int:
    """Call ``sample()`` (which times something and returns its seconds) ``repeats`` times, or,
    with ``repeats=None``, until the returned seconds add up to ``min_time_s`` (at least
    ``min_repeats``, at most ``max_repeats`` calls). Returns the number of calls made.

    Stopping on measured time (not on a warm-up estimate) keeps the sample count right when
    the first calls are much slower than the steady state.
    """
    if repeats is not None:
        for _ in range(repeats):
            sample()
        return repeats
    done, total = 0, 0.0
    while done < max_repeats and (done < min_repeats or total < min_time_s):
        total += sample()
        done += 1
    return done


def check_counts(*, repeats: int | None, warmup: int, inner: int, min_time_s: float = 1.0) -> None:
    """Raise ParameterError for impossible repeat/warm-up/inner counts or target time."""
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        raise ParameterError(f"repeats={repeats!r}: pass a positive int, or None to fill min_time_s")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ParameterError(f"warmup={warmup!r}: pass an int >= 0")
    if isinstance(inner, bool) or not isinstance(inner, int) or inner < 1:
        raise ParameterError(f"inner={inner!r}: pass an int >= 1 (calls averaged per sample)")
    if not min_time_s > 0:
        raise ParameterError(f"min_time_s={min_time_s!r}: must be > 0 seconds")


def time_callable(fn: Callable[[], object], *, repeats: int | None = None, warmup: int = 3, inner: int = 1,
                  min_time_s: float = 0.5, device: str = "auto", clock: Clock | None = None,
                  min_repeats: int = 5, max_repeats: int = 10_000) -> TimingResult:
    """Time ``fn()``: ``warmup`` calls, then ``repeats`` samples, or with ``repeats=None`` samples
    until ``min_time_s`` seconds of timed work (bounded by ``min_repeats``/``max_repeats``).

    Each sample is seconds per call (``inner`` calls averaged), synchronized on ``device``.
    """
    check_counts(repeats=repeats, warmup=warmup, inner=inner, min_time_s=min_time_s)
    dev, clk = resolve_timing_device(device), clock or time.perf_counter
    warm_up(fn, warmup, device=dev, clock=clk)
    samples: list[float] = []

    def sample() -> float:
        samples.append(time_call(fn, device=dev, clock=clk, inner=inner))
        return samples[-1] * inner

    collect(sample, repeats=repeats, min_time_s=min_time_s, min_repeats=min_repeats, max_repeats=max_repeats)
    method = "fixed" if repeats else "target-time"
    return TimingResult(tuple(samples), inner, warmup, dev, method, sample_warnings("", samples, inner))


def sample_warnings(label: str, samples, inner: int) -> tuple[str, ...]:
    """Measurement-quality warnings for one side's samples (seconds per call)."""
    who = f"{label}: " if label else ""
    out = []
    cv = robust_cv(samples)
    if cv > NOISY_CV:
        out.append(f"{who}robust coefficient of variation {cv:.0%} (> {NOISY_CV:.0%}): the machine is "
                   "noisy; close other work, fix the thread count, or raise repeats/min_time_s")
    median = float(np.median(samples)) if len(samples) else math.nan
    slow = int(np.sum(np.asarray(samples) > OUTLIER_FACTOR * median)) if len(samples) else 0
    if slow:
        out.append(f"{who}{slow} of {len(samples)} samples took over {OUTLIER_FACTOR}x the median "
                   "(first calls, GC, other processes); the median-based test tolerates them, "
                   "but more warmup would remove start-up effects")
    if inner == 1 and 0 < median < 1e-5:
        out.append(f"{who}one call takes {median * 1e6:.2g} us, close to timer overhead; "
                   "time several calls per sample (inner=10 or more)")
    return tuple(out)
