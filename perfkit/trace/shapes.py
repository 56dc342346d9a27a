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
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Union

import msgspec
import numpy as np
import pandas as pd

from ..atomic import atomic_write
from ..errors import TraceError
from . import cache
from .stream import read_text

SHAPES_FORMAT = 1
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
        parts.append(_match(mine, shapes))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="category") for c in SHAPE_COLUMNS})
    return pd.concat(parts).sort_index()


def _match(ops: pd.DataFrame, shapes: pd.DataFrame) -> pd.DataFrame:
    keys = pd.DataFrame({"pid": ops["pid"].astype(str).to_numpy(), "tid": ops["tid"].astype(str).to_numpy(),
                         "ts": ops["ts_us"].to_numpy(), "name": ops["name"].astype(str).to_numpy(),
                         "label": ops.index.to_numpy()})
    right = shapes.drop_duplicates(["pid", "tid", "ts", "name"])
    joined = keys.merge(right, on=["pid", "tid", "ts", "name"], how="inner")
    return joined.set_index("label")[list(SHAPE_COLUMNS)].rename_axis(None)


def file_shapes(path: Path, *, use_cache: bool = True) -> pd.DataFrame:
    """The op shapes of one trace file: columns pid, tid (str), ts (float, us), name and
    ``SHAPE_COLUMNS``; only ops that carry at least one of the three arguments."""
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
    start = text.lstrip()[:1]
    try:
        events = _ARRAY.decode(text) if start == b"[" else _OBJECT.decode(text).traceEvents
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"cannot read its op shapes ({exc})", "Load it with load_trace first to see why") from None
    del text
    rows = [(str(e.pid), str(e.tid), float(e.ts), str(e.name), _raw(e.args.dims), _raw(e.args.types),
             _raw(e.args.concrete))
            for e in events
            if e.args is not None and e.cat in _OP_CATEGORIES and e.ph == "X" and len(e.args.dims)
            and isinstance(e.ts, (int, float))]
    frame = pd.DataFrame(rows, columns=["pid", "tid", "ts", "name", *SHAPE_COLUMNS])
    for col in SHAPE_COLUMNS:
        frame[col] = frame[col].astype("category")
    frame["ts"] = frame["ts"].astype(np.float64)
    return frame


def _raw(value: msgspec.Raw) -> str:
    return bytes(value).decode("utf-8", "replace")


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
    frame = table.to_pandas()
    for col in ("pid", "tid", "name"):
        frame[col] = frame[col].astype(str)
    return frame


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
