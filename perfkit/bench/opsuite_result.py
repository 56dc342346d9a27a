"""The result of ``op_suite``: each op's time per setting (device, dtype, threads), the A/B
comparisons along each axis, and the advice drawn from their verdicts."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..results import Finding, findings_frame, html_section, html_table, html_warnings, rank_findings
from .compare import ABResult
from ..stats import bootstrap_median_ratio


@dataclass(frozen=True)
class Setting:
    """Where and how an op runs: device, dtype name, intra-op threads (None: left as it is)."""

    device: str
    dtype: str
    threads: int | None = None

    @property
    def label(self) -> str:
        threads = f", {self.threads} thr" if self.threads else ""
        return f"{self.device} {self.dtype}{threads}"


@dataclass(frozen=True)
class OpTiming:
    """Seconds per call of one op in one setting; ``work`` is FLOPs or bytes per call."""

    op: str
    setting: Setting
    samples: tuple[float, ...]
    work: float
    unit: str
    confidence: float = 0.95

    @property
    def median_s(self) -> float:
        return float(np.median(self.samples))

    @property
    def ci_s(self) -> tuple[float, float]:
        """Percentile-bootstrap CI of the median (the bootstrap of ``perfkit.stats``,
        applied to the ratio samples / 1)."""
        ones = np.ones(len(self.samples))
        return bootstrap_median_ratio(ones, self.samples, confidence=self.confidence, paired=True)

    @property
    def throughput(self) -> float:
        """GFLOP/s or GB/s (``unit``) at the median time."""
        return self.work / self.median_s / 1e9 if self.median_s > 0 else math.nan


@dataclass(frozen=True)
class OpComparison:
    """B against A along one ``axis`` ("device", "dtype" or "threads") for one op."""

    op: str
    axis: str
    a: Setting
    b: Setting
    ab: ABResult


@dataclass(frozen=True)
class OpSuiteResult:
    """Timings and comparisons of the op suite, and the environment they were measured in."""

    timings: tuple[OpTiming, ...]
    comparisons: tuple[OpComparison, ...]
    environment: object
    preset: str
    warnings: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        """One row per op and setting: op, device, dtype, threads, median_ms, ci_low_ms,
        ci_high_ms, n, throughput, unit."""
        rows = [{"op": t.op, "device": t.setting.device, "dtype": t.setting.dtype, "threads": t.setting.threads,
                 "median_ms": t.median_s * 1e3, "ci_low_ms": t.ci_s[0] * 1e3, "ci_high_ms": t.ci_s[1] * 1e3,
                 "n": len(t.samples), "throughput": t.throughput, "unit": t.unit} for t in self.timings]
        return pd.DataFrame(rows, columns=["op", "device", "dtype", "threads", "median_ms", "ci_low_ms",
                                           "ci_high_ms", "n", "throughput", "unit"])

    def comparisons_frame(self) -> pd.DataFrame:
        """One row per comparison: op, axis, a, b, speedup (time A / time B: above 1, B is
        faster), ci_low, ci_high, verdict ("faster" means B is faster), n."""
        rows = [{"op": c.op, "axis": c.axis, "a": c.a.label, "b": c.b.label, "speedup": c.ab.speedup,
                 "ci_low": c.ab.speedup_ci[0], "ci_high": c.ab.speedup_ci[1], "verdict": c.ab.conclusion, "n": c.ab.n}
                for c in self.comparisons]
        return pd.DataFrame(rows, columns=["op", "axis", "a", "b", "speedup", "ci_low", "ci_high", "verdict", "n"])

    @property
    def findings(self) -> tuple[Finding, ...]:
        return rank_findings(f for c in self.comparisons if (f := _finding(c)) is not None)

    def __repr__(self) -> str:
        return (f"OpSuiteResult({self.preset}: {len(self.timings)} timings, {len(self.comparisons)} comparisons, "
                f"devices {sorted({t.setting.device for t in self.timings})})")

    def _repr_html_(self) -> str:
        suite = html_section(f"Op suite ({self.preset})", html_table(self.to_frame(), 100),
                             html_table(self.comparisons_frame(), 100), html_table(findings_frame(self.findings)),
                             html_warnings(self.warnings))
        env = self.environment._repr_html_() if hasattr(self.environment, "_repr_html_") else ""
        return f"<div style='display:flex;gap:2em;align-items:flex-start'><div>{suite}</div><div>{env}</div></div>"


def _finding(c: OpComparison) -> Finding | None:
    """Faster/slower verdicts turned into advice; "no change" and "insufficient data" say nothing."""
    if c.ab.conclusion not in ("faster", "slower"):
        return None
    lo, hi = c.ab.speedup_ci
    ev = {"speedup": c.ab.speedup, "ci": f"[{lo:.3g}, {hi:.3g}]", "n": c.ab.n}
    rule = f"{c.ab.test.confidence:.0%} CI of the interleaved median ratio beyond {c.ab.test.min_effect:.0%}"
    factor = c.ab.speedup if c.ab.verdict == "faster" else 1 / c.ab.speedup
    title = f"{c.op}: {c.b.label} is {factor:.2f}x {c.ab.verdict} than {c.a.label}"
    if c.ab.verdict == "faster":
        return Finding("info", title, ev, _ADVICE[c.axis][0], rule)
    return Finding("medium", title, ev, _ADVICE[c.axis][1], rule)


_ADVICE = {
    "device": ("run this op on the faster device", "this op is too small for the device: batch more work per "
               "launch (larger batches, torch.compile to fuse) or keep it on the host"),
    "dtype": ("use this dtype where precision allows (torch.autocast)", "keep float32 for this op on this device "
              "(no fast kernels for the narrower dtype here)"),
    "threads": ("keep the intra-op thread count at this value", "fewer threads are faster: the cores are shared "
                "or the op is too small; set torch.set_num_threads (or OMP_NUM_THREADS) lower"),
}
