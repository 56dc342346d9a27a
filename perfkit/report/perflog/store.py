"""The perf log's file: versioned CSV rows, read and appended here and nowhere else.

Every row carries ``format_version`` (``FORMAT_VERSION``) and the ``COLUMNS`` in order.
``read_rows`` refuses rows of an unknown version, a file that is not UTF-8 text or not a file,
and names the file and line of a corrupt row; nothing it refuses is modified;
``write_rows`` appends all its rows (and the header, for a new file) with one ``os.write`` +
``fsync``. Callers hold ``locked(path, ...)`` around them: an ``fcntl.flock`` on a sidecar
``<log>.lock`` file, so concurrent writers never lose or interleave rows.
"""
from __future__ import annotations

import csv
import io
import math
import os
import stat
from contextlib import contextmanager
from datetime import date as _date
from pathlib import Path
from typing import Any

import pandas as pd

from ...atomic import fsync_path
from ...errors import PerfkitError
from ...text import csv_cell, csv_cell_value
from .judge import VERDICTS, isnan

# Format 2: ``ci_low``/``ci_high`` bound the value itself (format 1 held a ratio CI against the
# other arm of the same run), ``time``, ``subject``, ``baseline_run`` and ``quality`` (why a
# measurement is unreliable, "" when it is not) are new.
FORMAT_VERSION = 2
COLUMNS = (
    "format_version", "run_id", "time", "date", "investigation", "subject", "change", "metric", "value",
    "unit", "ci_low", "ci_high", "baseline", "baseline_run", "delta_pct", "verdict", "higher_is_better",
    "quality", "git_commit", "device", "torch_version", "host",
)
_FLOAT_COLUMNS = ("value", "ci_low", "ci_high", "baseline", "delta_pct")
# Free text: written through csv_cell (a leading = + - @ tab CR gets a ' so that a spreadsheet
# shows it instead of running it) and read back through csv_cell_value. Numbers are left alone.
_TEXT_COLUMNS = tuple(c for c in COLUMNS if c not in (*_FLOAT_COLUMNS, "format_version", "higher_is_better", "date"))


class PerfLogError(PerfkitError):
    """The perf log file is corrupt or was written by an unknown format version."""


@contextmanager
def locked(path: Path, exclusive: bool):
    """Hold the log's sidecar lock: exclusive to append (the folder is created), shared to read."""
    import fcntl

    lock = path.with_name(path.name + ".lock")
    if path.exists() and not path.is_file():  # a folder, pipe or device: refused by the read, no lock file beside it
        yield
        return
    try:
        if exclusive:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exclusive:
            raise PerfLogError(f"{path}: cannot write the perf log here ({exc.strerror}); "
                               "pass a writable perf_log_path or --path") from None
        yield  # a reader in a read-only directory cannot lock; writes there are impossible anyway
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def read_rows(path: Path, missing_ok: bool) -> list[dict]:
    """Typed rows of the log at ``path``, oldest first. Raises PerfLogError naming ``file:line``
    for a corrupt row or an unknown format version, and for a missing file unless ``missing_ok``."""
    if not path.exists():
        if missing_ok:
            return []
        raise PerfLogError(f"{path}: no perf log here; notebooks create it with "
                           "PerfLog(path).append(...), or pass the right --path")
    lines = _read_lines(path)
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return []
    _check_header(path, lines)
    return [_parse_row(path, no, line) for no, line in enumerate(lines[1:], start=2)
            if line.strip()]


def write_rows(path: Path, rows: list[dict]) -> None:
    """Append complete rows (``COLUMNS`` keys) in one write; a new or empty file gets the header."""
    new = not path.exists() or path.stat().st_size == 0
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if new:
        writer.writerow(COLUMNS)
    elif not _ends_with_newline(path):
        buf.write("\n")
    writer.writerows([_cell(c, row[c]) for c in COLUMNS] for row in rows)
    _append_bytes(path, buf.getvalue().encode("utf-8"), new)


