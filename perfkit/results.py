"""Shared building blocks of result objects: findings, warnings and safe HTML.

Results are frozen dataclasses that keep their raw data and warnings, offer ``to_frame()``,
a short ``__repr__`` and ``_repr_html_``. Everything rendered to HTML goes through
``html_table``/``html_text``, which escape trace-supplied names (a kernel called
``<script>`` renders as text).
"""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from .text import printable

SEVERITIES = ("critical", "high", "medium", "low", "info")


@dataclass(frozen=True)
class Finding:
    """One ranked observation with its evidence and a recommended fix.

    ``evidence`` maps a label to a number (or short string) that supports the finding;
    ``threshold`` says which threshold fired and where it comes from.
    """

    severity: str
    title: str
    evidence: dict = field(default_factory=dict)
    fix: str = ""
    threshold: str = ""

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")
        if self.fix is None:  # "no fix" is "": a report must never print "fix: None"
            object.__setattr__(self, "fix", "")

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)


def rank_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Most severe first; stable within a severity."""
    return tuple(sorted(findings, key=lambda f: f.rank))


def findings_frame(findings: Iterable[Finding]) -> pd.DataFrame:
    rows = [
        {
            "severity": f.severity,
            "finding": f.title,
            "evidence": evidence_text(f.evidence),
            "fix": f.fix,
            "threshold": f.threshold,
        }
        for f in rank_findings(findings)
    ]
    return pd.DataFrame(rows, columns=["severity", "finding", "evidence", "fix", "threshold"])


_UNIT_NAMES = {"bytes": "size", "us": "time", "pct": "share", "share": "share"}
_WORDS = {"gpu": "GPU", "cpu": "CPU", "htod": "HtoD", "dtoh": "DtoH", "a": "(A)", "b": "(B)"}


def evidence_text(evidence: dict) -> str:
    """A finding's evidence as people read it: "queue delay: 1.23 ms; GPU busy share: 43.5%" (times
    in ms, shares and percentages in %, bytes in kB/MB/GB, yes/no), unknown values (None, NaN) left out."""
    parts = []
    for key, value in evidence.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        name, text = _evidence_item(str(key), value)
        parts.append(f"{name}: {text}")
    return "; ".join(parts)


def _evidence_item(key: str, value: Any) -> tuple[str, str]:
    words = key.split("_")
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, (int, float)) and "us" in words:
        words.remove("us")
        text = f"{format_number(value / 1e3)} ms"
    elif isinstance(value, (int, float)) and words[-1] == "pct":
        words, text = words[:-1], f"{format_number(value)}%"
    elif isinstance(value, (int, float)) and "share" in words:
        text = f"{format_number(100 * value)}%"
    elif isinstance(value, (int, float)) and "bytes" in words:
        words.remove("bytes")
        text = byte_text(value)
    else:
        text = _fmt(value)
    # a key that was only its unit ("bytes", "us") still needs a name before the colon
    return " ".join(_WORDS.get(w, w) for w in words) or _UNIT_NAMES.get(key, key), text


def byte_text(n: float) -> str:
    """A byte count in decimal units: "812 B", "4.1 kB", "25.28 GB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{format_number(n / scale)} {unit}"
    return f"{format_number(n)} B"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return format_number(v) if math.isfinite(v) else str(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def html_text(text: Any) -> str:
    return html.escape(str(text), quote=True)


def format_number(x: float, digits: int | None = None) -> str:
    """A number as people read it, never with an exponent: thousands separators for large values
    ("4,465,000,000,000", "12,346"), 4 significant digits below 10,000 ("12.35"), 3 below 0.001
    ("0.000000545"; under 1e-12, "0"), "" for NaN. ``digits``: round to that many significant
    digits first (2510.4 with 3: "2,510" where ``:.3g`` writes "2.51e+03")."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    if x == 0 or (digits is not None and float(f"{x:.{digits}g}") == 0) or (abs(x) < 1e-12):
        return "0"  # never "-0": a negative zero (or a difference of two equal floats) is no change
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if digits is not None:
        x = float(f"{x:.{digits}g}")
    if abs(x) >= 1e4 or float(x).is_integer():
        return f"{x:,.0f}"
    if abs(x) >= 1e-3:
        return f"{x:,.4g}"
    return f"{x:.{2 - math.floor(math.log10(abs(x)))}f}".rstrip("0")


def format_signed(x: float, digits: int | None = None) -> str:
    """``format_number(x, digits)`` with a "+" before a positive number ("+2,510", "-0.5"), for changes."""
    text = format_number(x, digits)
    return f"+{text}" if text and x > 0 else text


NO_ROWS = "(no rows)"
LONG_TOKEN = 32  # characters: a file name ("rank0.pt.trace.json.gz") or metric name fits, a kernel signature does not
_CELL = re.compile(r"(<td>)(.*?)(</td>)", re.S)
_TOKEN = re.compile(r"\S{%d,}" % (LONG_TOKEN + 1))
_BREAK_AFTER = re.compile(r"([/_.,:(])(?=\w)")


def html_table(frame: pd.DataFrame, max_rows: int = 20, *, empty: str = NO_ROWS) -> str:
    """Render a DataFrame as HTML with every cell and header escaped; numbers in
    ``format_number`` form, True/False as yes/no, a missing value (NaN: a change from 0 to 0, a
    figure not measured) as "n/a"; a header may break after each underscore
    (``median_<wbr>step``), so a wide table wraps its headers at word parts, not mid-word, and so may a
    cell's token longer than ``LONG_TOKEN`` characters (after ``/ _ . , : (``), never inside a shorter one
    (a file name stays whole). A frame without rows is not a header row over nothing: it is the sentence
    ``empty``, which should say why there is nothing (the default only says that there is not).
    perfkit's one HTML table renderer."""
    if not len(frame):
        return f"<p class='perfkit-empty'>{html_text(empty)}</p>"
    shown = frame.head(max_rows)
    flags = [c for c in shown.columns if pd.api.types.is_bool_dtype(shown[c])]
    if flags:
        shown = shown.assign(**{str(c): shown[c].map({True: "yes", False: "no"}) for c in flags})
    head, end, body = shown.to_html(escape=True, index=False, float_format=format_number, na_rep="n/a").partition("</thead>")
    return head.replace("_", "_<wbr>") + end + _CELL.sub(lambda m: m[1] + _breakable(m[2]) + m[3], body)


def _breakable(text: str) -> str:
    """An escaped cell's text with a break opportunity (``<wbr>``) after each separator of its long tokens,
    and an arrow ("a -> b") kept whole (a browser breaks after its hyphen)."""
    text = _TOKEN.sub(lambda m: _BREAK_AFTER.sub(r"\1<wbr>", m[0]), text)
    return text.replace("-&gt;", "<span style='white-space:nowrap'>-&gt;</span>")


_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|&])")


def md_escape(text: Any) -> str:
    """``text`` for one markdown table cell: on one line, markup characters backslash-escaped
    (a hostile name cannot become a link or break the table), terminal escapes shown as
    ``\\x1b`` (``perfkit.text.printable``)."""
    return printable(_MD_SPECIAL.sub(r"\\\1", re.sub(r"[\r\n]+", " ", str(text))))


def html_warnings(warnings: Iterable[str]) -> str:
    items = "".join(f"<li>{html_text(w)}</li>" for w in warnings)
    return f"<ul class='perfkit-warnings'>{items}</ul>" if items else ""


def html_section(title: str, *parts: str) -> str:
    return f"<div class='perfkit-result'><h4>{html_text(title)}</h4>{''.join(parts)}</div>"
