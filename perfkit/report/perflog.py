"""The dated performance log: one CSV row per metric per run, appended, never rewritten.

``PerfLog("reports/perf_log.csv").append(investigation="cpu_bound", metric="step_ms",
value=12.3, unit="ms", change="pin_memory=True")`` fills in the date, the baseline (the
previous value of the same investigation + metric + device), the change in percent and a
verdict, plus the git commit, torch version and host. Appends hold an ``fcntl.flock`` on a
sidecar ``<log>.lock`` file and write all their rows with one ``os.write`` + ``fsync``, so
concurrent writers never lose or interleave rows. Every row carries ``format_version``;
``read()`` refuses rows of an unknown version and names the file and line of a corrupt row.
"""
from __future__ import annotations

import csv
import io
import math
import os
import re
import socket
import subprocess
import sys
from contextlib import contextmanager
from datetime import date as _date
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ..atomic import fsync_path
from ..errors import ParameterError, PerfkitError

FORMAT_VERSION = 1
COLUMNS = (
    "format_version", "date", "run_id", "investigation", "change", "metric", "value", "unit",
    "baseline", "delta_pct", "verdict", "higher_is_better", "ci_low", "ci_high",
    "git_commit", "device", "torch_version", "host",
)
VERDICTS = ("improved", "regressed", "within noise", "no baseline", "not enough data")
# perfkit.bench.compare's A/B verdicts (B vs A): "faster" is better whatever the metric.
_VERDICT_ALIASES = {"faster": "improved", "slower": "regressed", "no change": "within noise",
                    "no detectable change": "within noise", "insufficient data": "not enough data"}
_FLOAT_COLUMNS = ("value", "baseline", "delta_pct", "ci_low", "ci_high")
_REQUIRED = ("investigation", "metric", "value")
_INPUT_FIELDS = tuple(c for c in COLUMNS if c not in ("format_version", "delta_pct")) + ("noise_pct",)
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|&])")
DEFAULT_NOISE_PCT = 5.0


class PerfLogError(PerfkitError):
    """The perf log file is corrupt or was written by an unknown format version."""


def classify_change(value: float, baseline: float | None, *, higher_is_better: bool,
                    noise_pct: float = DEFAULT_NOISE_PCT,
                    ci: tuple[float, float] | None = None) -> str:
    """Verdict for ``value`` against ``baseline``: one of ``VERDICTS``.

    ``ci`` is a confidence interval on the ratio value/baseline (1.0 = no change) from an
    A/B comparison; when given it decides alone (an interval containing 1 is "within noise").
    Otherwise a change of at most ``noise_pct`` percent is "within noise".
    """
    if ci is not None:
        low, high = ci
        direction = 1 if low > 1.0 else -1 if high < 1.0 else 0
    elif baseline is None or _isnan(baseline):
        return "no baseline"
    elif baseline == 0:
        direction = (value > 0) - (value < 0)
    else:
        delta = (value - baseline) / abs(baseline) * 100.0
        direction = 0 if abs(delta) <= noise_pct else (1 if delta > 0 else -1)
    if direction == 0:
        return "within noise"
    return "improved" if (direction > 0) == higher_is_better else "regressed"


