"""Read a Chrome-trace JSON file into its metadata and the columns of its events, streaming.

Every layout takes one path. The file's decompressed bytes arrive block by block
(:mod:`perfkit.trace.loader.stream`); the ``traceEvents`` array is cut into chunks of about
:data:`CHUNK_BYTES`, each ending between two events, and each chunk is decoded into columns
(:mod:`perfkit.trace.loader.decode`), in worker processes (:mod:`perfkit.trace.loader.handoff`) when there are
several cores. Memory is a few
chunks plus the columns whatever the layout: one event a line, Kineto's multi-line layout,
``json.dump``'s single line, gzip or not.

A cut goes at the first ``}, {"`` past the chunk's target size: in a profiler trace that is always
between two events, and decoding checks it, since a chunk decodes as a list of events only if it
ends exactly between two. Should a chunk fail (a ``}, {"`` inside a string or a nested list of
objects), the file is parsed again with exact cuts from :mod:`perfkit.trace.loader.scan`, which also finds
where the array ends, the last complete event of a truncated file and the nesting depth. Bad input
raises :class:`~perfkit.errors.TraceError` naming the file and the problem.
"""
from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ...errors import SALVAGE_HOW, TraceError, TruncatedTraceError
from ...limits import MAX_EVENT_BYTES, MAX_METADATA_BYTES, MAX_TABLE_BYTES
from .columns import ColumnBuilder
from . import native
from .decode import ChunkFailure, decode_chunk, decode_range, decode_shared
from .metadata import (CUT_OFF, REPORT_FIX, around_events, check_depth, keys_before, top_level_events_key,
                       without_events_array)
from .scan import scan
from .handoff import Slots, SlotWriter, range_cuts
from .stream import ByteStream
from .workers import process_pool, will_fork

CHUNK_BYTES = 8 << 20
EVENT_CUT = re.compile(rb'\}\s*,\s*(\{)\s*"')
_SEPARATOR = re.compile(rb"\s*,?\s*")
_NON_SPACE = re.compile(rb"[^ \t\r\n]")
_SPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
_ROW_BYTES = 192  # an events-table row is ~96 bytes; assembling the table briefly holds it twice
_IN_FLIGHT = 3  # chunks queued per worker: keeps workers busy (0.05-0.2 s faster than 2), bounds memory
_GZIP_FIX = f"Copy the file again, or keep the events that decompress: {SALVAGE_HOW}"


@dataclass
class ParsedTrace:
    """``meta``: the top-level JSON keys other than traceEvents; ``columns``: the events read;
    ``warnings``: what was unusual (bare array, salvaged events)."""

    meta: dict
    columns: ColumnBuilder
    warnings: list[str] = field(default_factory=list)


def parse_trace(path, *, salvage: bool = False, workers: int = 1, on_progress=None) -> ParsedTrace:
    """Parse one trace file, ``.json`` or gzip, in any JSON layout.

    ``salvage``: keep the complete events of a file cut off mid-write (with a warning) instead of raising
    :class:`TruncatedTraceError`. ``workers``: processes decoding chunks (1: this process). ``on_progress(done,
    total)``: called as the file is read, in bytes of the file on disk. Raises :class:`TraceError` for unreadable
    input and for input past a limit of :mod:`perfkit.limits`."""
    path = Path(path)
    for budget in (MAX_METADATA_BYTES, MAX_EVENT_BYTES, MAX_TABLE_BYTES):
        budget.value()  # a malformed variable is refused whether or not this file would reach the budget
    native.chosen()  # and so is a PERFKIT_DECODER that names no decoder built here, before any worker starts
    try:
        try:
            return _Parser(path, salvage, workers, on_progress, exact=False).run()
        except _Recut:
            return _Parser(path, salvage, workers, on_progress, exact=True).run()
    except OSError as exc:
        raise TraceError(path, f"cannot read the file ({exc.strerror or exc})",
                         "Check that it exists and that you may read it") from None


class _Recut(Exception):
    """A fast cut did not land between two events: parse again with exact cuts."""


