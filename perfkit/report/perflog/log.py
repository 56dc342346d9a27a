"""``PerfLog``: the append-only performance log, one CSV row per metric per run.

Each row holds a run id and time, what was measured (investigation, subject, metric, value with
its own CI, unit, device) and how it compares with the previous run of the same investigation
on the same subject and device (baseline, delta, verdict; the rule is in ``judge``). An exact
figure that equals its baseline (a shipped trace analyzed again by the same code) is returned
with verdict "unchanged" and not written again, so fixed figures are logged once.
"""
from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
from contextlib import closing
from datetime import date as _date
from datetime import datetime
from typing import Any, Iterable, Mapping

import pandas as pd

from ...errors import ParameterError
from ...results import format_number, html_table, md_escape
from ...workbook import perf_log_path, workbook_root
from .judge import Baselines, Measurement, infer_higher_is_better, isnan, judge, key_of
from .store import (COLUMNS, FORMAT_VERSION, PerfLogError, check_writable, count_rows, locked, log_frame, read_rows,
                    rows_newest_first, write_rows)

_REQUIRED = ("investigation", "metric", "value")
_INPUT_FIELDS = ("run_id", "time", "date", "investigation", "subject", "change", "metric", "value", "unit",
                 "ci_low", "ci_high", "higher_is_better", "quality", "device", "git_commit", "torch_version", "host")
_TEXT_FIELDS = ("run_id", "time", "investigation", "subject", "change", "metric", "unit", "quality", "device",
                "git_commit", "torch_version", "host")


