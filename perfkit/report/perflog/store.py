"""The perf log's file: versioned CSV rows, read and appended here and nowhere else.

Every row carries ``format_version`` (``FORMAT_VERSION``) and the ``COLUMNS`` in order.
Nothing reads the file whole: ``read_rows`` streams it oldest first, ``rows_newest_first`` reads it
backwards in blocks for a reader that wants the last runs only (``perfkit log``, the baselines of an
append), so a 1M-row log costs memory for the rows kept, not for the file. Both refuse rows of an
unknown version, a file that is not UTF-8 text or not a file, and name the file and line of a
corrupt row; nothing they refuse is modified. A UTF-8 BOM before the header and CRLF line ends
are accepted. ``write_rows`` appends all its rows (and the header, for a new file) with one
``os.write`` + ``fsync``, after reading only the file's last byte. Callers hold ``locked(path, ...)``
around them: an ``fcntl.flock`` on a sidecar ``<log>.lock`` file, so concurrent writers never lose
or interleave rows.
"""
from __future__ import annotations

import csv
import io
import itertools
import math
import os
import re
import stat
from contextlib import contextmanager
from datetime import date as _date
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from ...atomic import fsync_path
from ...errors import ParameterError, PerfkitError
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
# The log is read in blocks, never whole: a 1M-row log (136 MB) read whole took 2.4 GB.
_BLOCK_BYTES = 1 << 20
MAX_ROW_BYTES = 1 << 20  # a row is under 1 KB; a longer line is not a row (and is not held whole)
_NEEDS_CSV = re.compile('["\r\x00]')


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


def read_rows(path: Path, missing_ok: bool) -> Iterator[dict]:
    """Typed rows of the log at ``path``, oldest first, streamed (one row in memory at a time).
    Raises PerfLogError naming ``file:line`` for a corrupt row or an unknown format version, and
    for a missing file unless ``missing_ok``. A generator: the file is open until it is exhausted
    or closed."""
    with _open_log(path, missing_ok) as fh:
        if fh is None:
            return
        start = _check_header(path, fh)
        fh.seek(start)
        line_no, offset = 1, start
        while raw := fh.readline(MAX_ROW_BYTES + 1):
            line_no += 1
            row = _row(path, raw, offset, lambda: line_no)
            offset += len(raw)
            if row is not None:
                yield row


def rows_newest_first(path: Path, missing_ok: bool = True) -> Iterator[dict]:
    """Typed rows of the log at ``path``, newest first, read backwards from the end in 1 MiB blocks:
    a reader that wants the last runs stops early and never reads the rest. Same refusals as
    ``read_rows``; a generator, as ``read_rows``."""
    with _open_log(path, missing_ok) as fh:
        if fh is None:
            return
        start = _check_header(path, fh)
        for offset, raw in _lines_backward(path, fh, start):
            row = _row(path, raw, offset, lambda: _line_at(fh, offset))
            if row is not None:
                yield row


def count_rows(path: Path) -> int:
    """Lines after the header (rows, and any blank line), counted without parsing them."""
    with _open_log(path, missing_ok=True) as fh:
        if fh is None:
            return 0
        fh.seek(_check_header(path, fh))
        lines, last = 0, b"\n"
        while block := fh.read(_BLOCK_BYTES):
            lines, last = lines + block.count(b"\n"), block[-1:]
        return lines + (last != b"\n")


def check_header(path: Path) -> None:
    """Raise PerfLogError unless ``path`` is missing, empty or starts with this format's header."""
    with _open_log(path, missing_ok=True) as fh:
        if fh is not None:
            _check_header(path, fh)


def write_rows(path: Path, rows: list[dict]) -> None:
    """Append complete rows (``COLUMNS`` keys) in one write; a new or empty file gets the header."""
    new = not path.exists() or path.stat().st_size == 0
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if new:
        writer.writerow(COLUMNS)
    elif not _ends_with_newline(path):
        buf.write("\n")
    for row in rows:
        start = buf.tell()
        writer.writerow([_cell(c, row[c]) for c in COLUMNS])
        _check_row_size(row, len(buf.getvalue()[start:].encode("utf-8")))
    _append_bytes(path, buf.getvalue().encode("utf-8"), new)