def infer_higher_is_better(metric: str, unit: str) -> bool:
    """Rates (unit ``*/s``, names with throughput/speedup/util) are better high; times,
    bytes and counts are better low. Pass ``higher_is_better`` to override."""
    text = f"{metric} {unit}".lower()
    return "/s" in unit.lower() or any(w in text for w in ("throughput", "speedup", "util", "per_sec", "mfu"))


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
        return _frame(self._append([dict(r) for r in rows]))

    def read(self, investigation: str | None = None, *, missing_ok: bool = False) -> pd.DataFrame:
        """All rows (``COLUMNS``), oldest first, optionally of one investigation.

        Raises PerfLogError naming ``file:line`` for a corrupt row or an unknown format
        version, and for a missing file unless ``missing_ok``.
        """
        with self._locked(exclusive=False):
            frame = _frame(self._parse(missing_ok=missing_ok))
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
        with self._locked(exclusive=True):
            previous = _latest_values(self._parse(missing_ok=True))
            complete = [self._complete(r, context, previous) for r in rows]
            if complete:
                self._write(complete)
        return complete

    @contextmanager
    def _locked(self, exclusive: bool):
        import fcntl

        lock = self.path.with_name(self.path.name + ".lock")
        if exclusive:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            if exclusive:
                raise
            yield  # a reader in a read-only directory cannot lock; writes there are impossible anyway
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def _parse(self, missing_ok: bool) -> list[dict]:
        if not self.path.exists():
            if missing_ok:
                return []
            raise PerfLogError(f"{self.path}: no perf log here; notebooks create it with "
                               "PerfLog(path).append(...), or pass the right --path")
        with open(self.path, encoding="utf-8", newline="") as fh:
            lines = fh.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if not lines:
            return []
        _check_header(self.path, lines)
        return [_parse_row(self.path, no, line) for no, line in enumerate(lines[1:], start=2)
                if line.strip()]

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
        _complete_numbers(row, previous, self.noise_pct if noise is None else float(noise))
        row.pop("noise_pct", None)
        previous[(row["investigation"], row["metric"], row["device"])] = row["value"]
        return {c: row.get(c, "") for c in COLUMNS}

    def _write(self, rows: list[dict]) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if new:
            writer.writerow(COLUMNS)
        elif not _ends_with_newline(self.path):
            buf.write("\n")
        writer.writerows([_serialize(row[c]) for c in COLUMNS] for row in rows)
        _append_bytes(self.path, buf.getvalue().encode("utf-8"), new)