class PerfLog:
    """The perf log at ``path`` (default: the workbook's ``reports/perf_log.csv``), created on
    first append."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = perf_log_path(path)

    def __repr__(self) -> str:
        return f"PerfLog('{self.path}')"

    def append(self, **fields: Any) -> dict:
        """Append one metric row; returns it as judged (``COLUMNS``). See ``append_many``."""
        return self.append_many([fields]).iloc[0].to_dict()

    def append_many(self, rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
        """Append the rows of one run in one atomic write; returns every row as judged (rows
        with verdict "unchanged" are returned but not written).

        Required per row: ``investigation``, ``metric``, ``value`` (finite). Optional:
        ``run_id`` (default: one new id for this call, "DATE/HHMMSS"), ``time``, ``date`` (ISO;
        default today), ``subject``, ``change``, ``unit``, ``ci_low``/``ci_high`` (95% CI of the
        value; equal to it for an exact figure), ``higher_is_better`` (default: guessed from the
        name and unit), ``quality`` (why this measurement is unreliable, e.g. a loaded machine:
        such a row, and a row whose baseline has one, is "not enough data"), ``device``. Raises ParameterError for an unknown or invalid field (nothing
        is written then) and PerfLogError for a log that cannot be read or written.
        """
        return log_frame(self._append([dict(r) for r in rows]))

    def read(self, investigation: str | None = None, *, missing_ok: bool = False,
             last_runs: int | None = None) -> pd.DataFrame:
        """All rows (``COLUMNS``), oldest first, optionally of one investigation; with
        ``last_runs``, the rows of the last N runs (of that investigation) only, read from the
        end of the file, and ``frame.attrs["warnings"]`` says how many rows were left out.

        Raises PerfLogError naming ``file:line`` for a corrupt row (among those read) or an
        unknown format version, for a file that is not UTF-8 or is a folder, and for a missing
        file unless ``missing_ok``; ParameterError for ``last_runs`` below 1.
        """
        if last_runs is not None:
            return self._read_last(investigation, last_runs, missing_ok)
        with locked(self.path, exclusive=False):
            rows = read_rows(self.path, missing_ok=missing_ok)
            return log_frame(r for r in rows if investigation is None or r["investigation"] == investigation)

    def _read_last(self, investigation: str | None, runs: int, missing_ok: bool) -> pd.DataFrame:
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise ParameterError(f"PerfLog.read: last_runs={runs!r}; give a whole number of runs, 1 or more")
        with locked(self.path, exclusive=False), closing(rows_newest_first(self.path, missing_ok)) as newest_first:
            frame = log_frame(_last_runs(newest_first, investigation, runs)[::-1])
            total = count_rows(self.path)
        if total > len(frame):
            which = f" of {investigation!r}" if investigation is not None else ""
            frame.attrs["warnings"] = [f"showing the last {_count(runs, 'run')}{which} ({_count(len(frame), 'row')}); "
                                       f"{total - len(frame):,} of the log's {_count(total, 'row')} are not shown"]
        return frame

    def check(self) -> None:
        """Raise PerfLogError unless rows can be appended (run before long work that logs): the folder is
        writable, and the header and every row read back, so a hand-edited corrupt row is found before a
        ``perfkit run`` starts rather than at the notebook's cell that appends (streamed: about 1 s per
        million rows, memory for one row)."""
        check_writable(self.path)
        with locked(self.path, exclusive=False):
            for _ in read_rows(self.path, missing_ok=True):
                pass

    def to_markdown(self, investigation: str | None = None) -> str:
        """The log as a markdown table like a hand-kept one; regressions in bold."""
        return markdown_table(self.read(investigation))

    def _repr_html_(self) -> str:
        return html_table(display_frame(self.read(missing_ok=True)), max_rows=200)

    def _append(self, rows: list[dict]) -> list[dict]:
        context = _run_context()
        complete = [self._complete(r, context) for r in rows]
        with locked(self.path, exclusive=True):
            with closing(rows_newest_first(self.path)) as newest_first:
                baselines = Baselines.recent(newest_first, {key_of(r) for r in complete},
                                             {r["run_id"] for r in complete})
            for row in complete:
                _judge(row, baselines)
            written = [r for r in complete if r["verdict"] != "unchanged"]
            if written:
                write_rows(self.path, written)
        return complete

    @staticmethod
    def _complete(fields: dict, context: dict) -> dict:
        unknown = sorted(set(fields) - set(_INPUT_FIELDS))
        if unknown:
            raise ParameterError(f"PerfLog.append: unknown field(s) {', '.join(unknown)}; "
                                 f"valid fields: {', '.join(_INPUT_FIELDS)}")
        missing = [k for k in _REQUIRED if fields.get(k) in (None, "")]
        if missing:
            raise ParameterError(f"PerfLog.append: missing required field(s) {', '.join(missing)}")
        row = {**context, **{k: v for k, v in fields.items() if v is not None}}
        row["date"] = _iso_date(row.get("date", _date.today()))
        for key in _TEXT_FIELDS:
            row[key] = _utf8(key, one_line(row.get(key, "")))
        row["run_id"] = row["run_id"] or context["run_id"]
        row["device"] = row["device"] or _default_device()
        row["value"], row["ci_low"], row["ci_high"] = (_number(row, k) for k in ("value", "ci_low", "ci_high"))
        if isnan(row["ci_low"]) != isnan(row["ci_high"]) or row["ci_low"] > row["ci_high"]:
            raise ParameterError("PerfLog.append: give both ci_low <= ci_high (95% CI of the value) or neither")
        hib = row.get("higher_is_better")
        row["higher_is_better"] = infer_higher_is_better(row["metric"], row["unit"]) if hib is None else _flag(hib)
        return {"format_version": FORMAT_VERSION, **{c: row.get(c, "") for c in COLUMNS if c != "format_version"}}


def _judge(row: dict, baselines: Baselines) -> None:
    current = Measurement(row["run_id"], row["value"], row["ci_low"], row["ci_high"], row["quality"])
    base, history = baselines.previous(key_of(row), row["run_id"])
    row["baseline"] = base.value if base else float("nan")
    row["baseline_run"] = base.run_id if base else ""
    row["delta_pct"] = (row["value"] - base.value) / abs(base.value) * 100 if base and base.value else float("nan")
    row["verdict"] = judge(current, base, history, higher_is_better=row["higher_is_better"])
    if row["verdict"] != "unchanged":
        baselines.add(key_of(row), current)


def _last_runs(newest_first, investigation: str | None, runs: int) -> list[dict]:
    """The rows of the last ``runs`` run ids (of ``investigation``), newest first; stops reading
    at the first row of an earlier run."""
    kept, seen = [], set()
    for row in newest_first:
        if investigation is not None and row["investigation"] != investigation:
            continue
        if row["run_id"] not in seen and len(seen) == runs:
            break
        seen.add(row["run_id"])
        kept.append(row)
    return kept


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' * (n != 1)}"


def new_run_id(day: str | None = None, when: datetime | None = None) -> str:
    """"DATE/HHMMSS-XXXXXX": the id of one run outside ``perfkit run`` (which names a run by its reports folder,
    "DATE/HHMMSS/name"). The random suffix keeps two runs started in the same second (two notebooks, two
    machines appending to one log) apart: with one id they were judged against no baseline, each taking the
    other's rows for its own, and ``perfkit log --runs 1`` showed them as one run."""
    when = when or datetime.now()
    return f"{day or when.date().isoformat()}/{when.strftime('%H%M%S')}-{secrets.token_hex(3)}"


