"""``reports/index.html``: every dated report (newest first) with status and headline
numbers, the perf log with regressions marked, and a trend plot per metric.

Everything shown from a log or a record is escaped (``perfkit.report.html``); plots are PNG
data URIs, so the page opens offline. The index is written to a temporary file and moved into
place, so a reader never sees half a page.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import html as h
from ..atomic import write_text_atomic
from ..errors import PerfkitError
from .perflog import PerfLog, format_delta, format_value
from .perflog_csv import empty_log
from .runner import load_run_record

_DATE_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_TREND_POINTS = 200
_TREND_WIDTH_IN = 5.0


@dataclass(frozen=True)
class ReportEntry:
    """One report file: ``date`` folder, notebook ``name``, ``html`` path relative to the
    reports dir, ``status`` ok/failed/unknown, ``error`` and ``headline`` metric strings."""

    date: str
    name: str
    html: str
    status: str
    error: str = ""
    headline: tuple[str, ...] = ()


def build_index(reports_dir: str | os.PathLike = "reports",
                perf_log: str | os.PathLike | None = None) -> Path:
    """Write ``reports_dir/index.html`` and return its path.

    ``perf_log`` defaults to ``reports_dir/perf_log.csv``; a missing log just leaves its
    sections empty, an unreadable one is reported on the page instead of failing the build.
    """
    root = Path(reports_dir)
    root.mkdir(parents=True, exist_ok=True)
    log, problems = _read_log(Path(perf_log) if perf_log else root / "perf_log.csv")
    entries = scan_reports(root, log)
    parts = [h.html_warnings(problems), _reports_section(entries),
             "<h2>Performance log</h2>", h.perf_log_table(log), _trends_section(log)]
    target = root / "index.html"
    write_text_atomic(target, h.page("perfkit reports", *parts))
    return target


def scan_reports(root: Path, log: pd.DataFrame) -> list[ReportEntry]:
    """Report entries of every ``YYYY-MM-DD`` folder under ``root``, newest date first."""
    days = sorted((d for d in root.iterdir() if d.is_dir() and _DATE_DIR.match(d.name)),
                  key=lambda d: d.name, reverse=True)
    return [_entry(root, page, log) for day in days for page in sorted(day.glob("*.html"))]


def _entry(root: Path, page: Path, log: pd.DataFrame) -> ReportEntry:
    day, name = page.parent.name, page.stem
    record = load_run_record(page.with_name(f"{name}.run.json"))
    status = record.get("status") or _papermill_status(page.with_suffix(".ipynb"))
    return ReportEntry(date=day, name=name, html=page.relative_to(root).as_posix(), status=status,
                       error=record.get("error", ""), headline=headline(log, day, name))


def headline(log: pd.DataFrame, day: str, name: str) -> tuple[str, ...]:
    """"metric = value unit (delta, verdict)" for the latest row of each metric the run
    logged: rows with ``run_id`` "DAY/name", else rows of that date and investigation."""
    if log.empty:
        return ()
    rows = log[log["run_id"] == f"{day}/{name}"]
    if rows.empty:
        rows = log[(log["date"] == day) & (log["investigation"] == name)]
    rows = rows.drop_duplicates("metric", keep="last")
    return tuple(_headline_text(r) for r in rows.to_dict("records"))


def _headline_text(row: dict) -> str:
    delta = format_delta(row["delta_pct"])
    delta = f"{delta}, " if delta else ""
    return f"{row['metric']} = {format_value(row['value'], row['unit'])} ({delta}{row['verdict']})"


def _papermill_status(notebook: Path) -> str:
    import json

    try:
        meta = json.loads(notebook.read_text(encoding="utf-8"))["metadata"]["papermill"]
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"
    return "failed" if meta.get("exception") else "ok"


def _read_log(path: Path) -> tuple[pd.DataFrame, list[str]]:
    try:
        return PerfLog(path).read(missing_ok=True), []
    except PerfkitError as exc:
        return empty_log(), [f"perf log unreadable, not shown: {exc}"]


def _reports_section(entries: list[ReportEntry]) -> str:
    if not entries:
        return "<h2>Reports</h2><p>No dated reports yet: run <code>perfkit run</code>.</p>"
    parts = ["<h2>Reports</h2>"]
    for day in dict.fromkeys(e.date for e in entries):
        rows = [e for e in entries if e.date == day]
        parts.append(f"<h3>{h.esc(day)}</h3>" + _entries_table(rows))
    return "".join(parts)


def _entries_table(entries: list[ReportEntry]) -> str:
    frame = pd.DataFrame({
        "report": [h.link(e.html, e.name) for e in entries],
        "status": [f"<span class='status-{h.esc(e.status)}'>{h.esc(e.status)}</span>" for e in entries],
        "headline": ["<br>".join(h.esc(x) for x in e.headline) for e in entries],
        "error": [e.error for e in entries],
    })
    return h.table(frame, raw_columns=("report", "status", "headline"),
                   row_class=lambda r: "failed" if "status-failed" in r["status"] else "")


def _trends_section(log: pd.DataFrame) -> str:
    if log.empty:
        return ""
    keys = ["investigation", "metric", "unit", "device"]
    plots = [_trend_img(key, group.tail(_MAX_TREND_POINTS)) for key, group in log.groupby(keys, sort=True)]
    return "<h2>Trends</h2>" + "".join(f"<div class='trend'>{p}</div>" for p in plots)


def _trend_img(key: tuple, rows: pd.DataFrame) -> str:
    from .plots import figure_png, perf_log_trend

    investigation, metric, _, device = key
    png = figure_png(perf_log_trend(rows, width=_TREND_WIDTH_IN))
    return h.png_img(png, alt=f"{investigation}: {metric} ({device})")


