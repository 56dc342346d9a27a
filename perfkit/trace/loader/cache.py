"""Columnar cache of loaded traces (uncompressed Arrow IPC files, memory-mapped when read).

The first load of a file writes ``<key>.events.arrow``, ``<key>.nesting.arrow`` (the nesting
columns of the events, kept apart so that the events are written, in a thread, while the loader
computes them), ``<key>.flows.arrow`` and ``<key>.json`` (format version, perfkit version, the file's
fingerprint, its metadata, and what binds the files together) into the cache directory: ``$PERFKIT_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/perfkit`` (``~/.cache/perfkit``). A later load of the unchanged file reads the cache.

What makes a hit, and why each part is there:

- The fingerprint (size, modification time, inode, the inode's change time, and a hash of the
  first and last 64 KiB) is
  taken *before* the trace is read and compared again after: a trace replaced while it was being
  loaded is not cached, and a changed file misses the cache. The change time (ctime) is there
  because no user can set it: an edit in the middle of a file that keeps its size, with its
  mtime put back (``touch -r``, ``os.utime``), still changes the ctime.
- Each Arrow file carries a random binding id in its schema metadata that must equal the one in
  ``<key>.json``, with the row count, byte size, CRC-32 and column names recorded there: another
  trace's ``.events.arrow`` copied over an entry, or bytes flipped in one (a disk error, an
  edit), is refused and rebuilt, not served. The CRC (ISA-L's, the same CRC-32 as zlib's at ~2x
  its speed) costs ~0.5 ms per MB of cache read.
- ``<key>.json`` must have the shape this module writes (a hand-edited or foreign file of the wrong
  shape is a miss, rebuilt, never a traceback); another perfkit, schema or cache format version
  is a miss too. Writes are atomic.
"""
from __future__ import annotations

import hashlib
import mmap
import os
import re
import secrets
import stat
import threading
from pathlib import Path
from typing import Any, Union

import msgspec
import pandas as pd

try:  # ISA-L's crc32: the same checksum as zlib's, ~2x faster
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - a platform without isal wheels
    from zlib import crc32

from ... import __version__
from ...atomic import atomic_write, write_text_atomic
from ...text import path_text
from ..schema import EVENT_COLUMNS, FLOW_COLUMNS, NESTING_COLUMNS, SCHEMA_VERSION
from ..steps import STEP_COLUMNS

CACHE_FORMAT = 9  # 7: an event longer than a week (limits.DUR_RANGE_US) is dropped; 8: ProfilerStep# markers are
# boundaries; 9: what perfkit profile wrote (``perfkit_profile``: schedule, machine load) is kept
_EDGE = 64 << 10
_BINDING_KEY = b"perfkit.binding"
_TABLES = {"events": EVENT_COLUMNS, "nesting": NESTING_COLUMNS, "flows": FLOW_COLUMNS}


class _Table(msgspec.Struct):
    rows: int
    bytes: int
    crc32: int


class _Entry(msgspec.Struct):
    cache_format: int
    schema: int
    perfkit: str
    source: str
    fingerprint: dict[str, Union[int, str]]
    binding: str
    tables: dict[str, _Table]
    meta: dict[str, Any]


class _Meta(msgspec.Struct):
    """The per-file metadata keys the loader reads back, with their types (others pass unchecked)."""

    rank: Union[int, None]
    base_time_ns: Union[int, None]
    trace_name: str
    devices: list[dict]
    distributed: dict
    flags: dict
    recorder: dict
    events_read: int
    steps: dict[str, list]
    step_warning: Union[str, None]
    warnings: list[str]


def cache_dir() -> Path:
    env = os.environ.get("PERFKIT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfkit"


def stamp(path: Path) -> dict:
    """The file's fingerprint: size, mtime_ns, inode, ctime_ns and a hash of its first and last 64 KiB.
    Raises OSError when the file cannot be read."""
    info = path.stat()
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        digest.update(fh.read(_EDGE))
        if info.st_size > _EDGE:
            fh.seek(max(info.st_size - _EDGE, _EDGE))
            digest.update(fh.read(_EDGE))
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns, "inode": info.st_ino, "ctime_ns": info.st_ctime_ns,
            "edges": digest.hexdigest()}


def is_entry(path: Path) -> bool:
    """Whether ``path`` is one of this cache's own files (``<key>.json`` and its tables), which a folder of traces
    that is also the cache folder (``PERFKIT_CACHE_DIR`` set to it) holds beside the traces: never a trace."""
    return bool(_ENTRY.fullmatch(path.name)) and path.parent.resolve() == cache_dir().resolve()


_ENTRY = re.compile(r"[0-9a-f]{24}(\.[a-z]+)?\.(json|arrow)")


def _key(path: Path) -> str:
    return hashlib.blake2b(os.fsencode(path.resolve()), digest_size=12).hexdigest()


def _envelope(path: Path, fingerprint: dict) -> dict:
    return {"cache_format": CACHE_FORMAT, "schema": SCHEMA_VERSION, "perfkit": __version__,
            "source": path_text(path.resolve()), "fingerprint": fingerprint}


def read(path: Path, fingerprint: dict):
    """(events, flows, meta dict) from the cache, or None when absent, stale, from another
    version, of the wrong shape, or not bound to this entry. ``fingerprint``: ``stamp(path)``,
    taken before this call."""
    base = cache_dir() / _key(path)
    try:
        entry = msgspec.json.decode(_regular_bytes(base.with_suffix(".json")), type=_Entry)
        if any(getattr(entry, k) != v for k, v in _envelope(path, fingerprint).items()) or not _meta_ok(entry.meta):
            return None
        tables = {name: _read_table(base, name, entry) for name in _TABLES}
        events = _with_columns(tables["events"], tables["nesting"])
    except (OSError, ValueError, msgspec.MsgspecError, _Unbound):
        return None
    return events.to_pandas(split_blocks=True), tables["flows"].to_pandas(split_blocks=True), entry.meta