def markdown_table(frame: pd.DataFrame) -> str:
    """date | investigation | subject | change | metric | before -> after | delta | verdict | note, one
    line per row; the note is the row's measurement quality (why a verdict is "not enough data")."""
    head = ["date", "investigation", "subject", "change", "metric", "before -> after", "delta", "verdict", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for values in frame.itertuples(index=False, name=None):  # one row at a time (to_dict: 1M dicts at once)
        row = dict(zip(frame.columns, values))
        text = [md_escape(row[k]) for k in ("date", "investigation", "subject", "change", "metric")]
        cells = text + [_before_after(row), format_delta(row["delta_pct"]), _verdict_text(row["verdict"]),
                        md_escape(row["quality"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def display_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The log as people read it, newest first: run, investigation, subject, change, metric,
    before, after, delta, verdict (REGRESSED in capitals) and note, as text."""
    rows = frame.iloc[::-1]
    return pd.DataFrame({
        "run": rows["run_id"], "investigation": rows["investigation"], "subject": rows["subject"],
        "change": rows["change"],
        "metric": rows["metric"], "device": rows["device"],
        "before": [format_value(v) for v in rows["baseline"]],
        "after": [format_value(v, u) for v, u in zip(rows["value"], rows["unit"])],
        "delta": [format_delta(d) for d in rows["delta_pct"]],
        "verdict": ["REGRESSED" if v == "regressed" else v for v in rows["verdict"]],
        "note": rows["quality"],
    })


def format_value(value: float, unit: str = "") -> str:
    """A number in readable form with its unit ("12.35 ms", "1,234,567 B"); "n/a" for NaN."""
    if value is None or isnan(value):
        return "n/a"
    return f"{format_number(value)} {unit}".strip()


def format_delta(delta: float) -> str:
    """A percent change with its sign and one decimal ("+12.3%"); "" for NaN (no baseline)."""
    return "" if isnan(delta) else f"{delta:+.1f}%"


def _before_after(row: dict) -> str:
    return f"{format_value(row['baseline'])} -> {format_value(row['value'], md_escape(row['unit']))}"


def _verdict_text(verdict: str) -> str:
    return "**REGRESSED**" if verdict == "regressed" else verdict


def _run_context() -> dict:
    return {"git_commit": _git_commit(), "torch_version": _torch_version(), "host": socket.gethostname(),
            "run_id": new_run_id(), "time": datetime.now().astimezone().isoformat(timespec="seconds")}


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             check=True, cwd=workbook_root())
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


def _utf8(key: str, text: str) -> str:
    """``text``, refused when it holds lone surrogates (bytes that were not UTF-8, as Python decodes a
    command line typed in another encoding): the log is UTF-8 and could not be written."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(text[exc.start])
        what = f"byte {code - 0xDC00:#04x}" if 0xDC80 <= code <= 0xDCFF else "a lone surrogate"
        raise ParameterError(f"PerfLog.append: {key} is not UTF-8 text ({what} at character {exc.start}); give it "
                             "as UTF-8 (check the terminal's encoding and the locale)") from None
    return text


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        if value.strip().lower() not in ("true", "false", "1", "0"):
            raise ParameterError(f"PerfLog.append: higher_is_better={value!r}; use True or False")
        return value.strip().lower() in ("true", "1")
    return bool(value)


def _number(row: dict, key: str) -> float:
    raw = row.get(key)
    if raw is None or raw == "":
        if key == "value":
            raise ParameterError("PerfLog.append: value is required")
        return float("nan")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ParameterError(f"PerfLog.append: {key}={raw!r} is not a number") from None
    if not (key != "value" and isnan(value)) and not abs(value) < float("inf"):
        raise ParameterError(f"PerfLog.append: {key}={raw!r} must be finite")
    return value


def one_line(value: Any) -> str:
    """``value`` as text on one line: newlines would split a CSV row and a NUL byte makes it
    unreadable to ``csv``. Other characters are kept as given; what prints the log makes them
    printable (``perfkit.text``, ``md_escape``)."""
    return re.sub(r"[\r\n]+", " ", str(value)).replace("\x00", "").strip()


__all__ = ["PerfLog", "PerfLogError", "COLUMNS", "markdown_table", "display_frame", "format_value", "format_delta",
           "new_run_id", "one_line"]
