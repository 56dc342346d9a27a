"""``reports/index.html``: what the latest run found, one line per report (investigation, the trace
or subject it read, verdict, one number), then the earlier runs, the performance log (laid out to
fit a 1280 px page: long text wraps, notes are clipped to three lines with the whole note on hover)
and a trend plot per metric logged by at least two runs.

The page is rendered from ``templates/index.html.j2`` by jinja2 with autoescape on: every name
from a log, a record or a file name is escaped, links are URL-quoted relative paths. Plots are
PNG data URIs, so the page opens offline. The page is written atomically, mode 0644.
"""
from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from ...atomic import write_text_atomic
from ...errors import PerfkitError
from ...workbook import reports_dir as default_reports
from ..card import card_summary, flag_text, plain_line, read_card
from ..perflog import MIN_EFFECT, PerfLog, Z, display_frame, empty_log
from ..plots import figure_png, perf_log_trend
from .records import load_run_record

_BREAK_AFTER = re.compile(r"([/_.])")
_DATE_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME_DIR = re.compile(r"^\d{6}(-\d+)?$")
_TRACE_SUFFIX = re.compile(r"\.pt\.trace\.json(\.gz)?$")  # what every file of the profiler's handler ends with
# What a report row's subject cell holds on one line at 1280 px (19% of the table, 0.9em): past it the
# cell shows the end, where runs of one script differ (their date-time), not the start they share.
SUBJECT_CHARS = 28
LOG_ROWS_SHOWN = 200
_MAX_TREND_POINTS = 200
MAX_TREND_PLOTS = 24
_TREND_WIDTH_IN = 5.0


@dataclass(frozen=True)
class ReportEntry:
    """One report: ``run_id`` ("DATE/HHMMSS", or "DATE" for reports of the older per-day
    layout), notebook ``name``, ``href`` (URL-quoted, relative to the reports folder),
    ``status`` ok/failed/unknown, ``error``, and from its verdict card (``card_summary``) the
    ``subject`` it read, its ``verdict``, one ``number`` and the ``prediction`` of its top fix."""

    run_id: str
    name: str
    href: str
    status: str
    error: str = ""
    subject: str = ""
    verdict: str = ""
    number: str = ""
    prediction: str = ""

    @property
    def shown_subject(self) -> str:
        """``subject`` as its one-line cell shows it (the whole on hover): a trace path without the suffix every
        profiler trace shares (".pt.trace.json.gz"), its end when still too long: "…train_cnn-2026-12-02-143012" for
        "traces/train_cnn-2026-12-02-143012.pt.trace.json.gz", where an ellipsis at the end left every run of
        the script as "traces/train_cnn-2026-12-…". A live subject (words: "mlp b64 f32 h128 l2 bfloat16 adam
        steps=10x20") keeps its beginning, which says what was run."""
        text = self.subject
        if len(text) <= SUBJECT_CHARS:
            return text
        if " " in text:
            return text[:SUBJECT_CHARS - 1] + "…"
        text = text if "*" in text else _TRACE_SUFFIX.sub("", text) or text
        return text if len(text) <= SUBJECT_CHARS else "…" + text[-(SUBJECT_CHARS - 1):]


def build_index(reports_dir: str | os.PathLike | None = None, perf_log: str | os.PathLike | None = None) -> Path:
    """Write ``reports_dir/index.html`` (default: the workbook's ``reports/``) and return its path.

    ``perf_log`` defaults to ``reports_dir/perf_log.csv``; a missing log leaves its sections
    empty, an unreadable one is named on the page instead of failing the build.
    """
    root = Path(reports_dir) if reports_dir is not None else default_reports()
    root.mkdir(parents=True, exist_ok=True)
    log, problems = _read_log(Path(perf_log) if perf_log else root / "perf_log.csv")
    runs = _group(scan_reports(root))
    target = root / "index.html"
    write_text_atomic(target, _render(runs, log, problems))
    return target


def scan_reports(root: Path) -> list[ReportEntry]:
    """Every report under ``root``: ``DATE/HHMMSS/<name>.html`` (and ``DATE/<name>.html`` of the
    older layout), newest run first."""
    pages = []
    for day in (d for d in root.iterdir() if d.is_dir() and _DATE_DIR.match(d.name)):
        pages += [p for p in day.glob("*.html")]
        pages += [p for t in day.iterdir() if t.is_dir() and _TIME_DIR.match(t.name) for p in t.glob("*.html")]
    pages.sort(key=lambda p: (p.parent.relative_to(root).as_posix(), p.stem))
    runs = sorted({p.parent for p in pages}, key=lambda d: d.relative_to(root).as_posix(), reverse=True)
    return [_entry(root, page) for run in runs for page in pages if page.parent == run]


