"""Reference-workload variants built and timed against each other: one A/B, a ladder of fixes
applied one after another (the "50 -> 29,000 steps/s" story), the cost of a run's first step, and
the facts a built variant states about itself (bytes it copies per batch, switches it skipped).

An ``Arm`` names a workload configuration: a variant (``perfkit.workloads`` ``variants()``) plus
config overrides. ``variant_ab`` builds two arms and times their ``step()`` interleaved through
``perfkit.compare`` (warm-up, synchronization, a CI on the ratio, a verdict that never defaults to
"faster"). ``speed_ladder`` does that for each consecutive pair of arms and for the first against
the last, and reads each rung's rate (steps per second, or a workload's own unit through
``units``) from its samples.
"""
from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import ParameterError
from ..results import html_section, html_table, html_warnings
from ..stats import step_ci
from ..workloads.registry import make_workload
from .compare import compare


@dataclass(frozen=True)
class Arm:
    """One configuration of a workload: ``label`` (as tables show it), ``variant`` (None: the
    workload's defaults) and config ``overrides`` applied on top of it."""

    label: str
    variant: str | None = None
    overrides: dict = field(default_factory=dict)


def ppo_env_steps(workload) -> float:
    """Environment steps in one PPO iteration (``envs * rollout``): a PPO ``step()`` is one
    iteration, the write-ups count environment steps per second."""
    return float(workload.config.envs * workload.config.rollout)


def variant_ab(workload: str, a: Arm, b: Arm, *, device: str = "auto", overrides: dict | None = None, **timing):
    """``perfkit.compare`` of ``a``'s ``step()`` against ``b``'s (A = ``a``): an ``ABResult``
    labelled with the arms' labels. ``overrides`` apply to both arms (then each arm's own);
    ``timing`` goes to ``compare`` (repeats, warmup, min_time_s, seed...). Raises
    ParameterError for an unknown workload, variant or field."""
    with ExitStack() as stack:
        wa, wb = (stack.enter_context(_build(workload, arm, device, overrides)) for arm in (a, b))
        return compare(wa.step, wb.step, labels=(a.label, b.label), device=wa.device, **timing)


def _build(workload: str, arm: Arm, device: str, overrides: dict | None):
    if not isinstance(arm, Arm):
        raise ParameterError(f"expected an Arm(label, variant, overrides), got {type(arm).__name__}")
    return make_workload(workload, device, variant=arm.variant, **{**dict(overrides or {}), **arm.overrides})


def arm_facts(workload: str, arm: Arm, names, *, device: str = "auto", overrides: dict | None = None) -> dict:
    """The attributes ``names`` of ``arm`` built on ``device`` (e.g. the replay pipeline's
    ``bytes_per_batch``), plus ``notes``: the switches it could not apply there (pinned memory
    without CUDA). Raises ParameterError for an attribute the workload does not have."""
    with _build(workload, arm, device, overrides) as w:
        missing = [n for n in names if not hasattr(w, n)]
        if missing:
            raise ParameterError(f"workload {workload!r} has no attribute(s) {', '.join(missing)}")
        return {**{n: getattr(w, n) for n in names}, "notes": tuple(w.notes)}


@dataclass(frozen=True)
class LadderResult:
    """Rungs of fixes timed in pairs. ``steps[i]`` compares rung i (A) with rung i + 1 (B);
    ``overall`` the first rung with the last. ``units`` per ``step()`` of each rung turn seconds
    per step into the rate ``unit`` (e.g. environment steps/s)."""

    workload: str
    device: str
    labels: tuple[str, ...]
    steps: tuple
    overall: object
    units: tuple[float, ...]
    unit: str = "steps/s"
    warnings: tuple[str, ...] = ()

    def rung_samples(self, i: int) -> tuple[float, ...]:
        """Seconds per ``step()`` of rung ``i``: every sample of the (one or two) consecutive
        comparisons it takes part in. Rates of two rungs come from different comparisons, so
        they move with the machine's load between them; the ``speedup`` of consecutive rungs
        is the interleaved, like-for-like comparison."""
        before = self.steps[i - 1].samples_b if i else ()
        after = self.steps[i].samples_a if i < len(self.steps) else ()
        return tuple(before) + tuple(after)

    def rate(self, i: int) -> tuple[float, float, float]:
        """(median rate, CI low, CI high) of rung ``i`` in ``unit``: a 95% bootstrap CI over its
        samples (``step_ci``)."""
        seconds = np.asarray(self.rung_samples(i), dtype=float)
        rates = self.units[i] / seconds[seconds > 0]
        ci = step_ci(rates) or (math.nan, math.nan)
        return float(np.median(rates)) if rates.size else math.nan, ci[0], ci[1]

    @property
    def verdict(self) -> str:
        lo, hi = self.overall.speedup_ci
        return (f"{self.labels[0]} -> {self.labels[-1]}: {self.overall.verdict} "
                f"({self.overall.speedup:.3g}x, CI {lo:.3g}-{hi:.3g})")

    def to_frame(self) -> pd.DataFrame:
        """One row per rung: rung, label, rate, rate_ci_low, rate_ci_high, unit, median_ms, and
        against the rung before: speedup, ci_low, ci_high, verdict (empty for the first)."""
        rows = []
        for i, name in enumerate(self.labels):
            rate, lo, hi = self.rate(i)
            prev = self.steps[i - 1] if i else None
            rows.append({"rung": i, "label": name, "rate": rate, "rate_ci_low": lo, "rate_ci_high": hi,
                         "unit": self.unit, "median_ms": float(np.median(self.rung_samples(i))) * 1e3,
                         "speedup": prev.speedup if prev else math.nan,
                         "ci_low": prev.speedup_ci[0] if prev else math.nan,
                         "ci_high": prev.speedup_ci[1] if prev else math.nan, "verdict": prev.verdict if prev else ""})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"LadderResult({self.workload} on {self.device}: {self.verdict})"

    def _repr_html_(self) -> str:
        return html_section(f"Ladder of fixes on {self.device}: {self.verdict}", html_table(self.to_frame()),
                            html_warnings(self.warnings))


