"""The trace mode of the investigations that compare two traces (compile_ab, amp_regression,
memory_leak): both traces loaded, diffed (``perfkit.diff``), and read as the notebook's card needs
them: subject, recording device, perf-log rows, verdict and fix.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..analysis.trace_diff.diff import diff
from ..analysis.summary import summarize
from ..errors import ParameterError
from ..results import html_table
from ..workbook import check_mode, trace_source
from . import plots
from .prose import PARTIAL_STEPS, finite, prose
from .rows import finite_rows, row, trace_step_rows
from .sections import show
from .sections import table_or
from .tables import recorded_on_table, summary_frame


@dataclass(frozen=True, eq=False)
class TraceComparison:
    """``before``, ``after``: the two ``Source``; ``diff``: the ``DiffResult``;
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
    """Load ``before_path`` and ``after_path`` (``trace_source``; ``mode`` must be
    "trace") and compare them for ``investigation``. Raises ParameterError / TraceError for a bad path or trace."""
    if check_mode(mode) != "trace":
        raise ParameterError(f"mode={mode!r}: comparing two traces reads trace files; record them first "
                             "(perfkit profile) and pass their paths with mode='trace'")
    before, after = trace_source(before_path, mode), trace_source(after_path, mode)
    result = diff(before.trace, after.trace)
    subject = f"{before.subject} -> {after.subject}"
    return TraceComparison(before=before, after=after, diff=result, subject=subject, device=after.device,
                           metrics=diff_rows(investigation, result, after.trace, subject, after.device),
                           verdict=diff_verdict(result), fix=diff_fix(result))


def diff_rows(investigation: str, result, after, subject: str, device: str) -> list[dict]:
    """A trace diff as rows: the after trace's median step (ms, CI over its steps) and the step
    ratio after/before with the diff's bootstrap CI."""
    s = result.step_change
    rows = trace_step_rows(investigation, after, subject, device)
    rows.append(row(investigation, "step_ratio_after_before", s["ratio"], "x", subject=subject, device=device,
                    ci=(s["low"], s["high"])))
    return finite_rows(rows)


def diff_text(result) -> str:
    """A trace diff read back in one paragraph: step-time ratio with CI and verdict over the full
    steps of each side (partial steps dropped, when any were), how many findings are regressions
    and how many improvements, new and vanished kernels, and the op whose per-step time moved most."""
    s = result.step_change
    ci = f" (CI {s['low']:.3g}-{s['high']:.3g})" if finite(s["low"], s["high"]) else ""
    regressions = sum(f.severity != "info" for f in result.findings)
    text = (f"A = {result.labels[0]}, B = {result.labels[1]}: median step B/A = {s['ratio']:.3g}{ci}, "
            f"{s['verdict']}, over {s['n_a']} and {s['n_b']} full step(s)")
    dropped = [w.split(":", 1)[0] for w in result.warnings if PARTIAL_STEPS in w]
    text += f" ({' and '.join(dropped)}: partial steps at the window's edge dropped, see the warnings). " if dropped \
        else ". "
    text += (f"{regressions} regression(s) and {len(result.findings) - regressions} improvement(s) or note(s). "
             f"{len(result.new_kernels)} new and {len(result.vanished_kernels)} vanished kernel name(s).")
    ops = result.ops.dropna(subset=["delta_per_step_us"])
    if len(ops):
        top = ops.loc[ops["delta_per_step_us"].abs().idxmax()]
        text += (f" Largest op change: {top['name']} ({top['status']}) {top['delta_per_step_us']:+,.1f} us per step.")
    return text


def diff_fix(result) -> str:
    """The fix a trace diff's report leads with: that of its most severe regression, or "" when
    nothing regressed (an improvement's note is not a fix)."""
    return next((f.fix for f in result.findings if f.severity != "info" and f.fix), "")


def diff_verdict(result) -> str:
    """A trace diff as a verdict line: "after vs before: faster (median step 0.62x, CI ...)"."""
    s = result.step_change
    ci = f", CI {s['low']:.3g}-{s['high']:.3g}" if finite(s["low"], s["high"]) else ""
    ratio = f" (median step after/before {s['ratio']:.3g}x{ci})" if finite(s["ratio"]) else ""
    why = f": {s['unreliable']}" if s["verdict"] == "inconclusive" else ""
    return f"after vs before: {s['verdict']}{ratio}{why}"


def show_diff(pairing) -> None:
    """A trace comparison (``comparison.TraceComparison``) read back: its biggest movers, the
    metrics, host waits by kind and record_function ranges of both sides, the two summaries side by
    side, where the after trace was recorded and its first step; nothing when ``pairing`` is None
    (live mode). Its
    findings and warnings (regressions, improvements, dropped partial steps) are shown by
    ``show_findings``."""
    if pairing is None:
        return

    comparison, before, after = pairing.diff, pairing.before.trace, pairing.after.trace
    show(prose(diff_text(comparison)), plots.diff_breakdown(comparison), html_table(comparison.to_frame()),
          "<h4>Host waits on the GPU, by kind (us per step)</h4>", table_or(comparison.waits, "no host waits"),
          "<h4>record_function ranges (us per step)</h4>", table_or(comparison.annotations, "no ranges"),
          html_table(summary_pair(before, after)), html_table(recorded_on_table(after)), plots.step_timeline(after))


def summary_pair(before, after) -> pd.DataFrame:
    """``summary_frame`` of two traces side by side: metric, before, after."""
    a, b = summary_frame(summarize(before)), summary_frame(summarize(after))
    # Matched by name: a compiled trace has rows the other may lack ("n/a" on that side).
    order = list(dict.fromkeys([*a["metric"], *b["metric"]]))
    pair = pd.DataFrame({"before": a.set_index("metric")["value"], "after": b.set_index("metric")["value"]})
    return pair.reindex(order).fillna("n/a").rename_axis("metric").reset_index()
