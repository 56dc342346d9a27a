"""The result of ``compile_ab``: eager vs compiled timings, graph breaks and recompiles, and the
findings drawn from them (what to fix, and whether compiling pays off in the planned run)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import pandas as pd

from ..results import (Finding, findings_frame, html_section, html_table, html_warnings,
                       rank_findings)
from .compare import ABResult, inconclusive_finding

# Dynamo's guard failures that a changed input shape or stride causes.
_SHAPE_GUARDS = ("size mismatch", "stride mismatch", "dimensionality", "ndim", "rank mismatch")


@dataclass(frozen=True)
class GraphBreak:
    """One place where dynamo split the graph: ``location`` is "file:line" in user code."""

    reason: str
    location: str
    code: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Recompile:
    """One recompilation: dynamo's ``compile_id`` ("frame/n"), the function, the failed guard
    (``reason``), and where that guard came from: ``location`` ("file:line" of the user code that
    read the value, "" when dynamo gives none, as for input shapes), its ``code`` and dynamo's
    ``hint``."""

    compile_id: str
    function: str
    reason: str
    location: str = ""
    code: str = ""
    hint: str = ""

    @property
    def on_shape(self) -> bool:
        """True when an input's shape/stride changed, False when a Python value did."""
        return any(k in self.reason for k in _SHAPE_GUARDS)


@dataclass(frozen=True)
class CompileABResult:
    """Eager (A) vs compiled (B). Times in seconds; ``timing`` holds every steady-state sample."""

    timing: ABResult
    eager_first_call_s: float
    compiled_first_call_s: float
    graph_breaks: tuple[GraphBreak, ...]
    recompiles: tuple[Recompile, ...]
    variant_call_s: tuple[float, ...] = ()
    backend: str = "inductor"
    mode: str = "default"
    device: str = "cpu"
    planned_steps: int = 10_000
    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()
    environment: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """The steady-state verdict: "faster" means compiled is faster than eager; "inconclusive: ..."
        when the timing supports none (``ABResult.conclusion``)."""
        return self.timing.conclusion

    @property
    def speedup(self) -> float:
        return self.timing.speedup

    @property
    def compile_time_s(self) -> float:
        """First compiled call minus a steady-state compiled call (seconds, >= 0)."""
        return max(0.0, self.compiled_first_call_s - self.timing.median_b)

    @property
    def saving_per_step_s(self) -> float:
        return self.timing.median_a - self.timing.median_b

    @property
    def break_even_steps(self) -> float:
        """Steps until compile time is repaid: compile_time / per-step saving, rounded up.
        ``math.inf`` unless the A/B verdict is "faster" (no established saving)."""
        if self.verdict != "faster" or self.saving_per_step_s <= 0:
            return math.inf
        return float(math.ceil(self.compile_time_s / self.saving_per_step_s))

    @property
    def graph_break_count(self) -> int:
        return len(self.graph_breaks)

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    def to_frame(self) -> pd.DataFrame:
        """One row per graph break or recompile: ``kind``, ``reason``, ``location``, ``detail``."""
        rows = [("graph_break", b.reason, b.location, b.detail) for b in self.graph_breaks]
        rows += [("recompile", r.reason, r.location or r.function, r.compile_id) for r in self.recompiles]
        return pd.DataFrame(rows, columns=["kind", "reason", "location", "detail"])

    def summary(self) -> dict:
        return {"backend": self.backend, "mode": self.mode, "device": self.device,
                "eager_median_s": self.timing.median_a, "compiled_median_s": self.timing.median_b,
                "speedup": self.speedup, "ci_low": self.timing.speedup_ci[0],
                "ci_high": self.timing.speedup_ci[1], "verdict": self.verdict,
                "compile_time_s": self.compile_time_s, "eager_first_call_s": self.eager_first_call_s,
                "compiled_first_call_s": self.compiled_first_call_s,
                "break_even_steps": self.break_even_steps, "graph_breaks": self.graph_break_count,
                "recompiles": self.recompile_count}

    def __repr__(self) -> str:
        return (f"CompileABResult({self.backend}: speedup={self.speedup:.3g}x {self.verdict}, "
                f"compile={self.compile_time_s:.3g}s, break_even={self.break_even_steps:.4g} steps, "
                f"breaks={self.graph_break_count}, recompiles={self.recompile_count})")

    def _repr_html_(self) -> str:
        parts = [html_table(pd.DataFrame([self.summary()])), html_table(findings_frame(self.findings))]
        if len(self.to_frame()):
            parts.append(html_table(self.to_frame()))
        return html_section(f"torch.compile A/B ({self.backend})", *parts, html_warnings(self.warnings))


