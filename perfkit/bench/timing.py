"""Timing in one place: warm-up, device synchronization, an injectable clock, raw samples.

Every sample is the wall time of ``inner`` calls divided by ``inner`` (seconds per call),
taken between two ``synchronize(device)`` calls so queued GPU work is inside the timed
region. The clock is a parameter (``clock=time.perf_counter``) so tests can pass a fake one.
``perfkit.bench.compare`` builds its interleaved A/B loop from ``time_call`` and ``collect``:
per-sample control, which an interleaved loop needs and ``torch.utils.benchmark.Timer`` does
not give.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from ..device import synchronize
from ..errors import MissingDependencyError, ParameterError
from .stats import robust_cv

Clock = Callable[[], float]

# Above this coefficient of variation a timing is flagged as noisy. pyperf warns from 10%
# ("the benchmark seems unstable"); we use the same threshold.
NOISY_CV = 0.10
# A sample this many times the median is an outlier worth mentioning.
OUTLIER_FACTOR = 3


def resolve_timing_device(device: str) -> str:
    """Like ``perfkit.device.resolve_device`` but lets CPU timing work without torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        if str(device) in ("auto", "cpu"):
            return "cpu"
        raise MissingDependencyError("torch", f"timing on device={device!r}") from None
    from ..device import resolve_device

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