class _Parser:
    def __init__(self, path: Path, salvage: bool, workers: int, on_progress, exact: bool):
        self.path, self.salvage, self.workers, self.on_progress, self.exact = path, salvage, workers, on_progress, exact
        self.columns = ColumnBuilder(file_id=0, rank=0)
        self.warnings: list[str] = []
        self.buffer = bytearray()
        self.base = 0  # offset in the decompressed stream of buffer[0]
        self.pos = 0  # buffer index where the next event starts
        self.searched = 0  # buffer index up to which a fast cut was looked for
        self.header: bytes | None = None  # '{...,"traceEvents":' (None: a bare array)
        self.closed_at = -1  # buffer index of the ']' that closes traceEvents, once found
        self.rows = 0
        self.pending: deque = deque()
        self.pool = None
        self.slots: Slots | None = None

    def run(self) -> ParsedTrace:
        if self.path.stat().st_size == 0:
            raise TraceError(self.path, "file is empty (0 bytes of JSON)", REPORT_FIX)
        try:
            with ByteStream(self.path) as stream:
                if self._parallel(stream):
                    self._share_slots()
                    self.pool = process_pool(self.workers)
                blocks = iter(stream)
                found = self._read_header(blocks)
                if found and self.pool is not None and not stream.gzip and not self.exact:
                    blocks.close()
                    self._cut_ranges(stream)
                if found and self.slots is not None and stream.gzip and not self.exact:
                    self._fill_slots(blocks, stream)
                for block in blocks:
                    self.buffer += block
                    self._cut_chunks()
                    self._progress(stream)
                self._progress(stream)
                self._gzip_end(stream)
                meta = self._finish() if found else self._whole_document()
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
            if self.slots is not None:
                self.slots.close()
        return ParsedTrace(meta, self.columns, self.warnings)

    def _parallel(self, stream: ByteStream) -> bool:
        if self.workers <= 1:
            return False
        size = stream.size
        if stream.gzip and size >= 18:
            with open(self.path, "rb") as fh:  # ISIZE: the last member's inflated size, mod 2**32
                fh.seek(-4, 2)
                size = max(size, int.from_bytes(fh.read(4), "little"))
        return size >= 4 * CHUNK_BYTES

    def _progress(self, stream: ByteStream) -> None:
        if self.on_progress is not None:
            self.on_progress(stream.read_bytes, stream.size)

    # -- the JSON before the events ---------------------------------------------------------

    def _read_header(self, blocks) -> bool:
        """Read up to the start of the events; False when the file has no ``"traceEvents": [``."""
        limit, first = MAX_METADATA_BYTES.value(), -1
        for block in blocks:
            searched = len(self.buffer)
            self.buffer += block
            if first < 0:
                first = _first_byte(self.buffer, searched)
            if first < 0:
                self._check_blank_size(limit)
                continue
            if self.buffer[first] == ord("["):
                self.pos = self.searched = first + 1
                self.warnings.append("trace is a bare JSON array of events (no metadata)")
                return True
            if self.buffer[first] != ord("{"):
                raise TraceError(self.path, f"not valid JSON (it starts with {bytes(self.buffer[first:first + 16])!r})",
                                 REPORT_FIX)
            found = top_level_events_key(self.buffer, first, max(first, searched - 32))
            if found:
                self.header = bytes(self.buffer[first:found.end() - 1])
                self.pos = self.searched = found.end()
                return True
            if len(self.buffer) > limit:
                raise TraceError(self.path, MAX_METADATA_BYTES.refusal(
                    f"the JSON before the traceEvents array ({len(self.buffer):,} bytes read without finding it)"))
        return False

    def _check_blank_size(self, limit: int) -> None:
        if len(self.buffer) > limit:
            raise TraceError(self.path, MAX_METADATA_BYTES.refusal(
                f"whitespace before any JSON ({len(self.buffer):,} bytes of it)"), "This is not a profiler trace")

    def _whole_document(self) -> dict:
        meta, events = without_events_array(self.path, bytes(self.buffer))
        self._absorb(decode_chunk(orjson.dumps(events)), 0)
        return meta

    # -- cutting the events into chunks ----------------------------------------------------------

    def _cut_chunks(self) -> None:
        if self.closed_at >= 0:
            if len(self.buffer) - self.closed_at > MAX_METADATA_BYTES.value():
                raise TraceError(self.path, MAX_METADATA_BYTES.refusal("the JSON after the traceEvents array"))
            return
        while self.closed_at < 0 and len(self.buffer) - self.pos >= CHUNK_BYTES:
            cut = self._exact_cut() if self.exact else self._fast_cut()
            if cut is None:
                break
            end, start = cut
            self._submit(self.pos, end)
            self.pos = self.searched = start
        if self.closed_at < 0:
            self._check_event_size()
            self._compact()

    def _fast_cut(self):
        found = _fast_cut_in(self.buffer, max(self.pos + CHUNK_BYTES, self.searched - 64), len(self.buffer))
        self.searched = len(self.buffer)
        return found

    def _exact_cut(self):
        structure = self._scan(self.pos, len(self.buffer))
        if structure.close >= 0:
            self._submit(self.pos, structure.close)
            self.closed_at = self.pos = structure.close
            return None
        if not len(structure.ends):
            return None
        end = int(structure.ends[-1])
        return end, _SEPARATOR.match(self.buffer, end).end()

    def _scan(self, first: int, last: int):
        """:func:`scan` of buffer[first:last] (offsets are buffer indices), with the depth limit applied."""
        structure = scan(self.buffer, first, last)
        outside = 1 if self.header is None else 2  # the array (and the top-level object)
        check_depth(self.path, structure.max_depth + outside, f"inside traceEvents, after byte {self.base + first:,}")
        return structure


    def _check_event_size(self) -> None:
        """Without a cut, the buffer grows: one event (or the space between two) must fit the limit."""
        if len(self.buffer) - self.pos > CHUNK_BYTES + MAX_EVENT_BYTES.value():
            self._event_too_big(self.base + self.pos)

    def _event_too_big(self, start: int) -> None:
        raise TraceError(self.path, MAX_EVENT_BYTES.refusal(
            f"the JSON from byte {start:,} on, without the end of an event in it"), "This file is corrupt or not a trace")

    def _compact(self) -> None:
        if self.pos:
            del self.buffer[:self.pos]  # O(1) for a bytearray's head
            self.base += self.pos
            self.searched -= self.pos
            self.pos = 0

    # -- decoding chunks ---------------------------------------------------------------

    def _submit(self, first: int, last: int) -> None:
        if _NON_SPACE.search(self.buffer, first, last) is None:
            return
        if self.slots is not None:
            with memoryview(self.buffer) as view:
                slot = self.slots.put(view[first:last])
            if slot >= 0:
                self._dispatch(decode_shared, (slot, last - first + 2), self.base + first, slot)
                return
        with memoryview(self.buffer) as view:
            data = b"".join((b"[", view[first:last], b"]"))
        self._dispatch(decode_chunk, (data,), self.base + first)

    def _dispatch(self, decode, args: tuple, start: int, slot: int = -1) -> None:
        if self.pool is None:
            self._absorb(decode(*args), start)
            return
        self.pending.append((self.pool.submit(decode, *args), start, slot))
        while len(self.pending) > _IN_FLIGHT * self.workers:
            self._take()

    def _share_slots(self) -> None:
        """Memory the forked workers will share: a slot per chunk in flight, the one being filled
        (:meth:`_fill_slots`) and the one after it."""
        if will_fork():
            self.slots = Slots(_IN_FLIGHT * self.workers + 2, CHUNK_BYTES)

    def _fill_slots(self, blocks, stream: ByteStream) -> None:
        """A gzip file with forked workers: each inflated block goes straight into the shared slot of
        the chunk it belongs to (:class:`SlotWriter`), not into the buffer and then again into a
        slot (the parent's main thread: 0.23-0.36 CPU-s of a 2 M-event parse, against 0.34-0.56).
        The file's end, and an event longer than a slot's spare room, go back to the buffer."""
        if len(self.buffer) - self.pos + 2 > self.slots.size:
            return
        self.base += self.pos  # from here on, the stream offset of the open slot's first event byte
        writer = SlotWriter(self.slots, self.buffer[self.pos:], _fast_cut_in, self._dispatch_slot, self._take)
        left = b""
        for block in blocks:
            if not writer.write(block):
                left = block
                break
            self._progress(stream)
        self.buffer, self.pos, self.searched = writer.rest(), 0, 0
        self.buffer += left
        self._cut_chunks()

    def _dispatch_slot(self, slot: int, size: int, consumed: int) -> None:
        self._dispatch(decode_shared, (slot, size), self.base, slot)
        self.base += consumed

    # -- a plain file with worker processes: they read their byte ranges themselves ------------

    def _cut_ranges(self, stream: ByteStream) -> None:
        """Cut the events of a plain file (:func:`range_cuts`); the workers read the ranges between
        cuts from the file. Leaves the last chunk's bytes in the buffer."""
        start = self.base + self.pos
        with open(self.path, "rb") as fh:
            for end, following in range_cuts(fh.fileno(), start, stream.size, CHUNK_BYTES, _fast_cut_in,
                                             self._event_too_big):
                self._dispatch(decode_range, (str(self.path), start, end), start)
                start = following
                if self.on_progress is not None:
                    self.on_progress(start, stream.size)
            stream.read_bytes = stream.size
            fh.seek(start)
            self.buffer, self.base, self.pos, self.searched = bytearray(fh.read()), start, 0, 0

    def _take(self) -> None:
        future, start, slot = self.pending.popleft()
        result = future.result()
        if slot >= 0:
            self.slots.free.append(slot)
        self._absorb(result, start)

    def _absorb(self, result, start: int) -> None:
        if isinstance(result, ChunkFailure):
            self._fail(result, start)
        self.rows += sum(len(part["ts_us"]) for part in result.parts)
        if self.rows * _ROW_BYTES > MAX_TABLE_BYTES.value():
            raise TraceError(self.path, MAX_TABLE_BYTES.refusal(
                f"the events table ({self.rows:,} events so far, ~{self.rows * _ROW_BYTES:,} bytes to assemble)"))
        self.columns.absorb(result)

    def _fail(self, failure: ChunkFailure, start: int) -> None:
        if failure.kind in ("syntax", "truncated", "depth") and not self.exact:
            raise _Recut()
        raise TraceError(self.path, failure.problem(start, self.columns.n_seen), REPORT_FIX)

    # -- the end of the file -------------------------------------------------------------

    def _gzip_end(self, stream: ByteStream) -> None:
        if stream.problem is None:
            return
        if not self.salvage:
            raise TraceError(self.path, f"gzip data is {stream.problem}", _GZIP_FIX)
        size = self.base + len(self.buffer)
        self.warnings.append(f"gzip stream {stream.problem}: salvaged from the first {size:,} decompressed bytes")

    def _finish(self) -> dict:
        while self.pending:  # a fast cut is only trusted once the chunk before it decoded
            self._take()
        if self.closed_at < 0:
            structure = self._scan(self.pos, len(self.buffer))
            if structure.close < 0:
                return self._truncated(structure)
            self._submit(self.pos, structure.close)
            self.closed_at = structure.close
        while self.pending:
            self._take()
        return self._metadata(bytes(self.buffer[self.closed_at + 1:]))

    def _metadata(self, trailer: bytes) -> dict:
        if self.header is None:
            if trailer.strip(_SPACE):
                raise TraceError(self.path, "not valid JSON: text after the array of events", REPORT_FIX)
            return {}
        meta = around_events(self.path, self.header, trailer)
        return self._cut_off() if meta is None else meta

    def _truncated(self, structure) -> dict:
        """No closing bracket: keep the complete events, if what follows them is a cut-off event."""
        last = int(structure.ends[-1]) if len(structure.ends) else self.pos
        self._submit(self.pos, last)
        while self.pending:
            self._take()
        rest = _SEPARATOR.match(self.buffer, last).end()
        if rest < len(self.buffer):  # a wrong byte can make the rest look like one long string
            failure = decode_chunk(b"[" + bytes(self.buffer[rest:]))
            if failure.kind != "truncated":
                self._fail(failure, self.base + rest)
        return self._cut_off()

    def _cut_off(self) -> dict:
        """The file ends mid-write: raise, or (salvage) warn and return the metadata read."""
        events, size = self.columns.n_seen, self.base + len(self.buffer)
        if not events:
            raise TraceError(self.path, CUT_OFF, REPORT_FIX)
        if not self.salvage:
            raise TruncatedTraceError(self.path, f"JSON is cut off after {size:,} bytes (profiler killed during export?)",
                                      events)
        self.warnings.append(f"trace was cut off mid-write: recovered {events:,} complete events; later events are lost")
        return {} if self.header is None else keys_before(self.path, self.header)


def _fast_cut_in(data, first: int, last: int):
    """(end of an event, start of the next) at the first fast cut in data[first:last], or None."""
    found = EVENT_CUT.search(data, first, last)
    return (found.start() + 1, found.start(1)) if found else None


def _first_byte(buffer: bytearray, start: int) -> int:
    """Index of the first byte from ``start`` that is not whitespace (nor a UTF-8 byte-order mark
    opening the file), -1 if none yet."""
    if start == 0 and buffer.startswith(_BOM):
        start = len(_BOM)
    found = _NON_SPACE.search(buffer, start)
    return found.start() if found else -1
