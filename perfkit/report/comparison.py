"""The trace mode of the investigations that compare two traces (compile_ab, amp_regression,
memory_leak): both traces loaded, diffed (``perfkit.diff``), and read as the notebook's card needs
them: subject, recording device, perf-log rows, verdict and fix.
"""
from __future__ import annotations

from dataclasses import dataclass

from .inputs import load_source
from .prose import diff_fix, diff_verdict
from .rows import diff_rows


@dataclass(frozen=True, eq=False)
class TraceComparison:
    """``before``, ``after``: the two ``inputs.Source``; ``diff``: the ``DiffResult``;
    ``subject``: "before -> after" as the perf log names it; ``device``: where the after trace was
    recorded; ``metrics``: perf-log rows; ``verdict`` and ``fix``: the card's lines."""
    before: object
    after: object
    diff: object
    subject: str
    device: str
    metrics: list
    verdict: str
    fix: str


def compare_traces(investigation: str, mode: str, before_path: str, after_path: str) -> TraceComparison:
    """Load ``before_path`` and ``after_path`` (``inputs.load_source`` in ``mode``, "trace") and
    compare them for ``investigation``. Raises ParameterError / TraceError for a bad path or trace."""
    from ..analysis.diff.analyze import diff

    before, after = load_source(mode, before_path), load_source(mode, after_path)
    result = diff(before.trace, after.trace)
    subject = f"{before.subject} -> {after.subject}"
    return TraceComparison(before=before, after=after, diff=result, subject=subject, device=after.device,
                           metrics=diff_rows(investigation, result, after.trace, subject, after.device),
                           verdict=diff_verdict(result), fix=diff_fix(result))
