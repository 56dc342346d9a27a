"""Read a Chrome-trace JSON file into (metadata, batches of event dicts), fast and lean.

Kineto writes one event per line, so the ``traceEvents`` array is parsed in chunks cut at line
breaks (a raw newline never occurs inside a JSON string, so such a cut is always between tokens):
each chunk is decoded into typed events (:mod:`perfkit.trace.events`), its columns extracted, and
its events freed before the next one. Peak memory is the file's text plus the columns, not a
Python dict per event. Any chunk that does
not parse as a list of whole events falls back to one full parse, so an unusual layout is slower,
never wrong. Bad input raises :class:`~perfkit.errors.TraceError` naming the file and the problem.
"""
from __future__ import annotations

import gzip
import json
import mmap
import re
import zlib
from pathlib import Path
from typing import Iterator

import msgspec
import orjson

from ..errors import TraceError, TruncatedTraceError
from .events import EVENTS, TOP_LEVEL

CHUNK_BYTES = 16 << 20
_ARRAY_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_REPORT_FIX = "Re-export the trace with torch.profiler (prof.export_chrome_trace or tensorboard_trace_handler)"


def read_bytes(path: Path, *, salvage: bool = False) -> tuple[bytes, list[str]]:
    """The file's JSON text: gunzipped bytes for gzip, else a read-only memory map (parsed chunks
    are released from memory as the parse moves on). A truncated gzip is an error unless
    ``salvage``, which keeps what decompresses."""
    if path.stat().st_size == 0:
        raise TraceError(path, "file is empty (0 bytes of JSON)", _REPORT_FIX)
    with open(path, "rb") as fh:
        head = fh.read(2)
        if head != b"\x1f\x8b":
            text = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            if not text[:4096].strip() and not text[:].strip():
                raise TraceError(path, "file is empty (0 bytes of JSON)", _REPORT_FIX)
            return text, []
    raw = path.read_bytes()
    try:
        return gzip.decompress(raw), []
    except (EOFError, OSError, zlib.error) as exc:
        if not salvage:
            raise TraceError(
                path, f"gzip data is truncated or corrupt ({exc})",
                "Copy the file again, or load_trace(..., salvage=True) to keep the events that decompress",
            ) from None
        partial = zlib.decompressobj(wbits=31).decompress(raw)
        return partial, [f"gzip stream truncated: salvaged from the first {len(partial):,} decompressed bytes"]


def iter_event_batches(path: Path, text: bytes, *, salvage: bool = False, chunked: bool = True):
    """Return (top-level metadata without traceEvents, iterator of event-dict lists, warnings).

    With ``chunked``, the iterator may raise :class:`LayoutFallback` part-way; the caller then
    starts again with ``chunked=False``.
    """
    match = _ARRAY_START.search(text, 0, 1 << 22) or _ARRAY_START.search(text)
    if chunked and match is not None:
        split = _split_layout(text, match.end())
        if split is not None:
            meta, start, end = split
            return meta, _chunks(path, text, start, end), []
    return _full_parse(path, text, salvage=salvage)


def _split_layout(text: bytes, start: int):
    """Find the array's closing bracket so that text outside it is the metadata object."""
    head = text[: start - 1]
    pos = len(text)
    for _ in range(64):
        pos = text.rfind(b"]", start - 1, pos)
        if pos < 0:
            return None
        try:
            meta = orjson.loads(head + b"[]" + text[pos + 1:])
        except orjson.JSONDecodeError:
            continue
        if isinstance(meta, dict) and meta.get("traceEvents") == []:
            del meta["traceEvents"]
            return meta, start, pos
        return None
    return None


def _chunks(path: Path, text: bytes, start: int, end: int) -> Iterator[list]:
    view = memoryview(text)
    pos = start
    while pos < end:
        cut = text.find(b"\n", min(pos + CHUNK_BYTES, end), end)
        cut = end if cut < 0 else cut
        first, last = _trim(text, pos, cut)
        if first < last:
            buffer = bytearray(b"[")
            buffer += view[first:last]
            buffer += b"]"
            try:
                batch = EVENTS.decode(buffer)
            except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
                raise LayoutFallback() from None
            yield batch
        _release(text, pos, cut)
        pos = cut + 1


def _release(text, first: int, last: int) -> None:
    """Drop the parsed pages of a memory-mapped file from memory (they are re-read if needed)."""
    if isinstance(text, mmap.mmap):
        start = first - first % mmap.PAGESIZE
        if last > start:
            text.madvise(mmap.MADV_DONTNEED, start, last - start)


