"""Input shapes of host ops (``record_shapes=True``): ``Input Dims``, ``Input type`` and ``Concrete Inputs``.

The events table leaves these arguments out (most analyses never read them and they are most of a
trace's bytes), so :func:`op_shapes` reads them on demand: one pass over each source file that
decodes only the op events and keeps the three arguments as their raw JSON text (a shape repeated
ten thousand times is one string in a categorical column). Each file's table is cached beside the
trace cache (``<key>.shapes.arrow``, bound to the file's fingerprint and this module's format
version), so a second call reads it in a fraction of a second.

Rows are matched to ``Trace.events`` by (file, pid, tid, ts, name), the fields the loader keeps
verbatim; an op whose match is ambiguous (two ops of one name starting in the same microsecond on
one thread) takes the first.

The pass is cut like a load (:mod:`perfkit.trace.loader.parse`): the file's text is read once, cut into
chunks of whole events at ``}, {"``, and the chunks are decoded by worker processes forked after the
read (they see the text without a copy) and sent back as codes of their few distinct strings. A
chunk that does not decode (a cut between objects nested in args) sends the whole file through one
decoder, as do
processes that cannot fork safely (a Jupyter kernel's threads) and files of a few chunks.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Union

import msgspec
import numpy as np
import pandas as pd

from ...atomic import atomic_write
from ...errors import TraceError
from . import cache
from .columns import Encoder, local_codes
from .decode import gc_paused
from .metadata import top_level_events_key
from .parse import CHUNK_BYTES, EVENT_CUT
from .scan import scan
from .stream import read_text
from .workers import default_workers, process_pool, will_fork

SHAPES_FORMAT = 2  # 2: pid, tid and name as categories
SHAPE_COLUMNS = ("input_dims", "input_types", "concrete_inputs")
_OP_CATEGORIES = ("cpu_op", "operator", "Operator")
_KEY = b"perfkit.shapes"
_Value = Union[int, float, str, None]


class _Args(msgspec.Struct, gc=False):
    # msgspec.Raw cannot be part of a Union: an absent argument is an empty Raw
    dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Concrete Inputs")


class _Event(msgspec.Struct, gc=False):
    cat: Union[str, None] = None
    ph: Union[str, None] = None
    name: Union[str, int, float, None] = ""
    ts: _Value = None
    pid: Union[int, str, float, None] = ""
    tid: Union[int, str, float, None] = ""
    args: Union[_Args, None] = None


class _File(msgspec.Struct, gc=False):
    traceEvents: list[_Event] = []


_OBJECT = msgspec.json.Decoder(_File)
_ARRAY = msgspec.json.Decoder(list[_Event])


def op_shapes(trace, *, use_cache: bool = True) -> pd.DataFrame:
    """One row per host op of ``trace`` recorded with input shapes, indexed by its label in
    ``trace.events``. Columns ``input_dims``, ``input_types``, ``concrete_inputs``: the raw JSON text
    of those arguments ("" where absent). Empty when no op carries ``Input Dims`` (a trace recorded
    without ``record_shapes=True``). Raises TraceError when a source file can no longer be read."""
    ev = trace.events
    ops = ev[(ev["cat"] == "cpu_op").to_numpy() & (ev["ph"] == "X").to_numpy()]
    parts = []
    for file_id, tf in enumerate(trace.files):
        shapes = file_shapes(Path(tf.path), use_cache=use_cache)
        if shapes.empty:
            continue
        mine = ops[ops["file_id"].to_numpy() == file_id]
        parts.append(match_rows(mine, shapes, SHAPE_COLUMNS))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="category") for c in SHAPE_COLUMNS})
    return pd.concat(parts).sort_index()


def match_rows(ops: pd.DataFrame, shapes: pd.DataFrame, columns) -> pd.DataFrame:
    """``columns`` of the ``shapes`` rows (read from the file beside the events table: pid, tid, ts, name
    and ``columns``) joined to the events ``ops`` on (pid, tid, ts, name), indexed by the event's label. The
    strings are compared as codes, each row's value looked up among the events' distinct values (absent: it
    matches nothing); of two rows with one key the first is kept."""
    keys = pd.DataFrame({"ts": ops["ts_us"].to_numpy(), "label": ops.index.to_numpy()})
    right = pd.DataFrame({"ts": shapes["ts"].to_numpy(), **{c: shapes[c] for c in columns}})
    for col in ("pid", "tid", "name"):
        mine = ops[col] if isinstance(ops[col].dtype, pd.CategoricalDtype) else ops[col].astype(str).astype("category")
        theirs = shapes[col].cat
        keys[col] = mine.cat.codes.to_numpy()
        lookup = np.append(mine.cat.categories.astype(str).get_indexer(theirs.categories.astype(str)), -1)
        right[col] = lookup[theirs.codes.to_numpy()]  # a missing value's code -1 reads the appended -1
    right = right[(right[["pid", "tid", "name"]].to_numpy() >= 0).all(axis=1)]
    right = right.drop_duplicates(["pid", "tid", "ts", "name"])
    joined = keys.merge(right, on=["pid", "tid", "ts", "name"], how="inner")
    return joined.set_index("label")[list(columns)].rename_axis(None)


def file_shapes(path: Path, *, use_cache: bool = True) -> pd.DataFrame:
    """The op shapes of one trace file: columns pid, tid, ts (float, us), name and
    ``SHAPE_COLUMNS`` (every column but ts a category of strings); only ops that carry at least one
    of the three arguments."""
    fingerprint = _stamp(path)
    target = cache.cache_dir() / f"{cache._key(path)}.shapes.arrow"
    if use_cache:
        cached = _read_cached(target, fingerprint)
        if cached is not None:
            return cached
    table = _parse(path)
    if use_cache and _stamp(path) == fingerprint:
        _write_cached(target, table, fingerprint)
    return table


def _stamp(path: Path) -> dict:
    try:
        return cache.stamp(path)
    except OSError as exc:
        raise TraceError(path, f"cannot read the file for its op shapes ({exc.strerror or exc})",
                         "Check that it still exists and that you may read it") from None


def _parse(path: Path) -> pd.DataFrame:
    text = read_text(path)
    bare = text.lstrip()[:1] == b"["  # a bare array of events
    spans = _spans(text, bare)
    parts = _parallel(text, spans) if len(spans) > 1 and default_workers() > 1 and will_fork() else None
    if parts is None:
        try:
            with gc_paused():
                events = _ARRAY.decode(text) if bare else _OBJECT.decode(text).traceEvents
                parts = [_columns(events)]
        except msgspec.DecodeError as exc:
            raise TraceError(path, f"cannot read its op shapes ({exc})",
                             "Load it with load_trace first to see why") from None
    return _frame(parts)


_TEXT = b""  # the file's text while worker processes forked from this one decode its chunks


def _spans(text: bytes, bare: bool) -> list[tuple[int, int]]:
    """[start, end) of chunks of about CHUNK_BYTES of whole events, each from a ``{`` to just past a
    ``}`` (``bare``: the text is an array of events, not an object); empty when the events array is
    not found or does not close (the caller decodes the whole file, and reports what is wrong with it)."""
    first = re.search(rb"\S", text)
    found = first if bare or first is None else top_level_events_key(text, first.start())
    if found is None:
        return []
    start, spans = found.end(), []
    while True:
        cut = EVENT_CUT.search(text, start + CHUNK_BYTES)
        if cut is None:
            break
        spans.append((start, cut.start() + 1))
        start = cut.start(1)
    close = scan(text, start).close
    return spans + [(start, close)] if close >= 0 else []


def _parallel(text: bytes, spans: list) -> list | None:
    """Each span's :func:`_columns`, decoded by forked workers; None when a span does not decode."""
    global _TEXT
    _TEXT = text
    pool = process_pool(min(default_workers(), len(spans)))
    try:
        parts = list(pool.map(_decode_span, *zip(*spans)))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _TEXT = b""
    return None if any(p is None for p in parts) else parts


