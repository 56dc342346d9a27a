"""The result of ``hunt_leak``: the growth of each sampled series and the verdict it led to, the
growing object types and allocation lines, and the findings drawn from them."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from ..analysis.stacks import is_library
from ..results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings

COLUMNS = ("step", "rss_bytes", "tracemalloc_bytes", "cuda_allocated_bytes", "cuda_reserved_bytes", "objects")
_TENSOR_TYPES = ("torch.Tensor", "torch.nn.parameter.Parameter")


@dataclass(frozen=True)
class SeriesGrowth:
    """Least-squares growth of one sampled series, per 1,000 steps, with its CI."""

    series: str
    unit: str
    per_1000: float
    ci_low: float
    ci_high: float
    threshold: float
    samples: int

    @property
    def state(self) -> str:
        """"growing" (CI above threshold), "flat" (CI below it) or "unclear"."""
        if self.ci_low > self.threshold:
            return "growing"
        return "flat" if self.ci_high < self.threshold else "unclear"


@dataclass(frozen=True, eq=False)
class LeakResult:
    """Outcome of ``hunt_leak``. ``samples`` rows follow ``COLUMNS``; ``top_types`` rows are
    (type, first_count, last_count); ``top_lines`` rows are (file:line, size_diff_bytes,
    count_diff) from a tracemalloc snapshot diff between the first and last sample."""

    verdict: str
    decided_by: str
    growth: tuple[SeriesGrowth, ...]
    samples: tuple[tuple, ...]
    top_types: tuple[tuple[str, int, int], ...]
    top_lines: tuple[tuple[str, int, int], ...]
    steps: int
    warmup: int
    sample_every: int
    device: str
    elapsed_s: float
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def series(self, name: str) -> SeriesGrowth | None:
        return next((g for g in self.growth if g.series == name), None)

    @property
    def decision(self) -> SeriesGrowth | None:
        """The growth of the series that decided the verdict."""
        return self.series(self.decided_by)

    @property
    def per_1000(self) -> float:
        """Growth per 1,000 steps of the deciding series (NaN if none)."""
        return self.decision.per_1000 if self.decision else float("nan")

    @property
    def ci(self) -> tuple[float, float]:
        return (self.decision.ci_low, self.decision.ci_high) if self.decision else (float("nan"),) * 2

    def to_frame(self) -> pd.DataFrame:
        """The samples: step, rss_bytes, tracemalloc_bytes, cuda_allocated_bytes,
        cuda_reserved_bytes, objects (NaN where not measured)."""
        return pd.DataFrame(list(self.samples), columns=list(COLUMNS))

    def growth_frame(self) -> pd.DataFrame:
        """One row per series: growth per 1,000 steps, its CI, threshold and state."""
        rows = [{"series": g.series, "unit": g.unit, "per_1000_steps": g.per_1000, "ci_low": g.ci_low,
                 "ci_high": g.ci_high, "threshold": g.threshold, "state": g.state} for g in self.growth]
        return pd.DataFrame(rows, columns=["series", "unit", "per_1000_steps", "ci_low", "ci_high",
                                           "threshold", "state"])

    def types_frame(self) -> pd.DataFrame:
        """Growing object types: type, first, last, growth, per_1000_steps."""
        span = max(self.steps, 1)
        rows = [{"type": t, "first": a, "last": b, "growth": b - a, "per_1000_steps": (b - a) * 1000 / span}
                for t, a, b in self.top_types]
        return pd.DataFrame(rows, columns=["type", "first", "last", "growth", "per_1000_steps"])

    def lines_frame(self) -> pd.DataFrame:
        """Growing allocation lines: location (file:line), size_diff_bytes, count_diff."""
        return pd.DataFrame(list(self.top_lines), columns=["location", "size_diff_bytes", "count_diff"])

    @property
    def findings(self) -> tuple[Finding, ...]:
        return rank_findings(_findings(self))

    def __repr__(self) -> str:
        lo, hi = self.ci
        return (f"LeakResult(verdict={self.verdict!r}, decided_by={self.decided_by!r}, "
                f"per_1000={self.per_1000:,.4g} [{lo:,.4g}, {hi:,.4g}], steps={self.steps})")

    def _repr_html_(self) -> str:
        head = html_text(f"verdict: {self.verdict} (decided by {self.decided_by}; {self.steps} steps "
                         f"on {self.device})")
        return html_section("Leak hunt", f"<p>{head}</p>", html_table(self.growth_frame()),
                            html_table(self.types_frame()), html_table(self.lines_frame()),
                            html_table(findings_frame(self.findings)), html_warnings(self.warnings))


def is_user_line(filename: str) -> bool:
    """Whether an allocating line is the user's code: not the standard library, site-packages or a
    framework (``analysis.stacks.is_library``), nor perfkit's harness; perfkit's reference workloads
    stand in for the user's loop, so they count as the user's."""
    path = filename.replace("\\", "/")
    if "/perfkit/workloads/" in path:
        return True
    return not is_library(path) and "/perfkit/" not in path


def _fmt(value: float, unit: str) -> str:
    if unit != "bytes":
        return f"{value:,.0f} {unit}"
    for scale, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {suffix}"
    return f"{value:,.0f} B"


def _findings(r: LeakResult) -> list[Finding]:
    verdict = _verdict_finding(r)
    if r.verdict != "leak":
        return [verdict]
    causes = _causes(r)
    return [replace(verdict, fix=_leak_fix(r, causes)), *causes]


def _leak_fix(r: LeakResult, causes: list[Finding]) -> str:
    """The leak's fix: its first cause's, at the user's growing line when there is one."""
    mine = next((loc for loc, _, _ in r.top_lines if is_user_line(loc.rsplit(":", 1)[0])), None)
    at = f" (the growing line in your code: {mine})" if mine else ""
    if causes:
        return causes[0].fix + at
    return ("no Python object type or allocation line grows with it: the memory is held outside Python's heap "
            "(C/C++ extensions, tensors kept alive in C++, CUDA memory); take CUDA memory snapshots "
            "(mode='snapshot')" + at)


