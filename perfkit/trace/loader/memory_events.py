"""The arguments of ``[memory]`` events that the event table does not keep.

``load_trace`` keeps each ``[memory]`` instant event's ``Bytes`` (``alloc_bytes``) but not the
allocator's running totals or the device (``Total Allocated``, ``Total Reserved``, ``Device Type``,
``Device Id``), which only the memory timeline needs. ``read_memory_args`` reads them from the file
again (through :func:`perfkit.trace.loader.stream.read_text`: ISA-L inflate, bounded by
``PERFKIT_MAX_DECOMPRESSED_BYTES``), decoding nothing but those fields (msgspec skips the rest), and
``memory_args`` matches them to ``Trace.events`` by (file, pid, tid, ts, Bytes), never by position:
an event the loader dropped (an unusable ``ts``) shifts nothing. Events tied on all of these are
taken in file order. A ``[memory]`` row of the table with no event in its file (the file changed
since it was loaded) raises a TraceError naming the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Union

import msgspec
import numpy as np
import pandas as pd

from ...errors import TraceError
from ...limits import ID_RANGES, TIME_RANGE_US
from .stream import read_text
from .values import checked_floats, checked_ints

MEMORY_EVENT = "[memory]"
# torch's c10::DeviceType numbering, as Kineto writes it in "Device Type".
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 8: "xpu", 9: "mps"}
COLUMNS = ("device", "bytes", "allocated", "reserved", "addr")
_KEYS = ["pid", "tid", "ts", "bytes"]

_Num = Union[int, float, str, None]


class _Args(msgspec.Struct, gc=False):
    bytes: _Num = msgspec.field(default=None, name="Bytes")
    allocated: _Num = msgspec.field(default=None, name="Total Allocated")
    reserved: _Num = msgspec.field(default=None, name="Total Reserved")
    device_type: _Num = msgspec.field(default=None, name="Device Type")
    device_id: _Num = msgspec.field(default=None, name="Device Id")
    addr: _Num = msgspec.field(default=None, name="Addr")


class _Event(msgspec.Struct, gc=False):
    name: Union[str, int, float, None] = ""
    ph: Union[str, None] = None
    ts: _Num = None
    pid: Union[int, str, float, None] = ""
    tid: Union[int, str, float, None] = ""
    args: Union[_Args, None] = None


class _Doc(msgspec.Struct, gc=False):
    traceEvents: list[_Event] = []  # noqa: N815 (the JSON key)


_DECODER = msgspec.json.Decoder(_Doc)
_ARRAY = msgspec.json.Decoder(list[_Event])  # a trace written as a bare event array


def memory_args(trace) -> pd.DataFrame:
    """``COLUMNS`` of every ``[memory]`` row of ``trace.events``, indexed by its row label (see the
    module docstring for the matching). Raises TraceError naming the file when a file can no longer
    be read or lacks a ``[memory]`` event that the table holds."""
    ev = trace.events
    rows = ev[(ev["name"] == MEMORY_EVENT).to_numpy() & ev["ph"].isin(("i", "I")).to_numpy()]
    parts = [_match(file_rows, read_memory_args(trace.files[int(file_id)].path), trace.files[int(file_id)].path)
             for file_id, file_rows in rows.groupby("file_id", sort=True, observed=True)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c != "device" else object) for c in COLUMNS})
    return pd.concat(parts).loc[rows.index]


def _match(rows: pd.DataFrame, raw: pd.DataFrame, path) -> pd.DataFrame:
    keys = pd.DataFrame({"pid": rows["pid"].astype(str).to_numpy(), "tid": rows["tid"].astype(str).to_numpy(),
                         "ts": rows["ts_us"].to_numpy(dtype="float64"),
                         "bytes": rows["alloc_bytes"].to_numpy(dtype="int64"), "label": rows.index.to_numpy()})
    keys["tie"] = keys.groupby(_KEYS, sort=False).cumcount()
    raw = raw.assign(tie=raw.groupby(_KEYS, sort=False).cumcount())
    joined = keys.merge(raw, on=[*_KEYS, "tie"], how="left", validate="one_to_one")
    missing = joined["allocated"].isna()
    if missing.any():
        first = joined[missing].iloc[0]
        raise TraceError(path, f"{int(missing.sum())} of its {len(keys)} loaded [memory] events are not in the file "
                               f"(first at ts {first['ts']} us, pid {first['pid']}, tid {first['tid']}): it changed "
                               "since it was loaded", "Load it again (load_trace) before reading its memory timeline")
    return joined.set_index("label")[list(COLUMNS)].astype(
        {"bytes": "int64", "allocated": "int64", "reserved": "int64", "addr": "int64"}).rename_axis(None)


def read_memory_args(path) -> pd.DataFrame:
    """One row per ``[memory]`` instant event of the file with a numeric ``ts``, in file order:
    ``pid``, ``tid`` (as strings), ``ts`` (us, as written), ``device`` ("cpu", "cuda:0", "hip:0",
    ...), ``bytes`` (negative: freed), ``allocated`` and ``reserved`` (the allocator's totals after
    the event; -1 when absent or not a number), ``addr`` (the block's address, which pairs an allocation
    with its free; -1 when absent). Raises TraceError when the file is not a readable
    Chrome trace."""
    path = Path(path)
    try:
        text = read_text(path)
        events = _ARRAY.decode(text) if text.lstrip()[:1] == b"[" else _DECODER.decode(text).traceEvents
    except OSError as exc:
        raise TraceError(path, f"cannot read its [memory] events ({exc.strerror or exc})",
                         "Check that it still exists and that you may read it") from None
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"cannot read its [memory] events ({exc})",
                         "Load it with load_trace to see why") from None
    del text
    events = [e for e in events if e.name == MEMORY_EVENT and e.ph in ("i", "I")]
    args = [e.args or _Args() for e in events]
    # ts and Bytes as the loader converts them (perfkit.trace.loader.values): the events it dropped go too
    ts, bad_ts = checked_floats([e.ts for e in events], TIME_RANGE_US)
    sizes, bad_size = checked_ints([a.bytes for a in args], ID_RANGES["alloc_bytes"], 0)
    keep = np.flatnonzero(~bad_ts & ~bad_size)
    return pd.DataFrame({
        "pid": [str(events[i].pid) for i in keep], "tid": [str(events[i].tid) for i in keep], "ts": ts[keep],
        "device": [_device(args[i].device_type, args[i].device_id) for i in keep], "bytes": sizes[keep],
        "allocated": [_int(args[i].allocated, -1) for i in keep],
        "reserved": [_int(args[i].reserved, -1) for i in keep],
        "addr": [_int(args[i].addr, -1) for i in keep],
    }, columns=["pid", "tid", "ts", *COLUMNS]).astype(
        {"ts": "float64", "bytes": "int64", "allocated": "int64", "reserved": "int64", "addr": "int64"})


def _int(value, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError, OverflowError):
        return default


def _device(kind, index) -> str:
    name = DEVICE_TYPES.get(_int(kind, -1), f"device_type_{kind}")
    i = _int(index, -1)
    return name if name == "cpu" or i < 0 else f"{name}:{i}"