def _entry(root: Path, page: Path) -> ReportEntry:
    record = load_run_record(page.with_name(f"{page.stem}.run.json"))
    status = record.get("status") or _papermill_status(page.with_suffix(".ipynb"))
    rel = page.relative_to(root).as_posix()
    # a plain papermill run writes no run record: its card is the one the executed notebook displayed
    card = card_summary(record.get("card") or _notebook_card(page.with_suffix(".ipynb")))
    return ReportEntry(run_id=page.parent.relative_to(root).as_posix(), name=page.stem, href=quote(rel, safe="/"),
                       status=status, error=plain_line(record.get("error", "")), subject=card.subject,
                       verdict=card.verdict, number=card.number, prediction=card.prediction)


def _latest_of_the_others(runs: list[dict]) -> list[ReportEntry]:
    """The newest report of each notebook the latest run did not run (``perfkit run cpu_bound`` after
    a full run leaves the other investigations' latest results where they are read first)."""
    seen = {e.name for e in runs[0]["entries"]}
    out = []
    for run in runs[1:]:
        for e in run["entries"]:
            if e.name not in seen:
                seen.add(e.name)
                out.append(e)
    return out


def _group(entries: list[ReportEntry]) -> list[dict]:
    runs = {}
    for e in entries:
        runs.setdefault(e.run_id, []).append(e)
    return [{"run_id": run_id, "entries": items} for run_id, items in runs.items()]


def _render(runs: list[dict], log: pd.DataFrame, problems: list[str]) -> str:
    from jinja2 import Environment, PackageLoader, select_autoescape

    env = Environment(loader=PackageLoader("perfkit.report.publish", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["breakable"] = breakable
    latest = dict(runs[0], earlier=_latest_of_the_others(runs)) if runs else None
    if latest:
        run_rows = log[log["run_id"].str.startswith(latest["run_id"] + "/")] if len(log) else log
        latest["regressed"] = int((run_rows["verdict"] == "regressed").sum()) if len(run_rows) else 0
    shown = log_table(log.tail(LOG_ROWS_SHOWN))
    trends, trends_hidden = _trends(log)
    return env.get_template("index.html.j2").render(
        problems=problems, latest=latest, older=runs[1:], log_columns=list(shown.columns),
        log_rows=shown.to_dict("records"), log_total=len(log), log_hidden=len(log) > LOG_ROWS_SHOWN,
        trends=trends, trends_hidden=trends_hidden, min_effect=f"{MIN_EFFECT:.0%}", z=f"{Z:.2f}")


def breakable(text):
    """``text`` escaped (a ``Markup``), with a line-break opportunity (``<wbr>``) after each "/", "_"
    and ".", so a narrow column wraps a run id, trace name or metric name there rather than mid-word."""
    from markupsafe import Markup, escape  # jinja2's own dependency: optional, like jinja2 (_render)

    return Markup("").join(Markup(f"{part}<wbr>") if _BREAK_AFTER.fullmatch(part) else escape(part)
                           for part in _BREAK_AFTER.split(str(text)) if part)


def log_table(log: pd.DataFrame) -> pd.DataFrame:
    """The perf log's rows as the index shows them (``display_frame``, newest first), without
    what repeats: the run id's trailing "/investigation" (its own column), the "trace " before
    every subject, and the change column when no row says what changed; a yes/no metric (unit
    "flag") reads yes or no, as on the card."""
    shown = display_frame(log)
    if shown.empty:
        return shown
    runs = [r.removesuffix(f"/{i}") for r, i in zip(shown["run"].astype(str), shown["investigation"].astype(str))]
    newest_first = log.iloc[::-1]
    flags = [flag_text(v) if u == "flag" else after
             for v, u, after in zip(newest_first["value"], newest_first["unit"], shown["after"])]
    shown = shown.assign(run=runs, subject=shown["subject"].astype(str).str.removeprefix("trace "), after=flags)
    if not shown["change"].fillna("").astype(str).str.strip().any():
        shown = shown.drop(columns="change")
    return shown


def _notebook_card(notebook: Path) -> dict:
    """The verdict card an executed notebook displayed (``read_card``), {} when it has none or cannot be read."""
    try:
        import nbformat  # heavy optional dependency (the workbook extra), as papermill's output is

        return read_card(nbformat.read(notebook, as_version=4))
    except (ImportError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


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


def _trends(log: pd.DataFrame) -> tuple[list[dict], int]:
    """One small figure per (investigation, subject, metric, device) logged by at least 2 runs (the
    MAX_TREND_PLOTS logged most recently), and how many more such metrics there are."""
    if log.empty:
        return [], 0
    groups = [(key, group) for key, group in log.groupby(["investigation", "subject", "metric", "device"], sort=True)
              if group["run_id"].nunique() >= 2]
    # The metrics logged most recently, when there are more than a page can show (each plot ~0.1 s)
    recent = sorted(groups, key=lambda kg: kg[1].index[-1], reverse=True)[:MAX_TREND_PLOTS]
    shown = {id(g) for _, g in recent}
    out = []
    for key, group in (kg for kg in groups if id(kg[1]) in shown):
        png = figure_png(perf_log_trend(group.tail(_MAX_TREND_POINTS), width=_TREND_WIDTH_IN))
        out.append({"png": base64.b64encode(png).decode("ascii"), "alt": f"{key[0]}: {key[2]} ({key[3]})"})
    return out, len(groups) - len(out)