def markdown_table(frame: pd.DataFrame) -> str:
    """date | investigation | change | metric | before -> after | delta | verdict, one line per row."""
    head = ["date", "investigation", "change", "metric", "before -> after", "delta", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in frame.to_dict("records"):
        text = [_md_escape(row[k]) for k in ("date", "investigation", "change", "metric")]
        cells = text + [_before_after(row), _delta_text(row["delta_pct"]), _verdict_text(row["verdict"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_value(value: float, unit: str = "") -> str:
    """A number with 4 significant digits and its unit ("12.35 ms"); "n/a" for NaN."""
    if value is None or _isnan(value):
        return "n/a"
    return f"{value:,.4g} {unit}".strip()


def _before_after(row: dict) -> str:
    return f"{format_value(row['baseline'])} -> {format_value(row['value'], _md_escape(row['unit']))}"


def _delta_text(delta: float) -> str:
    return "" if _isnan(delta) else f"{delta:+.1f}%"


def _verdict_text(verdict: str) -> str:
    return "**REGRESSED**" if verdict == "regressed" else verdict


def _md_escape(text: Any) -> str:
    # Backslash escapes keep a hostile name from becoming markup in a markdown renderer.
    return _MD_SPECIAL.sub(r"\\\1", str(text))


def _complete_numbers(row: dict, previous: dict, noise_pct: float) -> None:
    row["value"] = _number(row, "value")
    key = (row["investigation"], row["metric"], row["device"])
    row["baseline"] = _number(row, "baseline") if "baseline" in row else previous.get(key, math.nan)
    row["ci_low"], row["ci_high"] = _number(row, "ci_low"), _number(row, "ci_high")
    if _isnan(row["ci_low"]) != _isnan(row["ci_high"]) or row["ci_low"] > row["ci_high"]:
        raise ParameterError("PerfLog.append: give both ci_low <= ci_high (CI of value/baseline) or neither")
    base = row["baseline"]
    row["delta_pct"] = math.nan if _isnan(base) or base == 0 else (row["value"] - base) / abs(base) * 100
    hib = row.get("higher_is_better")
    row["higher_is_better"] = infer_higher_is_better(row["metric"], row["unit"]) if hib is None else _flag(hib)
    row["verdict"] = _verdict(row, noise_pct)


def _verdict(row: dict, noise_pct: float) -> str:
    given = row.get("verdict")
    if given not in (None, ""):
        verdict = _VERDICT_ALIASES.get(str(given), str(given))
        if verdict not in VERDICTS:
            raise ParameterError(f"PerfLog.append: verdict={given!r}; use one of {', '.join(VERDICTS)}")
        return verdict
    ci = None if _isnan(row["ci_low"]) else (row["ci_low"], row["ci_high"])
    return classify_change(row["value"], row["baseline"], higher_is_better=row["higher_is_better"],
                           noise_pct=noise_pct, ci=ci)


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
        return math.nan
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ParameterError(f"PerfLog.append: {key}={raw!r} is not a number") from None
    if key == "value" and not math.isfinite(value):
        raise ParameterError(f"PerfLog.append: value={raw!r} must be finite")
    return value


def _latest_values(rows: list[dict]) -> dict:
    return {(r["investigation"], r["metric"], r["device"]): r["value"] for r in rows}


def _check_header(path: Path, lines: list[str]) -> None:
    header = next(csv.reader([lines[0]]))
    if tuple(header) == COLUMNS:
        return
    if header and header[0] == "format_version" and len(lines) > 1:
        version = next(csv.reader([lines[1]]), [""])[0]
        if version.isdigit() and int(version) > FORMAT_VERSION:
            raise PerfLogError(_newer(path, 2, version))
    raise PerfLogError(f"{path}:1: header is not a perfkit perf log (format {FORMAT_VERSION}) header; "
                       "point --path at a log written by PerfLog, or move this file aside")


def _newer(path: Path, line: int, version: str) -> str:
    return (f"{path}:{line}: written by perf log format {version}, this perfkit reads format "
            f"{FORMAT_VERSION}: upgrade perfkit to read it (the file was left untouched)")


def _parse_row(path: Path, line_no: int, line: str) -> dict:
    where = f"{path}:{line_no}"
    try:
        fields = next(csv.reader([line], strict=True))
    except csv.Error as exc:
        raise PerfLogError(f"{where}: corrupt row ({exc}); fix or delete this line") from None
    if fields and fields[0].isdigit() and int(fields[0]) > FORMAT_VERSION:
        raise PerfLogError(_newer(path, line_no, fields[0]))
    if len(fields) != len(COLUMNS):
        raise PerfLogError(f"{where}: corrupt row: {len(fields)} fields, expected {len(COLUMNS)} "
                           "(a truncated or hand-edited line?); fix or delete this line")
    row = dict(zip(COLUMNS, fields))
    return _typed_row(where, row)


def _typed_row(where: str, row: dict) -> dict:
    if row["format_version"] != str(FORMAT_VERSION):
        raise PerfLogError(f"{where}: format_version={row['format_version']!r} is not a known version")
    try:
        _date.fromisoformat(row["date"])
        for key in _FLOAT_COLUMNS:
            row[key] = float(row[key]) if row[key] != "" else math.nan
    except ValueError as exc:
        raise PerfLogError(f"{where}: corrupt row ({exc}); fix or delete this line") from None
    if _isnan(row["value"]) or row["verdict"] not in VERDICTS or row["higher_is_better"] not in ("true", "false"):
        raise PerfLogError(f"{where}: corrupt row (value, verdict or higher_is_better invalid); "
                           "fix or delete this line")
    row["format_version"] = FORMAT_VERSION
    row["higher_is_better"] = row["higher_is_better"] == "true"
    return row


def empty_log() -> pd.DataFrame:
    """A log frame with no rows (the columns and dtypes of ``PerfLog.read()``)."""
    return _frame([])


def _frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for key in _FLOAT_COLUMNS:
        frame[key] = frame[key].astype("float64")
    frame["format_version"] = frame["format_version"].astype("int64")
    frame["higher_is_better"] = frame["higher_is_better"].astype(bool)
    return frame


def _serialize(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def _append_bytes(path: Path, data: bytes, new: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:  # one write in practice; the loop only guards against a short write
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_path(path.parent)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


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


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
