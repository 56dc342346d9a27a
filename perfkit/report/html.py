"""Escaping HTML building blocks for reports: every string from a trace, a log or a user
(op names, kernel names, change descriptions, file names) goes through ``esc``.

Builds on ``perfkit.results`` (``html_text`` escapes, ``html_section``/``html_warnings``).
Pages are self-contained: inline CSS, images as ``data:`` URIs, no external script or link.
"""
from __future__ import annotations

import base64
import re
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import quote

import pandas as pd

from ..results import html_section, html_text, html_warnings

__all__ = ["esc", "link", "png_img", "table", "perf_log_table", "page", "html_section", "html_warnings"]

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
tr.regressed td { background: #fde8e8; }
tr.failed td { background: #fff3e0; }
.status-failed, .verdict-regressed { color: #b00020; font-weight: bold; }
.status-ok, .verdict-improved { color: #1b5e20; }
.perfkit-warnings { color: #8a4b00; }
.trend { display: inline-block; margin: 0 1em 1em 0; }
pre { white-space: pre-wrap; max-width: 60em; }
"""


def esc(value: Any) -> str:
    """HTML-escape ``str(value)``, quotes included (safe in text and attribute values)."""
    return html_text(value)


def link(href: str, text: Any) -> str:
    """An ``<a>`` to a relative path; a URL with a scheme (``javascript:``, ``http:``)
    renders as plain text instead, since reports only link to their own files."""
    if _SCHEME.match(str(href)):
        return esc(text)
    return f'<a href="{esc(quote(str(href), safe="/#"))}">{esc(text)}</a>'


def png_img(png: bytes, alt: Any) -> str:
    """An ``<img>`` holding ``png`` inline as a base64 data URI."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}">'


def table(frame: pd.DataFrame, *, raw_columns: Sequence[str] = (),
          row_class: Callable[[dict], str] | None = None) -> str:
    """An HTML table; every header and cell is escaped except ``raw_columns``, which the
    caller has already built from escaped parts. ``row_class(row)`` adds a CSS class."""
    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    body = "".join(_row(r, frame.columns, raw_columns, row_class) for r in frame.to_dict("records"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _row(row: dict, columns: Iterable[str], raw: Sequence[str], row_class) -> str:
    cells = "".join(f"<td>{row[c] if c in raw else _cell(row[c])}</td>" for c in columns)
    cls = row_class(row) if row_class else ""
    return f'<tr class="{esc(cls)}">{cells}</tr>' if cls else f"<tr>{cells}</tr>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "" if value != value else esc(f"{value:,.4g}")
    return esc(value)


def perf_log_table(frame: pd.DataFrame) -> str:
    """The perf log (``PerfLog.read()``) as an HTML table, newest first; regressed rows get
    class ``regressed`` and a bold REGRESSED verdict."""
    from .perflog import format_delta, format_value

    if frame.empty:
        return "<p>The perf log has no rows yet.</p>"
    rows = frame.iloc[::-1]
    shown = pd.DataFrame({
        "date": rows["date"], "investigation": rows["investigation"], "change": rows["change"],
        "metric": rows["metric"], "device": rows["device"],
        "before": [format_value(v) for v in rows["baseline"]],
        "after": [format_value(v, u) for v, u in zip(rows["value"], rows["unit"])],
        "delta": [format_delta(d) for d in rows["delta_pct"]],
        "verdict": [_verdict_html(v) for v in rows["verdict"]],
        "commit": rows["git_commit"],
    })
    return table(shown, raw_columns=("verdict",),
                 row_class=lambda r: "regressed" if "REGRESSED" in r["verdict"] else "")


def _verdict_html(verdict: str) -> str:
    if verdict == "regressed":
        return "<strong class='verdict-regressed'>REGRESSED</strong>"
    return f"<span class='verdict-{esc(verdict.replace(' ', '-'))}'>{esc(verdict)}</span>"


def page(title: Any, *parts: str) -> str:
    """A complete self-contained HTML document (inline CSS, no external resources)."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>"
        f"<body><h1>{esc(title)}</h1>{''.join(parts)}</body></html>\n"
    )