def _causes(r: LeakResult) -> list[Finding]:
    """What grows: tensors (object counts), then the biggest growing allocation line."""
    out = []
    objects = r.series("objects")
    tensors = sum(b - a for t, a, b in r.top_types if t in _TENSOR_TYPES) * 1000 / r.steps
    if objects is not None and tensors > objects.threshold:
        out.append(Finding("high", f"torch tensors accumulate: +{tensors:,.0f} per 1,000 steps",
                           {"tensors_per_1000_steps": tensors},
                           "store loss.item() (or loss.detach()) instead of the loss tensor, and don't keep "
                           "outputs across steps; if you must, keep .detach().cpu() copies in a bounded "
                           "collections.deque(maxlen=...)", "tensor objects grow faster than the objects threshold"))
    heap = r.series("tracemalloc_bytes")
    big = [row for row in r.top_lines if heap is not None and row[1] * 1000 / r.steps > heap.threshold]
    if big:
        loc, size, count = big[0]
        out.append(Finding("high", f"Python allocations grow at {loc}",
                           {"bytes_per_1000_steps": size * 1000 / r.steps, "blocks": count},
                           "what this line allocates is kept across steps: bound the history with "
                           "collections.deque(maxlen=...) or keep running statistics instead of appending",
                           "largest growing line of a tracemalloc snapshot diff (first vs last sample) "
                           "above the heap threshold"))
    return out


def _verdict_finding(r: LeakResult) -> Finding:
    d = r.decision
    if d is None:
        return Finding("medium", "no memory series could be measured", {}, "check that psutil works here")
    ev = {"series": d.series, "per_1000_steps": _fmt(d.per_1000, d.unit),
          "ci": f"[{_fmt(d.ci_low, d.unit)}, {_fmt(d.ci_high, d.unit)}]"}
    rule = f"threshold {_fmt(d.threshold, d.unit)} per 1,000 steps on the CI of a least-squares slope"
    if r.verdict == "leak":
        return Finding("critical", f"memory leak: {d.series} grows {_fmt(d.per_1000, d.unit)} per 1,000 steps",
                       ev, "", rule)  # the fix: _leak_fix, from what grows
    if r.verdict == "no leak":
        return Finding("info", "no leak detected", ev, "", rule)
    fix = ("RSS grows while the Python heap and object counts are flat: the memory is outside "
           "Python's allocator (C/C++ extensions, tensors held only in C++, allocator fragmentation); "
           "re-run with more steps" if d.series == "rss_bytes" else "run more steps (steps=1000+) so the CI narrows")
    return Finding("medium", f"leak inconclusive ({d.series})", ev, fix, rule)
