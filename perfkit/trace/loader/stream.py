"""The decompressed bytes of a trace file, block by block, never the whole file at once.

Plain files are read with ordinary reads, not memory-mapped: a file truncated while it is mapped
kills the reader with SIGBUS, whereas a short read is just an early end of file, which the parser
reports as a truncated trace. Gzip files are inflated in a background thread, which releases the GIL
while it inflates (ISA-L's inflate, from ``isal``: 3x zlib's), so on two or more cores inflation
overlaps with parsing instead of preceding it. The inflated size is bounded by
:data:`perfkit.limits.MAX_DECOMPRESSED_BYTES`, so a gzip bomb stops with a
:class:`~perfkit.errors.TraceError` naming the limit, after reading no more than that.
"""
from __future__ import annotations

import queue
import threading
from pathlib import Path

try:  # ISA-L's inflate is 3x zlib's (2.6 vs 0.85 GB/s here), same API
    from isal import isal_zlib as zlib
except ImportError:  # pragma: no cover - a platform without isal wheels
    import zlib

from ...errors import TraceError
from ...limits import MAX_DECOMPRESSED_BYTES

BLOCK_BYTES = 4 << 20  # one decompressed block handed to the parser
_READ_BYTES = 1 << 20  # compressed bytes read per zlib call
_QUEUED_BLOCKS = 4  # inflated blocks waiting for the parser: bounds the reader's memory
_GZIP_MAGIC = b"\x1f\x8b"
_END = object()


def read_text(path: Path) -> bytes:
    """The whole decompressed text of a trace file, for tools that rewrite it (``perfkit annotate``).
    Raises TraceError for a truncated or corrupt gzip stream and past MAX_DECOMPRESSED_BYTES."""
    with ByteStream(path) as stream:
        if not stream.gzip:  # one read into one buffer: joining 4 MB blocks copied every byte again
            with open(path, "rb") as fh:
                return fh.read()
        text = b"".join(stream)
    if stream.problem is not None:
        raise TraceError(path, f"gzip data is {stream.problem}", "Copy the file again")
    return text


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


class ByteStream:
    """Iterate over a file's decompressed bytes in blocks of at most :data:`BLOCK_BYTES`.

    ``read_bytes`` is how far into the file on disk reading has got (compressed bytes for gzip:
    what a progress bar over the file's size needs). After the iteration ends, ``problem`` is None
    for a complete stream, or says how a gzip stream ended early ("truncated", "corrupt (...)").
    Use as a context manager so that an abandoned gzip reader thread is stopped.
    Raises :class:`TraceError` when the inflated size passes MAX_DECOMPRESSED_BYTES or the file
    cannot be read.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.size = self.path.stat().st_size
        self.gzip = is_gzip(self.path)
        self.read_bytes = 0
        self.problem: str | None = None
        self._stop = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=_QUEUED_BLOCKS)
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "ByteStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        return self._inflated() if self.gzip else self._plain()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            while self._thread.is_alive():
                self._drain()
                self._thread.join(timeout=0.05)

    def _drain(self) -> None:
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass

    def _plain(self):
        with open(self.path, "rb") as fh:
            while True:
                block = fh.read(BLOCK_BYTES)
                if not block:
                    return
                self.read_bytes += len(block)
                yield block

    def _inflated(self):
        self._limit = MAX_DECOMPRESSED_BYTES.value()  # a malformed variable is refused here, not in the thread
        self._thread = threading.Thread(target=self._inflate, name=f"perfkit-gunzip-{self.path.name}", daemon=True)
        self._thread.start()
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _inflate(self) -> None:
        try:
            self._inflate_members()
        except TraceError as exc:
            self._put(exc)
        except zlib.error as exc:
            self.problem = f"corrupt ({exc})"
        except OSError as exc:
            self._put(TraceError(self.path, f"cannot read the file ({exc.strerror or exc})"))
        except Exception as exc:  # noqa: BLE001  (anything else: raised in the reader's thread, never lost here)
            self._put(exc)
        finally:
            self._put(_END)

    def _inflate_members(self) -> None:
        """Inflate every gzip member of the file (concatenated gzip files are one stream). A member may end
        exactly where a read ends: the next member then starts in the next read (stopping there kept 5,988
        of 8,160 events of a two-member file, in silence)."""
        limit = self._limit
        inflater, total, pending = zlib.decompressobj(31), 0, b""
        with open(self.path, "rb") as fh:
            while not self._stop.is_set():
                raw = pending or fh.read(_READ_BYTES)
                pending = b""
                self.read_bytes = fh.tell()
                if not raw:
                    break
                total = self._emit(inflater, raw, total, limit)
                if inflater.eof:
                    pending = inflater.unused_data
                    while len(pending) < len(_GZIP_MAGIC) and (more := fh.read(_READ_BYTES)):
                        pending += more
                    if not pending.startswith(_GZIP_MAGIC):
                        return  # the end of the file, or trailing padding after the last member (gzip allows it)
                    inflater = zlib.decompressobj(31)
        if not inflater.eof and not self._stop.is_set():
            self.problem = "truncated"

    def _emit(self, inflater, raw: bytes, total: int, limit: int) -> int:
        data = raw
        while not self._stop.is_set():
            out = inflater.decompress(data, BLOCK_BYTES)
            data = inflater.unconsumed_tail
            total += len(out)
            if total > limit:
                raise TraceError(self.path, MAX_DECOMPRESSED_BYTES.refusal("the inflated gzip data"))
            if out and not self._put(out):
                break
            if not data and len(out) < BLOCK_BYTES:
                break
        return total
