"""The report sections of the investigation notebooks, each displayed by one call in its own cell
under the notebook's markdown heading: findings (problems apart from "info" notes and
improvements), where a trace was recorded, a trace diff, what a ``cpu_bound`` verdict rests on,
sync sites and host scalar reads, a trace's memory over time, this run's perf-log rows, the explorer
widget and the machine that ran the notebook."""
from __future__ import annotations

import os

import pandas as pd

from ..results import findings_frame, html_table, html_text, html_warnings, rank_findings


def _show(*items) -> None:
    from IPython.display import HTML, display

    for item in items:
        display(HTML(item) if isinstance(item, str) else item)


def show_findings(result, *more_warnings: str, extra=(), info: str = "Notes (severity info)") -> None:
    """Ranked findings of ``result`` (and of ``extra`` results) and its warnings: what needs
    attention first (or a sentence saying nothing does), then the "info" findings under the
    heading ``info`` (a trace diff's improvements, notes), then the warnings."""
    findings = tuple(result.findings) + tuple(f for r in extra for f in r.findings)
    warnings = tuple(result.warnings) + tuple(w for r in extra for w in r.warnings) + tuple(more_warnings)
    problems, notes = split_findings(findings)
    nothing = "<p>No problem found (no finding above severity info).</p>"
    _show(html_table(findings_frame(problems)) if problems else nothing)
    if notes:
        _show(f"<h4>{html_text(info)}</h4>", html_table(findings_frame(notes)))
    _show(html_warnings(warnings))


def split_findings(findings) -> tuple[tuple, tuple]:
    """(findings that need attention, "info" findings), each most severe first."""
    ranked = rank_findings(findings)
    return tuple(f for f in ranked if f.severity != "info"), tuple(f for f in ranked if f.severity == "info")


def show_trace(trace) -> None:
    """Where the trace was recorded (from the trace itself) and its whole-file counts."""
    from ..analysis.summary import summarize
    from .tables import recorded_on_table, summary_frame

    _show(html_table(recorded_on_table(trace)), html_table(summary_frame(summarize(trace)), max_rows=40))


def show_diff(pairing) -> None:
    """A trace comparison (``comparison.TraceComparison``) read back: its biggest movers, the
    metrics, host waits by kind and record_function ranges of both sides, the two summaries side by
    side, where the after trace was recorded and its first step; nothing when ``pairing`` is None
    (live mode). Its
    findings and warnings (regressions, improvements, dropped partial steps) are shown by
    ``show_findings``."""
    if pairing is None:
        return
    from . import plots
    from .prose import diff_text, prose
    from .tables import recorded_on_table, summary_pair

    comparison, before, after = pairing.diff, pairing.before.trace, pairing.after.trace
    _show(prose(diff_text(comparison)), plots.diff_breakdown(comparison), html_table(comparison.to_frame()),
          "<h4>Host waits on the GPU, by kind (us per step)</h4>", _table_or(comparison.waits, "no host waits"),
          "<h4>record_function ranges (us per step)</h4>", _table_or(comparison.annotations, "no ranges"),
          html_table(summary_pair(before, after)), html_table(recorded_on_table(after)), plots.step_timeline(after))


def _table_or(frame, nothing: str) -> str:
    return html_table(frame) if len(frame) else f"<p>{html_text(nothing)} in either trace.</p>"


def show_verdict_evidence(result) -> None:
    """What a ``cpu_bound`` verdict rests on: each cause against its threshold, the verdict read
    back, and what the verdict calls for: compile facts (any torch.compile trace), the launch
    delay histogram ("GPU-bound (host ahead)")."""
    from . import plots
    from .prose import prose, verdict_text
    from .tables import compile_table, cpu_bound_evidence

    _show(prose(verdict_text(result)), html_table(cpu_bound_evidence(result)))
    if result.compile is not None:
        from ..analysis.compile import regions_note

        _show("<h4>torch.compile in this trace</h4>", html_table(compile_table(result.compile)),
              prose(_sentence(regions_note(result.compile["compiled_regions"]))))
    if result.verdict == "GPU-bound (host ahead)":
        _show(plots.queue_delay(result))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def show_sync_sites(result) -> None:
    """The sync points of a ``syncs`` result by kind and by site (user frame, inner frame), then
    the host scalar reads that did not wait, on their own; a sentence where there are none."""
    from . import plots
    from .tables import site_labels, sync_site_table

    sites = result.to_frame()
    if sites.empty:
        _show("<p>No sync point: nothing in this trace waited on the GPU.</p>")
    else:
        _show(html_table(result.by_kind),
              plots.breakdown(sites.assign(site=site_labels(sites)), name="site", value="blocked_us", top=15,
                              title="Sync sites by host time blocked", label_chars=80),
              html_table(sync_site_table(sites)))
    reads = result.host_read_sites()
    if len(reads):
        from ..analysis.syncs.result import reads_line

        _show(f"<h4>{html_text(reads_line(result.total))}</h4>",
              html_table(sync_site_table(reads, time_label="host_ms")))


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


def show_memory_timeline(trace) -> None:
    """Allocated and reserved memory over time per device, with the peak, growth per step and top
    allocating ops (``memory_timeline``), for a trace recorded with ``profile_memory=True``; else
    one line saying how to record it."""
    from ..analysis.memory import memory_timeline
    from .plots import memory_over_time

    timeline = memory_timeline(trace)
    if not timeline.devices:
        _show(html_text("No [memory] events in this trace: record with profile_memory=True "
                        "(perfkit profile --memory) to see memory over time."))
        return
    rows = [{"device": d["device"], "peak": f"{d['peak_bytes'] / 2**20:,.1f} MiB", "peak step": d["peak_step"],
             "peak op": d["peak_op"] or "-", "growth per step": f"{d['growth_per_step_bytes'] / 2**10:,.1f} KiB"
             if d["growth_per_step_bytes"] is not None else "-"} for d in timeline.devices]
    _show(memory_over_time(timeline), html_table(pd.DataFrame(rows)), html_warnings(timeline.warnings))


def show_machine() -> None:
    """The machine that ran the notebook: versions, devices, CPU, performance-relevant settings."""
    from ..bench.environment import environment_report

    env = environment_report()
    _show(html_table(env.to_frame(), max_rows=60), html_table(findings_frame(env.findings)))
