"""Interleaved A/B timing of two callables with a CI on the speedup and an honest verdict.

``compare(a, b)`` warms both up, then runs rounds of one A call and one B call in a
per-round random order (seeded), synchronizing the device around every timed call, and keeps
every raw sample. Interleaving spreads drift (thermal throttling, turbo, other processes)
over both sides instead of letting it land on whichever ran second. The verdict comes from
``perfkit.stats.ratio_test``: "faster" means B takes less time than A.
"""
from __future__ import annotations

import math
import platform
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from ..cpus import available_cores, busy, load_average
from ..errors import ParameterError
from ..results import Finding, html_section, html_table, html_text, html_warnings
from ..stats import UNRELIABLE_CV, UNRELIABLE_DRIFT, RatioTest, check_knobs, half_move, ratio_test, robust_cv
from ..stats import unreliable as timing_unreliable
from .timing import Clock, check_counts, collect, resolve_timing_device, sample_warnings, time_call

# A drift between the first and second half of a run larger than this is reported (the
# ratio stays valid thanks to interleaving, the absolute times do not).
DRIFT_WARN = 0.10
# Fewer samples per side than this gives wide CIs; say so even when a verdict is reached.
FEW_SAMPLES = 20


@dataclass(frozen=True)
class ABResult:
    """Raw samples of an interleaved A/B run and the test on the median ratio B/A (of per-round
    ratios when paired, else median(B) / median(A)); below 1 means B takes less time.

    Samples are seconds per call; ``samples_a[i]`` and ``samples_b[i]`` come from round i. ``order`` is the side (0 = A, 1 = B) of every timed call in
    execution order. ``verdict`` is "faster"/"slower" (B relative to A), "no change" or
    "insufficient data".
    """

    labels: tuple[str, str]
    samples_a: tuple[float, ...]
    samples_b: tuple[float, ...]
    order: tuple[int, ...]
    test: RatioTest
    inner: int = 1
    warmup: int = 0
    warnings: tuple[str, ...] = ()
    environment: dict = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.test.ratio

    @property
    def ci_low(self) -> float:
        return self.test.low

    @property
    def ci_high(self) -> float:
        return self.test.high

    @property
    def p_value(self) -> float:
        return self.test.p_value

    @property
    def verdict(self) -> str:
        return self.test.verdict

    @property
    def n(self) -> int:
        """Samples per side (the smaller side if they differ)."""
        return min(len(self.samples_a), len(self.samples_b))

    @property
    def median_a(self) -> float:
        return float(np.median(self.samples_a)) if self.samples_a else math.nan

    @property
    def median_b(self) -> float:
        return float(np.median(self.samples_b)) if self.samples_b else math.nan

    @property
    def drift(self) -> float:
        """The larger move of an arm's median from the first to the second half of its samples, as a
        signed fraction (-0.66: 66% lower); 0 for arms under 10 samples."""
        moves = [half_move(s) for s in (self.samples_a, self.samples_b)]
        return max(moves, key=abs)

    @property
    def spread(self) -> float:
        """The larger robust coefficient of variation of the two arms (``stats.robust_cv``)."""
        return max(robust_cv(self.samples_a), robust_cv(self.samples_b))

    @property
    def unreliable(self) -> str:
        """Why this timing supports no verdict ("" when it does): an arm's median drifted by more than
        ``UNRELIABLE_DRIFT`` or its spread passed ``UNRELIABLE_CV`` (``stats.unreliable``), e.g. "timing drifted
        -66%, CV 131%"."""
        return timing_unreliable(self.samples_a, self.samples_b)

    @property
    def conclusion(self) -> str:
        """The verdict this result may state, on every surface (``str``, ``repr``, ``_repr_html_``, the
        notebooks' cards and tables, the perf log's note): ``verdict``, or "inconclusive: re-run on a quiet
        machine (WHY)" when the timing supports none (``unreliable``), whatever the test on the ratio said."""
        return inconclusive_word(self.unreliable) if self.unreliable else self.verdict

    @property
    def speedup(self) -> float:
        """1 / ratio: above 1 means B is faster (1.25 = "25% more calls per second")."""
        return 1.0 / self.ratio if self.ratio and math.isfinite(self.ratio) else math.nan

    @property
    def speedup_ci(self) -> tuple[float, float]:
        """CI of ``speedup`` (the inverted ratio CI)."""
        return (_inverse(self.ci_high), _inverse(self.ci_low))

    def to_frame(self) -> pd.DataFrame:
        """One row per timed call: ``side`` (label), ``seconds`` (per call), ``round``, ``position``."""
        rows, counts = [], [0, 0]
        samples = (self.samples_a, self.samples_b)
        for i, side in enumerate(self.order):
            rows.append((self.labels[side], samples[side][counts[side]], i // 2, i % 2))
            counts[side] += 1
        return pd.DataFrame(rows, columns=["side", "seconds", "round", "position"])

    def summary(self) -> dict:
        a, b = self.labels
        return {
            "a": a, "b": b, f"median_{a}_s": self.median_a, f"median_{b}_s": self.median_b,
            "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high,
            "speedup": self.speedup, "p_value": self.p_value, "verdict": self.conclusion,
            "reason": self.test.reason, "n": self.n, "paired": self.test.paired,
            "confidence": self.test.confidence,
            "min_effect": self.test.min_effect, f"robust_cv_{a}": robust_cv(self.samples_a),
            f"robust_cv_{b}": robust_cv(self.samples_b),
        }

    def __repr__(self) -> str:
        a, b = self.labels
        return (f"ABResult({b}/{a}={self.ratio:.4g} [{self.ci_low:.4g}, {self.ci_high:.4g}], "
                f"p={self.p_value:.3g}, {self.conclusion}, n={self.n})")

    def __str__(self) -> str:
        a, b = self.labels
        return (f"{b} vs {a}: {self.conclusion}; median ratio {b}/{a} {self.ratio:.4g} "
                f"[{self.ci_low:.4g}, {self.ci_high:.4g}], n={self.n}")

    def _repr_html_(self) -> str:
        a, b = self.labels
        title = f"A/B: {b} vs {a} -> {self.conclusion}"
        frame = pd.DataFrame([{k: v for k, v in self.summary().items() if k not in ("a", "b")}])
        env = html_text(", ".join(f"{k}={v}" for k, v in self.environment.items()))
        return html_section(title, html_table(frame), f"<p>{env}</p>", html_warnings(self.warnings))


def _inverse(x: float) -> float:
    return 1.0 / x if x and math.isfinite(x) else math.nan


def compare(a: Callable[[], object], b: Callable[[], object], *, repeats: int | None = None, warmup: int = 3,
            min_time_s: float = 1.0, device: str = "auto", labels: tuple[str, str] = ("A", "B"),
            clock: Clock | None = None, confidence: float = 0.95, min_effect: float = 0.02, seed: int = 0,
            inner: int = 1, alpha: float | None = None, min_samples: int = 5, min_repeats: int = 20,
            max_repeats: int = 2000, paired: bool = True) -> ABResult:
    """Time zero-argument callables ``a`` and ``b`` interleaved and test the median ratio B/A.

    ``warmup`` rounds (A then B) run first. Then each round times one sample of each side in
    a random order drawn from ``seed``; a sample is seconds per call over ``inner`` calls, with
    ``device`` ("auto", "cpu", "cuda") synchronized around it. ``repeats`` fixes the round
    count; ``repeats=None`` runs rounds until ``min_time_s`` seconds of timed work (both sides),
    at least ``min_repeats`` and at most ``max_repeats`` rounds. ``min_effect`` (fraction) is
    the smallest change reported as faster/slower; ``alpha`` defaults to 1 - confidence.

    With ``paired=True`` (default) the ratio is the median of per-round ratios B/A: load
    that lands on both calls of a round cancels. In 160 trials on a loaded 2-core machine it
    flagged a planted 15% slowdown in 99% of them, median(B)/median(A) (``paired=False``) in
    94% (benchmarks/bench_ab_rates.py). The p-value is always the unpaired Mann-Whitney U.
    Raises ParameterError for bad knobs.
    """
    _check_args(a, b, labels)
    check_counts(repeats=repeats, warmup=warmup, inner=inner, min_time_s=min_time_s)
    check_knobs(confidence, min_effect, min_samples, alpha)
    dev, clk = resolve_timing_device(device), clock or time.perf_counter
    fns = (a, b)
    for _ in range(warmup):
        for fn in fns:
            time_call(fn, device=dev, clock=clk)
    samples, order = _interleaved(fns, repeats=repeats, min_time_s=min_time_s, seed=seed, device=dev,
                                  clock=clk, inner=inner, bounds=(min_repeats, max_repeats))
    test = ratio_test(samples[0], samples[1], confidence=confidence, min_effect=min_effect,
                      alpha=alpha, min_samples=min_samples, seed=seed, paired=paired)
    env = environment(dev, clk)
    warnings = _warnings(labels, samples, inner, test) + _load_warning(env)
    return ABResult(tuple(labels), tuple(samples[0]), tuple(samples[1]), tuple(order), test,
                    inner, warmup, warnings, env)


def inconclusive_word(why: str) -> str:
    """The verdict of an A/B whose timing supports none, ``why`` being ``ABResult.unreliable``."""
    return f"inconclusive: re-run on a quiet machine ({why})"


def inconclusive_finding(timing: ABResult, what: str) -> Finding | None:
    """The finding of an A/B whose timing supports no verdict (``ABResult.unreliable``); None when
    it does. ``what`` names the comparison ("torch.compile (inductor)")."""
    why = timing.unreliable
    if not why:
        return None
    return Finding("medium", f"{what}: inconclusive, {why}: re-run on a quiet machine",
                   {"drift_pct": 100 * timing.drift, "robust_cv_pct": 100 * timing.spread, "n": timing.n},
                   "Re-run on a quiet machine: stop other work, fix the thread count (torch.set_num_threads), "
                   "raise repeats or min_time_s",
                   f"an arm's median moving over {UNRELIABLE_DRIFT:.0%} between the halves of the run, or its "
                   f"robust CV over {UNRELIABLE_CV:.0%}")


def _check_args(a, b, labels) -> None:
    if not (callable(a) and callable(b)):
        raise ParameterError("compare(a, b): a and b must be zero-argument callables, "
                             "e.g. lambda: model(x)")
    if len(labels) != 2 or labels[0] == labels[1]:
        raise ParameterError(f"labels={labels!r}: pass two different names, e.g. ('eager', 'compiled')")


def _interleaved(fns, *, repeats, min_time_s: float, seed: int, device: str, clock: Clock, inner: int,
                 bounds: tuple[int, int]):
    """Rounds of one A and one B sample in seeded random order; returns (samples, order)."""
    rng = np.random.default_rng(seed)
    samples: tuple[list, list] = ([], [])
    order: list[int] = []

    def one_round() -> float:
        first = int(rng.integers(0, 2))
        spent = 0.0
        for side in (first, 1 - first):
            samples[side].append(time_call(fns[side], device=device, clock=clock, inner=inner))
            order.append(side)
            spent += samples[side][-1] * inner
        return spent

    collect(one_round, repeats=repeats, min_time_s=min_time_s, min_repeats=bounds[0], max_repeats=bounds[1])
    return samples, order


def _warnings(labels, samples, inner: int, test: RatioTest) -> tuple[str, ...]:
    out = [w for label, s in zip(labels, samples) for w in sample_warnings(label, s, inner)]
    if test.verdict == "insufficient data":
        out.append(f"insufficient data: {test.reason}")
    elif min(test.n_a, test.n_b) < FEW_SAMPLES:
        out.append(f"only {min(test.n_a, test.n_b)} samples per side: the CI is wide; "
                   f"aim for {FEW_SAMPLES}+ (raise repeats or min_time_s)")
    if test.verdict == "no change" and math.isfinite(test.low) and (test.high < 1 or test.low > 1):
        out.append(f"the CI [{test.low:.4g}, {test.high:.4g}] excludes 1 but not the "
                   f"{test.min_effect:.0%} minimum effect: a small change may exist; "
                   "raise repeats to resolve it")
    out.extend(_drift(labels, samples))
    return tuple(out)


def _drift(labels, samples) -> list[str]:
    out = []
    for label, s in zip(labels, samples):
        change = half_move(s)
        if abs(change) > DRIFT_WARN:
            out.append(f"{label}: median moved {change:+.0%} between the first and second half of the run "
                       "(throttling or other load); the ratio is interleaved, absolute times are not reliable")
    return out


def _load_warning(env: dict) -> tuple[str, ...]:
    load, cores = env.get("load_avg_1min"), env.get("cpu_count") or 1
    if not busy(load, cores):
        return ()
    return (f"load average {load:.1f} on {cores} cores while timing: other processes compete for the CPU; "
            "multi-threaded ops get bimodal times (try torch.set_num_threads(1) or a quiet machine)",)


def environment(device: str, clock: Clock) -> dict:
    """What the samples were taken on: device, torch version, threads, Python, machine, clock,
    1-minute load average (at the end of the run; None where the OS has none) and ``cpu_count``, the
    CPUs this process may run on (:func:`perfkit.cpus.available_cores`), which the load is judged against."""
    env = {"device": device, "python": sys.version.split()[0], "platform": platform.platform(),
           "cpu_count": available_cores(), "clock": getattr(clock, "__name__", repr(clock)),
           "load_avg_1min": load_average()}
    try:
        import torch
    except ImportError:
        return {**env, "torch": None}
    env.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(device)
    return env
