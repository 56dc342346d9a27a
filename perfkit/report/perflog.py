"""The dated performance log: one CSV row per metric per run, appended, never rewritten.

``PerfLog("reports/perf_log.csv").append(investigation="cpu_bound", metric="step_ms",
value=12.3, unit="ms", change="pin_memory=True")`` fills in the date, the baseline (the
previous value of the same investigation + metric + device), the change in percent and a
verdict (``perfkit.report.verdicts``), plus the git commit, torch version and host. The file
itself, its format version, locking and atomic appends are ``perfkit.report.perflog_csv``:
concurrent writers never lose or interleave rows, and ``read()`` refuses rows of an unknown
version and names the file and line of a corrupt row.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from datetime import date as _date
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ..errors import ParameterError
from .perflog_csv import COLUMNS, FORMAT_VERSION, PerfLogError, empty_log, locked, log_frame, read_rows, write_rows
from .verdicts import (DEFAULT_NOISE_PCT, VERDICTS, classify_change, complete_numbers, infer_higher_is_better, isnan,
                       latest_values)

__all__ = [
    "PerfLog", "markdown_table", "format_value", "format_delta",
    # defined in perflog_csv and verdicts; importable from here as they always were
    "COLUMNS", "FORMAT_VERSION", "PerfLogError", "empty_log",
    "VERDICTS", "DEFAULT_NOISE_PCT", "classify_change", "infer_higher_is_better",
]

_REQUIRED = ("investigation", "metric", "value")
_INPUT_FIELDS = tuple(c for c in COLUMNS if c not in ("format_version", "delta_pct")) + ("noise_pct",)
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|&])")


class PerfLog:
    """An append-only CSV performance log at ``path`` (created on first append)."""

    def __init__(self, path: str | os.PathLike = "reports/perf_log.csv", *,
                 noise_pct: float = DEFAULT_NOISE_PCT):
        self.path = Path(path)
        self.noise_pct = float(noise_pct)

    def __repr__(self) -> str:
        return f"PerfLog('{self.path}')"

    def append(self, **fields: Any) -> dict:
        """Append one metric row; returns the row as written (see ``COLUMNS``).

        Required: ``investigation``, ``metric``, ``value``. Optional: ``change``, ``unit``,
        ``run_id``, ``date`` (ISO, default today), ``device``, ``baseline`` (default: previous
        value of the same investigation+metric+device), ``verdict`` or ``ci_low``/``ci_high``
        (CI of the ratio value/baseline), ``higher_is_better``, ``noise_pct`` (percent).
        Raises ParameterError for unknown or invalid fields, PerfLogError for a corrupt log.
        """
        return self._append([fields])[0]

    def append_many(self, rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
        """Append several rows in one atomic write; returns them as a DataFrame."""
        return log_frame(self._append([dict(r) for r in rows]))

    def read(self, investigation: str | None = None, *, missing_ok: bool = False) -> pd.DataFrame:
        """All rows (``COLUMNS``), oldest first, optionally of one investigation.

        Raises PerfLogError naming ``file:line`` for a corrupt row or an unknown format
        version, and for a missing file unless ``missing_ok``.
        """
        with locked(self.path, exclusive=False):
            frame = log_frame(read_rows(self.path, missing_ok=missing_ok))
        if investigation is not None:
            frame = frame[frame["investigation"] == investigation].reset_index(drop=True)
        return frame

    def to_markdown(self, investigation: str | None = None) -> str:
        """The log as a markdown table like a hand-kept one; regressions in bold."""
        return markdown_table(self.read(investigation))

    def _repr_html_(self) -> str:
        from .html import perf_log_table

        return perf_log_table(self.read(missing_ok=True))

    # -- internals ---------------------------------------------------------------------------

    def _append(self, rows: list[dict]) -> list[dict]:
        context = _run_context()
        with locked(self.path, exclusive=True):
            previous = latest_values(read_rows(self.path, missing_ok=True))
            complete = [self._complete(r, context, previous) for r in rows]
            if complete:
                write_rows(self.path, complete)
        return complete

    def _complete(self, fields: dict, context: dict, previous: dict) -> dict:
        unknown = sorted(set(fields) - set(_INPUT_FIELDS))
        if unknown:
            raise ParameterError(f"PerfLog.append: unknown field(s) {', '.join(unknown)}; "
                                 f"valid fields: {', '.join(_INPUT_FIELDS)}")
        missing = [k for k in _REQUIRED if fields.get(k) in (None, "")]
        if missing:
            raise ParameterError(f"PerfLog.append: missing required field(s) {', '.join(missing)}")
        row = {**context, **{k: v for k, v in fields.items() if v is not None}}
        row["format_version"] = FORMAT_VERSION
        row["date"] = _iso_date(row.get("date", _date.today()))
        for key in ("run_id", "investigation", "change", "metric", "unit", "device", "git_commit",
                    "torch_version", "host"):
            row[key] = _one_line(row.get(key, ""))
        row["device"] = row["device"] or _default_device()
        noise = fields.get("noise_pct")
        complete_numbers(row, previous, self.noise_pct if noise is None else float(noise))
        row.pop("noise_pct", None)
        return {c: row.get(c, "") for c in COLUMNS}


def markdown_table(frame: pd.DataFrame) -> str:
    """date | investigation | change | metric | before -> after | delta | verdict, one line per row."""
    head = ["date", "investigation", "change", "metric", "before -> after", "delta", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in frame.to_dict("records"):
        text = [_md_escape(row[k]) for k in ("date", "investigation", "change", "metric")]
        cells = text + [_before_after(row), format_delta(row["delta_pct"]), _verdict_text(row["verdict"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_value(value: float, unit: str = "") -> str:
    """A number with 4 significant digits and its unit ("12.35 ms"); "n/a" for NaN."""
    if value is None or isnan(value):
        return "n/a"
    return f"{value:,.4g} {unit}".strip()


def format_delta(delta: float) -> str:
    """A percent change with its sign and one decimal ("+12.3%"); "" for NaN (no baseline)."""
    return "" if isnan(delta) else f"{delta:+.1f}%"


def _before_after(row: dict) -> str:
    return f"{format_value(row['baseline'])} -> {format_value(row['value'], _md_escape(row['unit']))}"


def _verdict_text(verdict: str) -> str:
    return "**REGRESSED**" if verdict == "regressed" else verdict


def _md_escape(text: Any) -> str:
    # Backslash escapes keep a hostile name from becoming markup in a markdown renderer.
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def _run_context() -> dict:
    return {"git_commit": _git_commit(), "torch_version": _torch_version(), "host": socket.gethostname()}


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _torch_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "not installed"


def _default_device() -> str:
    # Only ask torch when the caller already imported it: logging must not load torch.
    torch = sys.modules.get("torch")
    if torch is None:
        return "unknown"
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def _iso_date(value: Any) -> str:
    text = value.isoformat()[:10] if hasattr(value, "isoformat") else str(value)
    try:
        return _date.fromisoformat(text).isoformat()
    except ValueError:
        raise ParameterError(f"PerfLog.append: date={value!r} is not an ISO date (YYYY-MM-DD)") from None


def _one_line(value: Any) -> str:
    # Newlines would split a row over two lines: the log keeps one row per line.
    return re.sub(r"[\r\n]+", " ", str(value)).strip()

