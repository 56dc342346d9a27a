"""The report sections every investigation notebook shares, each displayed by one call in its own
cell under the notebook's markdown heading: findings, where a trace was recorded, a trace diff,
this run's perf-log rows, the explorer widget and the machine that ran the notebook."""
from __future__ import annotations

import os

from ..results import findings_frame, html_table, html_warnings


def _show(*items) -> None:
    from IPython.display import HTML, display

    for item in items:
        display(HTML(item) if isinstance(item, str) else item)


def show_findings(result, *more_warnings: str, extra=()) -> None:
    """Ranked findings of ``result`` (and of ``extra`` results) and its warnings."""
    findings = tuple(result.findings) + tuple(f for r in extra for f in r.findings)
    warnings = tuple(result.warnings) + tuple(w for r in extra for w in r.warnings) + tuple(more_warnings)
    _show(html_table(findings_frame(findings)), html_warnings(warnings))


def show_trace(trace) -> None:
    """Where the trace was recorded (from the trace itself) and its whole-file counts."""
    from ..analysis.summary import summarize
    from .tables import recorded_on_table, summary_frame

    _show(html_table(recorded_on_table(trace)), html_table(summary_frame(summarize(trace)), max_rows=40))


def show_diff(comparison, before, after) -> None:
    """A trace diff read back, its biggest movers, the two summaries side by side, where the
    after trace was recorded and its first step; nothing when ``comparison`` is None (live mode)."""
    if comparison is None:
        return
    from . import plots
    from .prose import diff_text, prose
    from .tables import recorded_on_table, summary_pair

    _show(prose(diff_text(comparison)), plots.diff_breakdown(comparison), html_table(comparison.to_frame()),
          html_table(summary_pair(before, after)), html_table(recorded_on_table(after)), plots.step_timeline(after))


def show_log(logged, perf_log_path: str | os.PathLike, investigation: str, subject: str) -> None:
    """This run's perf-log rows as judged, and the trend of the subject's earlier runs when there
    are at least two."""
    from . import plots
    from .rows import history, logged_table

    _show(html_table(logged_table(logged)))
    earlier = history(perf_log_path, investigation, subject)
    if earlier["run_id"].nunique() >= 2:
        _show(plots.perf_log_trend(earlier))


def show_explorer(interactive: bool, trace_path) -> None:
    """The trace explorer widget, in JupyterLab only (``interactive=True``): batch and HTML runs
    stay static."""
    if interactive:
        from .inputs import find_trace
        from .widgets import explorer

        _show(explorer(trace_path=find_trace(trace_path)))


def show_machine() -> None:
    """The machine that ran the notebook: versions, devices, CPU, performance-relevant settings."""
    from ..bench.environment import environment_report

    env = environment_report()
    _show(html_table(env.to_frame(), max_rows=60), html_table(findings_frame(env.findings)))
