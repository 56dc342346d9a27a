"""A pathology and its fix, as a case study reads them: two traces and one A/B with a CI.

``load_pair`` gives the before and after ``Source`` of a case study: two recorded trace files
(``mode="trace"``) or two variants of a reference workload recorded now (``mode="live"``).
``Evidence`` is the A/B a case study quotes, from whichever measurement the mode allows: the
interleaved ``perfkit.compare`` of the two variants' steps (live: ``from_ab``) or the step-time
ratio of the two traces with its bootstrap CI over their profiled steps (``from_diff``). Either
way it holds the ratio after/before, its 95% CI, the harness's own verdict, and the device the
numbers come from, so a CPU figure is never read as a GPU one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..results import format_number
from ..stats import step_ci
from ..workbook import Source, check_mode
from .prose import ab_word
from .rows import ab_rows, row


def pair_subject(mode: str, before: Source, after: Source, workload: str, labels: tuple[str, str]) -> str:
    """The perf-log subject of a case study's pair: "trace A -> trace B", or for a live run
    "live WORKLOAD: LABEL_A -> LABEL_B" (sizes are not part of it: say what changed in ``change``)."""
    if check_mode(mode) == "trace":
        return f"{before.subject} -> {after.subject}"
    return f"live {workload}: {labels[0]} -> {labels[1]}"


# How each method's ratio is formed (a paired ratio can disagree with the two medians' ratio).
_RATIO = {True: "the median of per-round time ratios", False: "the ratio of the median step times"}


@dataclass(frozen=True)
class Evidence:
    """The A/B of a case study: ``ratio`` = after / before time (below 1: the fix is faster)
    with its 95% CI (``low``, ``high``), the measuring harness's ``verdict``, both medians in
    ms, ``device`` (where the times were measured: "cpu", "cuda", or a trace's GPU name) and
    ``method``; ``ab`` or ``diff`` (with both traces) keeps the underlying result."""

    labels: tuple[str, str]
    before_ms: float
    after_ms: float
    ratio: float
    low: float
    high: float
    verdict: str
    device: str
    method: str
    ab: object = None
    diff: object = None
    after_trace: object = field(default=None, repr=False)
    before_trace: object = field(default=None, repr=False)

    @property
    def speedup(self) -> float:
        """before / after (above 1: the fix is faster)."""
        return 1.0 / self.ratio if self.ratio and math.isfinite(self.ratio) else math.nan

    @property
    def speedup_ci(self) -> tuple[float, float]:
        inv = [1.0 / x if x and math.isfinite(x) else math.nan for x in (self.high, self.low)]
        return inv[0], inv[1]

    @property
    def on_gpu(self) -> bool:
        return self.device != "cpu"

    @property
    def said(self) -> str:
        """The verdict the text states: the harness's, or "inconclusive: ..." when an interleaved
        A/B's timing drifted or spread too far to support one (``prose.ab_word``), or a trace diff withheld
        its verdict (a busy machine, noisy steps, a CI too wide: ``trace_diff.conditions``)."""
        if self.ab is not None:
            return ab_word(self.ab)
        why = getattr(self.diff, "step_change", {}).get("unreliable", "") if self.verdict == "inconclusive" else ""
        return f"inconclusive: re-record on a quiet machine ({why})" if why else self.verdict

    def text(self) -> str:
        """One sentence: the fix's effect with its CI, how and where it was measured."""
        lo, hi = self.speedup_ci
        where = "" if self.on_gpu else " This is a CPU figure: it says nothing about a GPU's speed-up."
        ci = f" (95% CI {lo:.3g}-{hi:.3g}x)" if math.isfinite(lo) and math.isfinite(hi) else ""
        return (f"{self.labels[1]} against {self.labels[0]}: median step {format_number(self.before_ms, 3)} -> "
                f"{format_number(self.after_ms, 3)} ms; speed-up {self.speedup:.3g}x{ci}, {self.said} "
                f"({self.method} on {self.device}; {_RATIO[self.ab is not None]}).{where}")

    def verdict_line(self) -> str:
        """"<after>: faster (2.6x, CI 1.7-5.2x) on cpu": the card's headline."""
        if self.said != self.verdict:
            return f"{self.labels[1]}: {self.said} on {self.device}"
        lo, hi = self.speedup_ci
        ci = f", CI {lo:.3g}-{hi:.3g}x" if math.isfinite(lo) and math.isfinite(hi) else ""
        return f"{self.labels[1]}: {self.verdict} ({self.speedup:.3g}x{ci}) on {self.device}"

    def rows(self, investigation: str, subject: str, names: tuple[str, str]) -> list[dict]:
        """Perf-log rows: the after and before arms' median step (ms, metrics ``names[1]`` and
        ``names[0]``, CI over their samples or profiled steps) and the comparison: the speedup
        with its CI for an interleaved A/B (``rows.ab_rows``), the step ratio after/before with
        its bootstrap CI for a trace pair."""
        if self.ab is not None:
            return ab_rows(investigation, self.ab, names, subject, self.device)
        base = dict(subject=subject, device=self.device)
        steps = [t.steps["dur_us"].to_numpy(dtype=float) / 1e3 for t in (self.after_trace, self.before_trace)]
        out = [row(investigation, name, ms, "ms", ci=step_ci(s), **base)
               for name, ms, s in zip(names[::-1], (self.after_ms, self.before_ms), steps)]
        ci = (self.low, self.high) if math.isfinite(self.low) and math.isfinite(self.high) else None
        return out + [row(investigation, "step_ratio_after_before", self.ratio, "x", ci=ci, **base)]


def from_ab(ab, method: str = "interleaved A/B of the two variants' steps") -> Evidence:
    """Evidence from a ``perfkit.compare`` result (A = before, B = after), on the device its
    samples were timed on."""
    return Evidence(tuple(ab.labels), ab.median_a * 1e3, ab.median_b * 1e3, ab.ratio, ab.ci_low, ab.ci_high,
                    ab.verdict, ab.environment.get("device", "cpu"), method, ab=ab)


def from_diff(comparison, before: Source, after: Source, labels: tuple[str, str]) -> Evidence:
    """Evidence from ``perfkit.diff(before.trace, after.trace)``: median step times and their ratio
    with the bootstrap CI over the profiled steps, on the device ``after`` was recorded on; both
    traces are kept for the perf-log rows."""
    s = comparison.step_change
    return Evidence(tuple(labels), s["median_a_us"] / 1e3, s["median_b_us"] / 1e3, s["ratio"], s["low"], s["high"],
                    s["verdict"], after.device, f"trace diff, {s['n_a']} vs {s['n_b']} profiled steps",
                    diff=comparison, after_trace=after.trace, before_trace=before.trace)
