"""Planning memory against samples x horizon, and where a memory budget runs out.

An MPC planner (``perfkit.workloads.mppi``) holds, per sampled action sequence, buffers that grow
with the horizon (noise, actions: ``horizon * action_dim`` floats each) and activations that do not
(one latent and hidden layer per sample, reused across horizon steps). ``planning_memory`` measures
it: one ``workload_memory_sweep`` over ``samples`` per horizon (peak bytes allocated by a planning
step, torch's allocator on CPU or CUDA), then a line through the per-sample slopes against the
horizon. The model is

    peak(samples, horizon) = fixed + samples * (per_sample + per_sample_step * horizon)

``fixed`` (weights, the environment, per-call overhead) is the mean intercept of the sweeps. The
largest sample count that fits a budget at a horizon follows, with a range from the CI of the
per-sample-step slope.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..device import resolve_device
from ..errors import ParameterError
from ..results import html_section, html_table, html_warnings
from ..stats import fit_slope
from .memsweep import default_budget, workload_memory_sweep

# Predictions further than this beyond the largest sample count measured get a warning (as in
# perfkit.bench.memsweep).
EXTRAPOLATION_WARN = 10.0


@dataclass(frozen=True)
class PlanningMemory:
    """``sweeps``: (horizon, MemorySweep over samples) pairs; ``fit``: bytes per sample against
    the horizon (slope: bytes per sample per horizon step, intercept: per sample at horizon 0);
    ``fixed_bytes``: the sweeps' mean intercept."""

    sweeps: tuple
    fit: object
    fixed_bytes: float
    budget_bytes: float
    budget_source: str
    device: str
    method: str
    warnings: tuple[str, ...] = ()

    def bytes_per_sample(self, horizon: float, slope: float | None = None) -> float:
        """Fitted bytes per sampled sequence at ``horizon``."""
        return self.fit.intercept + (self.fit.slope if slope is None else slope) * float(horizon)

    def bytes_at(self, samples: float, horizon: float) -> float:
        """Fitted peak bytes of one planning step with ``samples`` sequences of ``horizon`` steps."""
        return self.fixed_bytes + float(samples) * self.bytes_per_sample(horizon)

    def max_samples(self, horizon: float, budget_bytes: float | None = None, slope: float | None = None) -> float:
        """Samples whose fitted peak fills ``budget_bytes`` (default: the sweep's budget)."""
        budget = self.budget_bytes if budget_bytes is None else float(budget_bytes)
        per = self.bytes_per_sample(horizon, slope)
        return max(0.0, budget - self.fixed_bytes) / per if per > 0 else math.inf

    def limits_frame(self, horizons: Sequence[float] | None = None) -> pd.DataFrame:
        """Per horizon (default: the measured ones): bytes_per_sample, max_samples at the budget
        and its range (ci_low, ci_high: from the slope's CI, steeper -> fewer samples)."""
        rows = []
        for h in horizons if horizons is not None else [h for h, _ in self.sweeps]:
            rows.append({"horizon": h, "bytes_per_sample": self.bytes_per_sample(h),
                         "max_samples": self.max_samples(h), "ci_low": self.max_samples(h, slope=self.fit.high),
                         "ci_high": self.max_samples(h, slope=self.fit.low), "budget_bytes": self.budget_bytes})
        return pd.DataFrame(rows)

    def to_frame(self) -> pd.DataFrame:
        """Every measured point: horizon, samples, peak_bytes, fitted_bytes (this model's)."""
        rows = [{"horizon": h, "samples": p.size, "peak_bytes": p.peak_bytes, "fitted_bytes": self.bytes_at(p.size, h)}
                for h, sweep in self.sweeps for p in sweep.points]
        return pd.DataFrame(rows, columns=["horizon", "samples", "peak_bytes", "fitted_bytes"])

    def __repr__(self) -> str:
        return (f"PlanningMemory({self.fit.intercept:,.0f} B/sample + {self.fit.slope:,.1f} B/sample/step on "
                f"{self.device}, fixed {self.fixed_bytes:,.0f} B)")

    def _repr_html_(self) -> str:
        return html_section(f"Planning memory vs samples x horizon ({self.method})", html_table(self.limits_frame()),
                            html_table(self.to_frame(), 40), html_warnings(self.warnings))


def planning_memory(samples: Sequence[int], horizons: Sequence[int], *, workload: str = "mppi",
                    variant: str | None = None, device: str = "auto", overrides: dict | None = None,
                    budget_bytes: float | None = None, steps: int = 1) -> PlanningMemory:
    """Sweep ``samples`` at each of ``horizons`` (``perfkit.workload_memory_sweep``, ``steps``
    planning steps per point) and fit the model of the module docstring. ``budget_bytes``
    default: the memory free on the device now. Raises ParameterError for fewer than 3 horizons
    or 3 sample counts (a line needs 3 points), and for bad workload fields."""
    horizons = sorted({int(h) for h in horizons})
    if len(horizons) < 3 or len(set(samples)) < 3:
        raise ParameterError(f"planning_memory: need 3 or more distinct horizons and sample counts, got "
                             f"horizons={list(horizons)}, samples={list(samples)}")
    dev = resolve_device(device)
    budget, source = (float(budget_bytes), "given") if budget_bytes is not None else default_budget(dev)
    sweeps = tuple((h, workload_memory_sweep(workload, "samples", samples, variant=variant, steps=steps, device=dev,
                                             overrides={**dict(overrides or {}), "horizon": h}, budget_bytes=budget,
                                             warmup=0 if i else 1)) for i, h in enumerate(horizons))
    fit = fit_slope(horizons, [s.bytes_per_unit for _, s in sweeps])
    fixed = float(np.mean([s.fit.intercept for _, s in sweeps]))
    result = PlanningMemory(sweeps, fit, fixed, budget, source, dev, sweeps[0][1].method)
    return _with_warnings(result, max(samples))


def _with_warnings(r: PlanningMemory, largest: float) -> PlanningMemory:
    from dataclasses import replace

    out = [f"horizon {h}: {w}" for h, s in r.sweeps for w in s.warnings if "extrapolates" not in w]
    if r.fit.r2 < 0.98:
        out.append(f"bytes per sample are not a straight line in the horizon (r2={r.fit.r2:.3f}): the limits are "
                   "rough; measure the horizon you plan to use")
    top = r.max_samples(max(h for h, _ in r.sweeps))
    if math.isfinite(top) and top > EXTRAPOLATION_WARN * largest:
        out.append(f"the limit ({top:,.0f} samples) extrapolates {top / largest:,.0f}x beyond the largest sample "
                   f"count measured ({largest:,}): allocator caching and fragmentation make it optimistic; "
                   "confirm with one run near it")
    return replace(r, warnings=tuple(out))