def speed_ladder(workload: str, arms: Sequence[Arm], *, device: str = "auto", overrides: dict | None = None,
                 units: Callable | float = 1.0, unit: str = "steps/s", **timing) -> LadderResult:
    """Time each consecutive pair of ``arms`` and the first against the last with
    ``perfkit.compare`` (``timing`` goes to it). Every arm is built once, on ``device``, and kept
    for the whole ladder. ``units``: a number, or a function of the built workload
    (``ppo_env_steps``), giving the units one ``step()`` does. Raises ParameterError for fewer
    than two arms, repeated labels, or an unknown workload, variant or field."""
    arms = list(arms)
    labels = [a.label for a in arms if isinstance(a, Arm)]
    if len(arms) < 2 or len(set(labels)) != len(arms):
        raise ParameterError(f"speed_ladder needs two or more Arm(label, ...) with distinct labels, got {arms!r}")
    with ExitStack() as stack:
        built = [stack.enter_context(_build(workload, arm, device, overrides)) for arm in arms]
        dev = built[0].device

        def ab(i: int, j: int):
            return compare(built[i].step, built[j].step, labels=(labels[i], labels[j]), device=dev, **timing)

        steps = tuple(ab(i, i + 1) for i in range(len(arms) - 1))
        overall = steps[0] if len(arms) == 2 else ab(0, len(arms) - 1)
        per_step = tuple(float(units(w) if callable(units) else units) for w in built)
    return LadderResult(workload, dev, tuple(labels), steps, overall, per_step, unit, _warnings((*steps, overall)))


def _warnings(comparisons) -> tuple[str, ...]:
    """The machine-load warning once, then how many comparisons carry measurement warnings (each
    comparison keeps its own in ``.warnings``)."""
    load = [w for c in comparisons for w in c.warnings if w.startswith("load average")][:1]
    noisy = [" vs ".join(c.labels[::-1]) for c in comparisons
             if any(not w.startswith("load average") for w in c.warnings)]
    if noisy:
        load.append(f"{len(noisy)} of {len(comparisons)} comparisons have measurement warnings (noise, outliers, "
                    f"drift): {'; '.join(noisy)}; see steps[i].warnings and overall.warnings")
    return tuple(load)


@dataclass(frozen=True)
class FirstStep:
    """A fresh run's first step against the rest: ``first_ms``, ``steady_ms`` (median of steps
    2..n) with its 95% bootstrap CI (``steady_ci_low``, ``steady_ci_high``; NaN with fewer than 2
    steady steps that differ) and the ``run`` itself."""

    first_ms: float
    steady_ms: float
    steady_ci_low: float
    steady_ci_high: float
    run: object

    @property
    def ratio(self) -> float:
        """first / steady: how many steady steps the first one costs."""
        return self.first_ms / self.steady_ms if self.steady_ms > 0 else math.nan

    def summary(self) -> dict:
        return {"first step (ms)": self.first_ms, "steady step, median (ms)": self.steady_ms,
                "steady CI low (ms)": self.steady_ci_low, "steady CI high (ms)": self.steady_ci_high,
                "first / steady": self.ratio}


def first_step_cost(workload: str, arm: Arm, *, steps: int = 5, device: str = "auto",
                    overrides: dict | None = None) -> FirstStep:
    """Run a fresh ``arm`` for ``steps`` steps (``Workload.run``: synchronized wall time per
    step) and compare its first step with the rest. The first step pays one-time costs
    (allocator growth, lazy init, cuDNN autotuning, compilation): a benchmark that times it
    measures set-up, not training. Raises ParameterError for fewer than 3 steps."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 3:
        raise ParameterError(f"steps={steps!r}: need an int >= 3 (the first step and at least two after it)")
    with _build(workload, arm, device, overrides) as w:
        run = w.run(steps)
    rest = np.asarray(run.step_s[1:], dtype=float) * 1e3
    low, high = step_ci(rest) or (math.nan, math.nan)
    return FirstStep(run.step_s[0] * 1e3, float(np.median(rest)), low, high, run)
