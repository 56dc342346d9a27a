"""Decode one chunk of a ``traceEvents`` array into columns: the unit of work of a parser process.

A chunk is a JSON array of whole events (``b"[{...}, {...}]"``) cut out of the file by
:mod:`perfkit.trace.loader.parse`. :func:`decode_chunk` returns a :class:`ColumnBuilder` holding its
columns, or a :class:`ChunkFailure` describing why the bytes are not a list of events. It never
raises for bad input, so a failure travels back from a worker process as data. The C extension
decodes the chunk where it is built (:mod:`perfkit.trace.loader.native`); a chunk it does not handle,
a malformed one included, is decoded by msgspec, whose failure is the one reported.
"""
from __future__ import annotations

import gc
import mmap
import re
from contextlib import contextmanager
from dataclasses import dataclass

import msgspec
import orjson

from . import native
from .columns import ColumnBuilder
from .events import EVENTS
from .fields import EventFields

_AT_BYTE = re.compile(r"\s*\(byte (\d+)\)")
_AT_INDEX = re.compile(r"`\$\[(\d+)\]([^`]*)`")


@dataclass(frozen=True)
class ChunkFailure:
    """Why a chunk did not decode. ``kind``: "syntax" (not JSON), "truncated" (ends mid-event), "utf8",
    "depth" (nested deeper than the decoder recurses), "type" (JSON, but not events of the expected
    types). ``message``: what was wrong; ``offset``: byte offset in the chunk, -1 when unknown;
    ``index``: which event of the chunk, -1 when unknown."""

    kind: str
    message: str
    offset: int = -1
    index: int = -1

    def problem(self, start: int, seen: int) -> str:
        """What was wrong, for a chunk whose first event is at byte ``start`` of the JSON and
        follows ``seen`` events."""
        where = start + max(self.offset - 1, 0)  # the chunk's '[' is not in the file
        if self.kind == "type":
            return f"traceEvents[{seen + max(self.index, 0)}] {self.message}"
        if self.kind == "utf8":
            return f"{self.message} (byte {where:,} of the JSON)"
        if self.kind == "depth":
            return f"JSON nested deeper than the decoder follows, in the events after byte {start:,}"
        return f"not valid JSON: {self.message} (byte {where:,})"


def decode_chunk(data: bytes) -> ColumnBuilder | ChunkFailure:
    """Columns of the events in ``data`` (see :class:`ColumnBuilder`), or why there are none."""
    with gc_paused():
        return _decode(data)


@contextmanager
def gc_paused():
    """No cyclic garbage collection inside: decoded events hold no cycles, so scanning their ~10^5
    objects is wasted (~8%), and in a forked worker a collection writes to every object it scans,
    copying the parent's pages (the shapes pass ran 2x slower)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _decode(data: bytes) -> ColumnBuilder | ChunkFailure:
    if native.chosen() == "native":
        fields = native.decode(data)
        if not isinstance(fields, str):  # a str: what it does not handle
            return _built(fields)
    return decode_python(data)


def decode_python(data: bytes) -> ColumnBuilder | ChunkFailure:
    """The pure-Python path of :func:`decode_chunk`: msgspec's typed decode, then column building."""
    try:
        batch = EVENTS.decode(data)
    except msgspec.ValidationError as exc:
        return _type_failure(data, str(exc))
    except msgspec.DecodeError as exc:
        if str(exc) == "Input data was truncated":
            return ChunkFailure("truncated", str(exc), len(data))
        found = _AT_BYTE.search(str(exc))
        return ChunkFailure("syntax", _AT_BYTE.sub("", str(exc)), int(found.group(1)) if found else -1)
    except UnicodeDecodeError:
        return _utf8_failure(data)
    except RecursionError:
        return ChunkFailure("depth", "JSON nested deeper than the decoder recurses")
    return _built(EventFields(batch))


def _built(fields) -> ColumnBuilder:
    builder = ColumnBuilder(file_id=0, rank=0)
    builder.add(fields)
    return builder


_SHARED: mmap.mmap | None = None  # memory shared with forked workers (see share_memory)


def share_memory(size: int) -> mmap.mmap:
    """Anonymous memory that worker processes forked after this call see too: the parent writes a
    chunk there and a worker decodes it in place (:func:`decode_shared`), instead of the chunk being
    pickled through a pipe (five copies of every byte of a gzip trace, ~2 s of CPU per GB)."""
    global _SHARED
    _SHARED = mmap.mmap(-1, size)
    return _SHARED


def decode_shared(offset: int, size: int) -> ColumnBuilder | ChunkFailure:
    """:func:`decode_chunk` of the chunk the parent wrote at ``offset`` of the shared memory."""
    with memoryview(_SHARED) as shared, shared[offset:offset + size] as data:
        return decode_chunk(data)


def decode_range(path: str, start: int, end: int) -> ColumnBuilder | ChunkFailure:
    """:func:`decode_chunk` of the events in bytes ``start:end`` of a plain file, read here (in
    the worker) so that they never pass through the parent process."""
    data = bytearray(end - start + 2)
    data[0], data[-1] = ord("["), ord("]")
    with open(path, "rb") as fh:
        fh.seek(start)
        got = fh.readinto(memoryview(data)[1:-1])
    if got < end - start:  # the file shrank since it was cut
        return ChunkFailure("truncated", f"the file ends {end - start - got:,} bytes early", got + 1)
    return decode_chunk(data)


def _type_failure(data: bytes, message: str) -> ChunkFailure:
    found = _AT_INDEX.search(message)
    index = int(found.group(1)) if found else -1
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, list) and 0 <= index < len(doc) and not isinstance(doc[index], dict):
        return ChunkFailure("type", f"is {type(doc[index]).__name__}, not an event object", index=index)
    field = found.group(2).lstrip(".") if found else ""
    what = message.split(" - at ")[0]
    return ChunkFailure("type", f"has a field of an unexpected type ({field}: {what})" if field
                        else f"has a field of an unexpected type ({what})", index=index)


def _utf8_failure(data: bytes) -> ChunkFailure:
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = bytes(data[exc.start:exc.start + 4])
        return ChunkFailure("utf8", f"bytes {bad!r} are not valid UTF-8", offset=exc.start)
    return ChunkFailure("utf8", "a string is not valid UTF-8")
