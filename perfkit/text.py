"""Output that is safe to show: printable-only text for terminals, strictly valid JSON.

Names in a trace, a script or a snapshot come from files perfkit did not write: an ANSI or OSC
escape in a kernel name would recolour the terminal, retitle the window or clear the screen, and a
newline would split a table row. :func:`printable` shows every such character as its ``\\x``
escape instead. The CLI runs each command with stdout passed through :class:`PrintableStream`, and
formats tables from :func:`printable_data` so a newline in a name stays inside its cell.
:func:`json_text` is the one JSON writer of CLI output: never ``NaN``/``Infinity``, never a raw
control byte.
"""
from __future__ import annotations

import json
import math
import os

import orjson


def printable(text, keep: str = "") -> str:
    """``str(text)`` with each unprintable character (C0/C1 controls, ESC, DEL, line and paragraph
    breaks, bidi overrides and other format characters, lone surrogates) replaced by its Python
    escape (``\\x1b``, ``\\n``, ``\\u202e``). Characters in ``keep`` (say ``"\\n"``) pass through."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():
        return text
    if keep:
        return _join_kept(text, keep)
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _join_kept(text: str, keep: str) -> str:
    first, rest = keep[0], keep[1:]
    return first.join(printable(part, rest) for part in text.split(first))


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def path_text(path) -> str:
    """A file path as text any UTF-8 writer takes (JSON, Arrow, Parquet): a name whose bytes are not UTF-8
    (read under an ASCII locale, or written by another system) keeps them as ``\\xNN`` escapes instead of
    the lone surrogates Python decodes them to, which no UTF-8 encoder accepts."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, its last one an ellipsis when cut (table columns)."""
    return text if len(text) <= width else text[:width - 1] + "…"


def printable_data(value):
    """A copy of a JSON-like value (dicts, lists, tuples, strings, numbers) with every string, keys
    included, passed through :func:`printable`: what a table formatter should be given."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_data(k): printable_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(printable_data(v) for v in value)
    return value


def jsonable(value):
    """A copy of a JSON-like value fit for strict JSON: numpy scalars made plain Python, NaN, +-inf
    and ``pd.NA`` made None (JSON ``null``), tuples made lists, keys made strings."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # most values: nothing to do
        return value
    if isinstance(value, dict):
        return {k if type(k) is str else str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()  # numpy scalar -> bool, int or float (numpy stays unimported here)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if type(value).__name__ == "NAType":  # pandas.NA
        return None
    return value


def us_text(value: float) -> str:
    """Microseconds as "49 us" or "1.204 ms"."""
    return f"{value / 1e3:,.3f} ms" if abs(value) >= 1e3 else f"{value:,.0f} us"


def json_text(value, **dumps_kwargs) -> str:
    """Strict JSON of ``value``: non-finite floats become null (a NaN that reached output is a bug
    upstream, but the output must still parse), and every non-ASCII or control character is
    ``\\u``-escaped, so the text is printable as it stands.

    Without ``dumps_kwargs`` the text is orjson's (compact; NaN and infinities are null there too;
    ten times faster on a million values) when orjson takes the value as it is and writes only
    printable ASCII; otherwise (``pd.NA``, keys that are not strings, non-ASCII text, ``indent``)
    the standard library writes :func:`jsonable` of it."""
    if not dumps_kwargs:
        try:
            raw = orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
        except TypeError:  # orjson.JSONEncodeError: a value or key it does not take
            pass
        else:
            if raw.isascii() and b"\x7f" not in raw:  # orjson escapes the C0 controls, not DEL
                return raw.decode()
    return json.dumps(jsonable(value), allow_nan=False, ensure_ascii=True, **dumps_kwargs)


class StreamWriteError(Exception):
    """A write to (or flush of) the stream under a :class:`PrintableStream` failed: a full disk
    (``> /dev/full``), a closed descriptor (``>&-``), a file past ``ulimit -f``. Not an OSError, so code
    that treats a failed file write as a warning does not swallow it; the CLI turns it into one line on
    stderr and exit 1. A closed pipe stays a ``BrokenPipeError`` (the reader left: exit quietly)."""


class PrintableStream:
    """A text stream wrapper whose ``write`` passes text through :func:`printable`, keeping newlines,
    and whose ``write`` and ``flush`` raise :class:`StreamWriteError` when the stream cannot take it.

    Everything else (``isatty``, ``fileno``, ``encoding``, ...) is the wrapped stream's.
    """

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        with _writing(self._stream):
            self._stream.write(printable(text, keep="\n"))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        with _writing(self._stream):
            self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _writing:  # noqa: N801  (``with _writing(stream):``)
    """Turns a failed write into a :class:`StreamWriteError` saying why; a closed pipe passes through."""

    def __init__(self, stream):
        self._stream = stream

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, BrokenPipeError) or not isinstance(exc, (OSError, ValueError)):
            return False
        if isinstance(exc, UnicodeError):
            return False
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        name = _STANDARD.get(getattr(self._stream, "name", None), "the output")
        raise StreamWriteError(f"cannot write to {name}: {reason}") from None


_STANDARD = {"<stdout>": "standard output", 1: "standard output", "<stderr>": "standard error", 2: "standard error"}


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV Injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows instead of running: a leading ``=``, ``+``, ``-``,
    ``@``, tab or CR gets a ``'`` in front (as OWASP advises). Reversible by :func:`csv_cell_value`:
    a cell that already starts with ``'`` before one of these gets a second ``'``."""
    return "'" + text if _looks_like_formula(text) else text


def csv_cell_value(cell: str) -> str:
    """The text :func:`csv_cell` was given (``csv_cell_value(csv_cell(t)) == t`` for every ``t``)."""
    return cell[1:] if cell[:1] == "'" and _looks_like_formula(cell[1:]) else cell


def _looks_like_formula(text: str) -> bool:
    stripped = text.lstrip("'")
    return stripped[:1] in _FORMULA_STARTS and stripped != ""


def csv_safe_frame(frame):
    """``frame`` with :func:`csv_cell` applied to every text cell (numeric columns untouched, so
    ``-3.5`` stays a number), for ``DataFrame.to_csv``."""
    text_columns = [c for c in frame.columns if frame[c].dtype.kind in "OUST"]  # object, str, category
    if not text_columns:
        return frame
    return frame.assign(**{c: frame[c].map(lambda v: csv_cell(v) if isinstance(v, str) else v) for c in text_columns})