def _decode_span(start: int, end: int) -> dict | None:
    try:
        with gc_paused():
            return _columns(_ARRAY.decode(b"".join((b"[", memoryview(_TEXT)[start:end], b"]"))))
    except msgspec.DecodeError:
        return None


def _columns(events: list) -> dict:
    """The ops with shapes among ``events``: ``ts`` (float64) and, per other column, the int32 code of
    each value and the distinct values (a shape repeated ten thousand times travels once)."""
    ops = [e for e in events if e.args is not None and e.cat in _OP_CATEGORIES and e.ph == "X" and len(e.args.dims)
           and isinstance(e.ts, (int, float))]
    columns = {"ts": np.array([float(e.ts) for e in ops], dtype=np.float64)}
    for col, value in (("pid", lambda e: str(e.pid)), ("tid", lambda e: str(e.tid)), ("name", lambda e: str(e.name))):
        columns[col] = local_codes(list(map(value, ops)))
    for col, field in zip(SHAPE_COLUMNS, ("dims", "types", "concrete")):
        codes, uniques = local_codes([bytes(getattr(e.args, field)) for e in ops])
        columns[col] = codes, [u.decode("utf-8", "replace") for u in uniques]
    return columns


def _frame(parts: list[dict]) -> pd.DataFrame:
    """One table of every part's columns: ts and, as categories (sorted), pid, tid, name and
    ``SHAPE_COLUMNS``."""
    data = {"ts": np.concatenate([p["ts"] for p in parts])}
    for col in ("pid", "tid", "name", *SHAPE_COLUMNS):
        encoder = Encoder()
        data[col] = encoder.categorical(np.concatenate([encoder.encode_local(*p[col]) for p in parts]))
    return pd.DataFrame(data, columns=["pid", "tid", "ts", "name", *SHAPE_COLUMNS])


def _read_cached(target: Path, fingerprint: dict):
    import pyarrow as pa  # heavy: only when a cache is read
    import pyarrow.feather as feather

    try:
        table = feather.read_table(target, memory_map=True)
    except (OSError, pa.ArrowException):
        return None
    meta = (table.schema.metadata or {}).get(_KEY)
    if meta is None or msgspec.json.decode(meta) != {"format": SHAPES_FORMAT, "fingerprint": fingerprint}:
        return None
    return table.to_pandas()


def _write_cached(target: Path, frame: pd.DataFrame, fingerprint: dict) -> None:
    """Best effort: an unwritable cache directory only costs the next call a re-read."""
    import pyarrow as pa  # heavy: only when a cache is written
    import pyarrow.feather as feather

    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = msgspec.json.encode({"format": SHAPES_FORMAT, "fingerprint": fingerprint})
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), _KEY: meta})
    try:
        os.makedirs(target.parent, exist_ok=True)
        atomic_write(target, lambda tmp: feather.write_feather(table, tmp, compression="uncompressed"))
    except OSError:
        pass