def _with_columns(table, more):
    """``table`` with the columns of ``more`` (as many rows) appended, without copying."""
    if more.num_rows != table.num_rows:
        raise _Unbound("tables of different lengths")
    for field, column in zip(more.schema, more.columns):
        table = table.append_column(field, column)
    return table


def _regular_bytes(path: Path) -> bytes:
    """The bytes of ``path``; OSError unless it is a regular file (a pipe put in its place would
    block the read forever, ``/dev/zero`` would never end). Opened non-blocking so that a pipe
    without a writer is seen, not waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        return fh.read()


def _meta_ok(meta: dict) -> bool:
    msgspec.convert(meta, type=_Meta)  # raises ValidationError for a key of the wrong type
    steps = meta["steps"]
    return set(STEP_COLUMNS[1:]) <= set(steps) and len({len(v) for v in steps.values()}) == 1


class _Unbound(Exception):
    """An Arrow file that does not belong to the cache entry that names it."""


def _read_table(base: Path, name: str, entry: _Entry):
    import pyarrow as pa
    import pyarrow.feather as feather

    file = f"{base}.{name}.arrow"
    expected = entry.tables.get(name)
    if expected is None or os.stat(file).st_size != expected.bytes or _crc32(file) != expected.crc32:
        raise _Unbound(file)
    try:
        table = feather.read_table(file, memory_map=True)
    except pa.ArrowException as exc:
        raise _Unbound(file) from exc
    binding = (table.schema.metadata or {}).get(_BINDING_KEY, b"").decode("ascii", "replace")
    if binding != entry.binding or table.num_rows != expected.rows or tuple(table.column_names) != _TABLES[name]:
        raise _Unbound(file)
    return table


class Writer:
    """Writes the cache entry of ``path`` as read under ``fingerprint`` (``stamp`` taken before the
    read) in two steps: :meth:`start` writes the events (without their nesting columns) and the flows
    in a thread, which releases the GIL while Arrow writes and ISA-L checksums, so that the loader
    computes nesting meanwhile; :meth:`finish` writes the nesting columns, waits for the thread and
    writes the entry that makes the files a hit. The DataFrames' columns must not change in
    between (columns may be added)."""

    def __init__(self, path: Path, fingerprint: dict):
        self.path, self.fingerprint = path, fingerprint
        self.base = cache_dir() / _key(path)
        self.binding = secrets.token_hex(16)
        self.tables: dict = {}
        self.error: Exception | None = None
        self.thread: threading.Thread | None = None

    def start(self, events: pd.DataFrame, flows: pd.DataFrame) -> None:
        try:
            self.base.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.error = exc
            return
        tables = {"events": _arrow(events[list(EVENT_COLUMNS)], self.binding), "flows": _arrow(flows, self.binding)}
        self.thread = threading.Thread(target=self._write, args=(tables,), name="perfkit-cache-write")
        self.thread.start()

    def _write(self, tables: dict) -> None:
        try:
            for name, table in tables.items():
                self.tables[name] = _write_table(f"{self.base}.{name}.arrow", table)
        except Exception as exc:  # noqa: BLE001 - raised again by finish(), in the loading thread
            self.error = exc

    def finish(self, events: pd.DataFrame, meta: dict) -> list[str]:
        """Writes the rest. Returns no warning, or one when the file changed while it was read (no
        entry is written) or when the cache directory is not writable."""
        if self.error is None:
            try:
                self.tables["nesting"] = _write_table(f"{self.base}.nesting.arrow",
                                                      _arrow(events[list(NESTING_COLUMNS)], self.binding))
            except OSError as exc:
                self.error = exc
        if self.thread is not None:
            self.thread.join()
        try:
            if stamp(self.path) != self.fingerprint:
                return ["the file changed while it was being read: these figures may mix its old and new "
                        "content and were not cached; load it again"]
        except OSError as exc:
            return [f"the file became unreadable while it was being read ({exc}); it was not cached"]
        try:
            if self.error is not None:
                raise self.error
            entry = dict(_envelope(self.path, self.fingerprint), binding=self.binding, tables=self.tables, meta=meta)
            write_text_atomic(self.base.with_suffix(".json"), msgspec.json.encode(entry).decode())
        except OSError as exc:
            return [f"trace cache not written to {self.base.parent} ({exc}); set PERFKIT_CACHE_DIR to a "
                    "writable directory"]
        return []


def _arrow(frame: pd.DataFrame, binding: str):
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    return table.replace_schema_metadata({**(table.schema.metadata or {}), _BINDING_KEY: binding.encode()})


def _write_table(file: str, table) -> dict:
    import pyarrow.feather as feather

    # one record batch: a cached read then maps each column as it is, where Arrow's default 64k-row
    # batches made every read concatenate them (and merge the dictionaries): 0.07 s -> 0.01 s on 1.5M rows
    atomic_write(file, lambda tmp: feather.write_feather(table, tmp, compression="uncompressed",
                                                         chunksize=max(table.num_rows, 1)))
    return {"rows": table.num_rows, "bytes": os.stat(file).st_size, "crc32": _crc32(file)}


def _crc32(file: str) -> int:
    """CRC-32 of the file's bytes (memory-mapped: the pages are the ones the read maps next)."""
    with open(file, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return 0
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return crc32(view)