def with_findings(r: CompileABResult) -> CompileABResult:
    """``r`` with its findings, most severe first."""
    findings = [f for f in (_break_finding(r), _recompile_finding(r), _speed_finding(r),
                            _break_even_finding(r)) if f is not None]
    return replace(r, findings=rank_findings(findings))


def _break_finding(r: CompileABResult) -> Finding | None:
    if not r.graph_breaks:
        return None
    first = r.graph_breaks[0]
    return Finding("high", f"{len(r.graph_breaks)} graph break(s): {first.reason} at {first.location}",
                   {"graph_breaks": len(r.graph_breaks), "first_code": first.code,
                    "sites": "; ".join(f"{b.reason} @ {b.location}" for b in r.graph_breaks[:5])},
                   "Make the code traceable: replace data-dependent Python branches with torch.where "
                   "or torch.cond, move print/logging/.item() out of forward; compile with "
                   "fullgraph=True to fail at the first break",
                   "any graph break (each one splits the graph and blocks fusion across it)")


_SHAPE_FIX = ("Pad inputs to a few fixed shapes, mark the varying dim with torch._dynamo.mark_dynamic(x, 0), "
              "or compile with dynamic=True")
_VALUE_FIX = ("Dynamo specializes on Python values the code reads (flags, ints, config attributes): each new "
              "value compiles another graph, up to recompile_limit, then runs eagerly. Keep such values fixed "
              "during a run, branch outside the compiled function (one compiled function per setting), or "
              "pass the value as a tensor and select with torch.where")


def _recompile_finding(r: CompileABResult) -> Finding | None:
    if not r.recompiles:
        return None
    first = next((x for x in r.recompiles if x.location), r.recompiles[0])
    where = f" at {first.location}" if first.location else f" in {first.function}"
    fixes = [fix for fix, hit in ((_SHAPE_FIX, any(x.on_shape for x in r.recompiles)),
                                  (_VALUE_FIX, not all(x.on_shape for x in r.recompiles))) if hit]
    hints = sorted({x.hint for x in r.recompiles if x.hint})
    return Finding("medium", f"{len(r.recompiles)} recompile(s): {first.reason}{where}",
                   {"recompiles": len(r.recompiles), "variant_call_s": sum(r.variant_call_s),
                    "reasons": "; ".join(sorted({x.reason for x in r.recompiles}))[:300],
                    **({"code": first.code} if first.code else {})},
                   ". ".join(fixes + [f"dynamo: {h}" for h in hints]), "any recompile after the first compile of a frame")


def _speed_finding(r: CompileABResult) -> Finding | None:
    unreliable = inconclusive_finding(r.timing, f"torch.compile ({r.backend}) A/B")
    if unreliable is not None or r.verdict == "faster":
        return unreliable
    severity = "high" if r.verdict == "slower" else "medium"
    # "fix graph breaks first" only when there are some: with none, the advice contradicts the count
    breaks = (f"Fix the {r.graph_break_count} graph break(s) above first, then try" if r.graph_break_count
              else "No graph break split the model: try")
    return Finding(severity, f"torch.compile ({r.backend}) shows no steady-state speedup: {r.verdict}",
                   {"speedup": r.speedup, "ci_low": r.timing.speedup_ci[0], "ci_high": r.timing.speedup_ci[1],
                    "n": r.timing.n, "graph_breaks": r.graph_break_count},
                   f"{breaks} mode='max-autotune' (GPU) or larger batches; small, launch-bound or "
                   "already-fused models may not benefit: keep them eager",
                   f"verdict from a {r.timing.test.confidence:.0%} CI and a "
                   f"{r.timing.test.min_effect:.0%} minimum effect")


def _break_even_finding(r: CompileABResult) -> Finding | None:
    if not (math.isfinite(r.break_even_steps) and r.break_even_steps > r.planned_steps):
        return None
    return Finding("medium", f"compile pays off only after {r.break_even_steps:,.0f} steps "
                   f"(planned run: {r.planned_steps:,})",
                   {"compile_time_s": r.compile_time_s, "saving_per_step_s": r.saving_per_step_s},
                   "Compile only long runs, or keep compiled artifacts between runs "
                   "(torch.compiler.save_cache_artifacts / load_cache_artifacts)",
                   "break-even above planned_steps")