def _trim(text: bytes, first: int, last: int) -> tuple[int, int]:
    """Bounds of text[first:last] without surrounding whitespace and trailing commas, without copying."""
    while first < last and text[first] in b" \t\r\n":
        first += 1
    while last > first and text[last - 1] in b" \t\r\n,":
        last -= 1
    return first, last


class LayoutFallback(Exception):
    """A chunk cut did not land between events: parse the whole text at once instead."""


def _full_parse(path: Path, text: bytes, *, salvage: bool) -> tuple[dict, Iterator[list], list[str]]:
    text = text if isinstance(text, bytes) else text[:]
    try:
        top = TOP_LEVEL.decode(text)
    except msgspec.ValidationError:
        return {}, iter([_decode_events(path, text)]), ["trace is a bare JSON array of events (no metadata)"]
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        return _handle_bad_json(path, text, exc, salvage=salvage)
    if "traceEvents" not in top:
        keys = ", ".join(sorted(top)[:8]) or "an empty object"
        raise TraceError(
            path, f"JSON has no 'traceEvents' list (top level: {keys}); this is not a PyTorch profiler trace",
            "Pass a Chrome trace written by torch.profiler",
        )
    try:
        meta = {k: orjson.loads(bytes(v)) for k, v in top.items() if k != "traceEvents"}
        return meta, iter([_decode_events(path, bytes(top["traceEvents"]))]), []
    except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
        _raise_if_not_utf8(path, text)
        raise TraceError(path, f"not valid JSON: {exc}", _REPORT_FIX) from None


def _decode_events(path: Path, raw: bytes) -> list:
    try:
        return EVENTS.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        doc = orjson.loads(raw)
        if not isinstance(doc, list):
            raise TraceError(path, f"traceEvents is {type(doc).__name__}, not a list of events", _REPORT_FIX) from None
        bad = next((i for i, e in enumerate(doc) if not isinstance(e, dict)), None)
        if bad is not None:
            raise TraceError(path, f"traceEvents[{bad}] is {type(doc[bad]).__name__}, not an event object",
                             _REPORT_FIX) from None
        raise TraceError(path, f"an event has a field of an unexpected type ({exc})", _REPORT_FIX) from None


def _raise_if_not_utf8(path: Path, text: bytes) -> None:
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as uexc:
        raise TraceError(
            path, f"bytes at offset {uexc.start} are not valid UTF-8 ({text[uexc.start:uexc.start + 4]!r})",
            "The file is corrupt or not a JSON trace; re-export it",
        ) from None


def _handle_bad_json(path: Path, text: bytes, exc, *, salvage: bool):
    _raise_if_not_utf8(path, text)
    if b'"traceEvents"' not in text or not _looks_truncated(text, exc):
        raise TraceError(path, f"not valid JSON: {exc}", _REPORT_FIX) from None
    meta, events = salvage_events(text)
    if not events:
        raise TraceError(path, "JSON ends mid-write and no complete event can be recovered", _REPORT_FIX) from None
    if not salvage:
        raise TruncatedTraceError(path, f"JSON is cut off after {len(text):,} bytes (profiler killed during export?)", len(events))
    warning = f"trace was cut off mid-write: recovered {len(events):,} complete events; later events are lost"
    return meta, iter([_decode_events(path, orjson.dumps(events))]), [warning]


def _looks_truncated(text: bytes, exc) -> bool:
    tail = text.rstrip()
    if not tail.endswith((b"}", b"]")):
        return True
    try:
        json.loads(tail.decode("utf-8"))
    except json.JSONDecodeError as jexc:
        return jexc.pos >= len(tail) - 2
    return False


def salvage_events(text: bytes) -> tuple[dict, list]:
    """Complete events at the start of a truncated ``traceEvents`` array, plus the metadata keys
    written before it."""
    s = text.decode("utf-8", errors="replace")
    match = re.search(r'"traceEvents"\s*:\s*\[', s)
    if match is None:
        return {}, []
    meta = _salvage_head(s[: match.start()])
    decoder = json.JSONDecoder()
    events, pos, n = [], match.end(), len(s)
    while pos < n:
        while pos < n and s[pos] in " \t\r\n,":
            pos += 1
        try:
            event, pos = decoder.raw_decode(s, pos)
        except json.JSONDecodeError:
            break
        if isinstance(event, dict):
            events.append(event)
    return meta, events


def _salvage_head(head: str) -> dict:
    body = head.rstrip().rstrip(",")
    try:
        meta = json.loads(body + "}")
        return meta if isinstance(meta, dict) else {}
    except json.JSONDecodeError:
        return {}