def _check_row_size(row: dict, size: int) -> None:
    """Refuse a row its own reader would call corrupt (longer than MAX_ROW_BYTES: a 1.1 MB ``change``)."""
    if size > MAX_ROW_BYTES:
        field = max(_TEXT_COLUMNS, key=lambda c: len(str(row[c])))
        raise ParameterError(f"PerfLog.append: the row of {row['metric']!r} would be {size:,} bytes, over the "
                             f"{MAX_ROW_BYTES:,} a perf log row may have ({field} alone is {len(str(row[field])):,} "
                             f"characters); shorten {field} (nothing was written)")


def empty_log() -> pd.DataFrame:
    """A log frame with no rows (the columns and dtypes of ``PerfLog.read()``)."""
    return log_frame([])


def log_frame(rows) -> pd.DataFrame:
    """Rows (an iterable of ``COLUMNS`` dicts) as a frame with their dtypes (floats, int version,
    bool direction). Built column by column with each text value stored once (a run's id, device
    and host repeat on each of its rows): 1M rows take ~300 MB, not the 2 GB of a list of dicts."""
    columns: dict[str, list] = {c: [] for c in COLUMNS}
    seen: dict[str, str] = {}
    for row in rows:
        for key, cells in columns.items():
            value = row[key]
            cells.append(seen.setdefault(value, value) if isinstance(value, str) else value)
    frame = pd.DataFrame(columns, columns=list(COLUMNS))
    for key in _FLOAT_COLUMNS:
        frame[key] = frame[key].astype("float64")
    frame["format_version"] = frame["format_version"].astype("int64")
    frame["higher_is_better"] = frame["higher_is_better"].astype(bool)
    return frame


def check_writable(path: Path) -> None:
    """Raise PerfLogError unless rows can be appended at ``path``: an existing log must be a
    perf log of this format (its header; rows are checked as they are read) and its folder writable."""
    check_header(path)
    folder = next((p for p in (path.parent, *path.parents) if p.exists()), None)
    if folder is None or not folder.is_dir() or not os.access(folder if not path.exists() else path, os.W_OK):
        raise PerfLogError(f"{path}: cannot write the perf log here (no permission, or a file is in the way); "
                           "pass a writable perf_log_path or --out")