def empty_log() -> pd.DataFrame:
    """A log frame with no rows (the columns and dtypes of ``PerfLog.read()``)."""
    return log_frame([])


def log_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows as a frame with ``COLUMNS`` and their dtypes (floats, int version, bool direction)."""
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for key in _FLOAT_COLUMNS:
        frame[key] = frame[key].astype("float64")
    frame["format_version"] = frame["format_version"].astype("int64")
    frame["higher_is_better"] = frame["higher_is_better"].astype(bool)
    return frame


def check_writable(path: Path) -> None:
    """Raise PerfLogError unless rows can be appended at ``path``: an existing log must read
    back cleanly (so a run never ends with rows it cannot add) and its folder must be writable."""
    read_rows(path, missing_ok=True)
    folder = next((p for p in (path.parent, *path.parents) if p.exists()), None)
    if folder is None or not folder.is_dir() or not os.access(folder if not path.exists() else path, os.W_OK):
        raise PerfLogError(f"{path}: cannot write the perf log here (no permission, or a file is in the way); "
                           "pass a writable perf_log_path or --out")


def _read_lines(path: Path) -> list[str]:
    if path.is_dir():
        raise PerfLogError(f"{path}: is a folder, not a perf log file; point perf_log_path/--path at a .csv file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a pipe without a writer must not block the open
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise PerfLogError(f"{path}: not a regular file (a pipe, socket or device such as /dev/zero); "
                                   "point perf_log_path/--path at the perf log's .csv file")
            data = fh.read()
    except OSError as exc:
        raise PerfLogError(f"{path}: cannot read the perf log ({exc.strerror}); check its permissions") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PerfLogError(f"{path}:{line}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
                           "the file was left untouched: fix or delete that line") from None
    lines = text.split("\n")
    return lines


def _check_header(path: Path, lines: list[str]) -> None:
    header = next(csv.reader([lines[0]]))
    if tuple(header) == COLUMNS:
        return
    if header and header[0] == "format_version" and len(lines) > 1:
        version = next(csv.reader([lines[1]]), [""])[0]
        if version.isdigit() and int(version) > FORMAT_VERSION:
            raise PerfLogError(_newer(path, 2, version))
        if version.isdigit() and int(version) < FORMAT_VERSION:
            raise PerfLogError(f"{path}: written by perf log format {version}, whose rows compared each run with "
                               "the other arm of the same run; this perfkit writes format "
                               f"{FORMAT_VERSION}: move the file aside (it was left untouched) and a new log starts")
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
    for key in _TEXT_COLUMNS:
        if row[key][:1] == "'":  # only a neutralized cell starts with ', and only it needs undoing
            row[key] = csv_cell_value(row[key])
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
    if isnan(row["value"]) or row["verdict"] not in VERDICTS or row["higher_is_better"] not in ("true", "false"):
        raise PerfLogError(f"{where}: corrupt row (value, verdict or higher_is_better invalid); "
                           "fix or delete this line")
    row["format_version"] = FORMAT_VERSION
    row["higher_is_better"] = row["higher_is_better"] == "true"
    return row


def _cell(column: str, value: Any) -> str:
    text = _serialize(value)
    return csv_cell(text) if column in _TEXT_COLUMNS else text


def _serialize(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def _append_bytes(path: Path, data: bytes, new: bool) -> None:
    """Append ``data`` whole or not at all: a write that fails part-way (no space left) is cut
    back to the log's previous end, so the rows already there stay readable."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PerfLogError(f"{path}: cannot write the perf log ({exc.strerror}); "
                           "pass a writable perf_log_path or --path") from None
    end = os.fstat(fd).st_size
    try:
        view = memoryview(data)
        while view:  # one write in practice; the loop only guards against a short write
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as exc:
        os.ftruncate(fd, end)
        raise PerfLogError(f"{path}: the rows of this run were not added ({exc.strerror}); the log was left as it "
                           "was: free some space and run again") from None
    finally:
        os.close(fd)
    if new:
        fsync_path(path.parent)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"
