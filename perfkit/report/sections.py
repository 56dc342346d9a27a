"""The report sections of the investigation notebooks, each displayed by one call in its own cell
under the notebook's markdown heading: findings (problems apart from "info" notes and
improvements), where a trace was recorded, a trace diff, what a ``cpu_bound`` verdict rests on,
sync sites and host scalar reads, a trace's memory over time, this run's perf-log rows, the explorer
widget and the machine that ran the notebook."""
from __future__ import annotations

import os

from ..analysis.summary import summarize
from ..results import findings_frame, html_table, html_text, html_warnings, rank_findings
from ..workbook import find_trace
from . import plots
from .rows import history, logged_table
from .tables import machine_table, recorded_on_table, summary_frame
from .widgets import explorer


def show(*items) -> None:
    from IPython.display import HTML, display

    for item in items:
        display(HTML(item) if isinstance(item, str) else item)


def show_findings(result, *more_warnings: str, extra=(), info: str = "Notes (severity info)") -> None:
    """Ranked findings of ``result`` (and of ``extra`` results) and its warnings: what needs
    attention first (or a sentence saying nothing does), then the "info" findings under the
    heading ``info`` (a trace diff's improvements, notes), then the warnings."""
    findings = tuple(result.findings) + tuple(f for r in extra for f in r.findings)
    warnings = tuple(dict.fromkeys((*result.warnings, *(w for r in extra for w in r.warnings), *more_warnings)))
    problems, notes = split_findings(findings)
    nothing = "<p>No problem found (no finding above severity info).</p>"
    show(html_table(findings_frame(problems)) if problems else nothing)
    if notes:
        show(f"<h4>{html_text(info)}</h4>", html_table(findings_frame(notes)))
    show(html_warnings(warnings))


def split_findings(findings) -> tuple[tuple, tuple]:
    """(findings that need attention, "info" findings), each most severe first."""
    ranked = rank_findings(findings)
    return tuple(f for f in ranked if f.severity != "info"), tuple(f for f in ranked if f.severity == "info")


def show_trace(trace) -> None:
    """Where the trace was recorded (from the trace itself) and its whole-file counts."""
    show(html_table(recorded_on_table(trace)), html_table(summary_frame(summarize(trace)), max_rows=40))


def show_log(logged, perf_log_path: str | os.PathLike, investigation: str, subject: str) -> None:
    """This run's perf-log rows as judged, and the trend of the subject's earlier runs when there
    are at least two."""
    show(html_table(logged_table(logged)))
    earlier = history(perf_log_path, investigation, subject)
    if earlier["run_id"].nunique() >= 2:
        show(plots.perf_log_trend(earlier))


def show_explorer(interactive: bool, trace_path) -> None:
    """The trace explorer widget, in JupyterLab only (``interactive=True``): batch and HTML runs
    stay static."""
    if interactive:
        show(explorer(trace_path=find_trace(trace_path)))


def show_machine(env) -> None:
    """The machine that ran the notebook (``env``: ``perfkit.environment_report()``): versions,
    devices, CPU, performance-relevant settings."""
    show(html_table(machine_table(env), max_rows=60), html_table(findings_frame(env.findings)))


def table_or(frame, nothing: str) -> str:
    return html_table(frame) if len(frame) else f"<p>{html_text(nothing)} in either trace.</p>"