@contextmanager
def _open_log(path: Path, missing_ok: bool):
    """The log opened for binary reading (None for a missing file when ``missing_ok``); refuses a
    folder, a pipe or a device without blocking on it."""
    if not path.exists():
        if not missing_ok:
            raise PerfLogError(f"{path}: no perf log here; notebooks create it with "
                               "PerfLog(path).append(...), or pass the right --path")
        yield None
        return
    if path.is_dir():
        raise PerfLogError(f"{path}: is a folder, not a perf log file; point perf_log_path/--path at a .csv file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a pipe without a writer must not block the open
    except OSError as exc:
        raise PerfLogError(f"{path}: cannot read the perf log ({exc.strerror}); check its permissions") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PerfLogError(f"{path}: not a regular file (a pipe, socket or device such as /dev/zero); "
                               "point perf_log_path/--path at the perf log's .csv file")
        yield fh


def _check_header(path: Path, fh) -> int:
    """The offset of the first row, after checking the header line (a UTF-8 BOM before it is
    accepted: an editor on Windows adds one); 0 for an empty file."""
    fh.seek(0)
    first = fh.readline(MAX_ROW_BYTES + 1)
    if first == b"":
        return 0
    header = next(csv.reader([_text(path, first, 0, lambda: 1).removeprefix("\ufeff")]), [])
    if tuple(header) == COLUMNS:
        return len(first)
    second = fh.readline(MAX_ROW_BYTES + 1)
    if header and header[0] == "format_version" and second:
        version = next(csv.reader([_text(path, second, len(first), lambda: 2)]), [""])[0]
        if version.isdigit() and int(version) > FORMAT_VERSION:
            raise PerfLogError(f"{path}:2: {_newer(version)}")
        if version.isdigit() and int(version) < FORMAT_VERSION:
            raise PerfLogError(f"{path}: written by perf log format {version}, whose rows compared each run with "
                               "the other arm of the same run; this perfkit writes format "
                               f"{FORMAT_VERSION}: move the file aside (it was left untouched) and a new log starts")
    raise PerfLogError(f"{path}:1: header is not a perfkit perf log (format {FORMAT_VERSION}) header; "
                       "point --path at a log written by PerfLog, or move this file aside")


def _lines_backward(path: Path, fh, start: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line)`` of every line after ``start``, last first, without its newline."""
    pos, tail = fh.seek(0, os.SEEK_END), b""
    while pos > start:
        step = min(_BLOCK_BYTES, pos - start)
        pos -= step
        fh.seek(pos)
        parts = (fh.read(step) + tail).split(b"\n")
        tail = parts[0]
        if len(tail) > MAX_ROW_BYTES:
            raise PerfLogError(f"{path}:{_line_at(fh, pos)}: {_too_long()}")
        offsets = list(itertools.accumulate((len(p) + 1 for p in parts[:-1]), initial=pos))
        yield from zip(reversed(offsets[1:]), reversed(parts[1:]))
    if tail:
        yield start, tail


def _line_at(fh, offset: int) -> int:
    """The line number at byte ``offset`` (only for an error message: it reads the file up to there)."""
    fh.seek(0)
    lines, left = 1, offset
    while left > 0 and (block := fh.read(min(_BLOCK_BYTES, left))):
        lines += block.count(b"\n")
        left -= len(block)
    return lines


def _text(path: Path, raw: bytes, offset: int, line_no) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PerfLogError(f"{path}:{line_no()}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset "
                           f"{offset + exc.start}); the file was left untouched: fix or delete that line") from None


def _row(path: Path, raw: bytes, offset: int, line_no) -> dict | None:
    """The typed row of one line (None for a blank line); ``line_no()`` places an error."""
    if len(raw) > MAX_ROW_BYTES:
        raise PerfLogError(f"{path}:{line_no()}: {_too_long()}")
    line = _text(path, raw, offset, line_no).rstrip("\n")
    if not line.strip():
        return None
    try:
        return _parse_row(line)
    except _RowError as exc:
        raise PerfLogError(f"{path}:{line_no()}: {exc}") from None


def _too_long() -> str:
    return (f"corrupt row: a line longer than {MAX_ROW_BYTES:,} bytes (a row is under 1 KB); "
            "fix or delete this line")


class _RowError(Exception):
    """What is wrong with one row (the caller adds ``file:line``)."""


def _newer(version: str) -> str:
    return (f"written by perf log format {version}, this perfkit reads format "
            f"{FORMAT_VERSION}: upgrade perfkit to read it (the file was left untouched)")


def _parse_row(line: str) -> dict:
    line = line.removesuffix("\r")  # a CRLF log reads as an LF one
    if _NEEDS_CSV.search(line):  # quotes, a stray CR or NUL: the csv module decides
        try:
            fields = next(csv.reader([line], strict=True))
        except csv.Error as exc:
            raise _RowError(f"corrupt row ({exc}); fix or delete this line") from None
    else:  # no quote: a CSV line is its comma-separated fields (4x faster on a 1M-row log)
        fields = line.split(",")
    if fields and fields[0].isdigit() and int(fields[0]) > FORMAT_VERSION:
        raise _RowError(_newer(fields[0]))
    if len(fields) != len(COLUMNS):
        raise _RowError(f"corrupt row: {len(fields)} fields, expected {len(COLUMNS)} "
                        "(a truncated or hand-edited line?); fix or delete this line")
    row = dict(zip(COLUMNS, fields))
    for key in _TEXT_COLUMNS:
        if row[key][:1] == "'":  # only a neutralized cell starts with ', and only it needs undoing
            row[key] = csv_cell_value(row[key])
    return _typed_row(row)


def _typed_row(row: dict) -> dict:
    if row["format_version"] != str(FORMAT_VERSION):
        raise _RowError(f"format_version={row['format_version']!r} is not a known version")
    try:
        _date.fromisoformat(row["date"])
        for key in _FLOAT_COLUMNS:
            row[key] = float(row[key]) if row[key] != "" else math.nan
    except ValueError as exc:
        raise _RowError(f"corrupt row ({exc}); fix or delete this line") from None
    if isnan(row["value"]) or row["verdict"] not in VERDICTS or row["higher_is_better"] not in ("true", "false"):
        raise _RowError("corrupt row (value, verdict or higher_is_better invalid); fix or delete this line")
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
