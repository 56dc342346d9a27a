"""The arguments of ``[memory]`` events that the event table does not keep.

``load_trace`` keeps each ``[memory]`` instant event's ``Bytes`` (``alloc_bytes``) but not the
allocator's running totals or the device (``Total Allocated``, ``Total Reserved``, ``Device Type``,
``Device Id``), which only the memory timeline needs. ``read_memory_args`` reads them from the file
again, decoding nothing but those fields (msgspec skips the rest), in file order: the same order as
the file's ``[memory]`` rows in ``Trace.events``.
"""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Union

import msgspec
import pandas as pd

from ..errors import TraceError

MEMORY_EVENT = "[memory]"
# torch's c10::DeviceType numbering, as Kineto writes it in "Device Type".
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 8: "xpu", 9: "mps"}
COLUMNS = ("device", "bytes", "allocated", "reserved")

_Num = Union[int, float, str, None]


class _Args(msgspec.Struct, gc=False):
    bytes: _Num = msgspec.field(default=None, name="Bytes")
    allocated: _Num = msgspec.field(default=None, name="Total Allocated")
    reserved: _Num = msgspec.field(default=None, name="Total Reserved")
    device_type: _Num = msgspec.field(default=None, name="Device Type")
    device_id: _Num = msgspec.field(default=None, name="Device Id")


class _Event(msgspec.Struct, gc=False):
    name: Union[str, int, float, None] = ""
    ph: Union[str, None] = None
    args: Union[_Args, None] = None


class _Doc(msgspec.Struct, gc=False):
    traceEvents: list[_Event] = []  # noqa: N815 (the JSON key)


_DECODER = msgspec.json.Decoder(_Doc)


def read_memory_args(path) -> pd.DataFrame:
    """One row per ``[memory]`` instant event of the file, in file order: ``device`` ("cpu",
    "cuda:0", "hip:0", ...), ``bytes`` (negative: freed), ``allocated`` and ``reserved`` (the
    allocator's totals after the event; -1 when absent). Raises TraceError when the file is not a
    readable Chrome trace."""
    path = Path(path)
    try:
        with (gzip.open if path.name.endswith(".gz") else open)(path, "rb") as f:
            doc = _DECODER.decode(f.read())
    except (OSError, EOFError, msgspec.DecodeError) as exc:
        raise TraceError(path, f"cannot read its [memory] events ({exc})", "check the file is a whole trace") from exc
    rows = [e.args or _Args() for e in doc.traceEvents if e.name == MEMORY_EVENT and e.ph in ("i", "I")]
    return pd.DataFrame({
        "device": [_device(a.device_type, a.device_id) for a in rows],
        "bytes": [_int(a.bytes, 0) for a in rows],
        "allocated": [_int(a.allocated, -1) for a in rows],
        "reserved": [_int(a.reserved, -1) for a in rows],
    }, columns=list(COLUMNS)).astype({"bytes": "int64", "allocated": "int64", "reserved": "int64"})


def _int(value, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError, OverflowError):
        return default


def _device(kind, index) -> str:
    name = DEVICE_TYPES.get(_int(kind, -1), f"device_type_{kind}")
    i = _int(index, -1)
    return name if name == "cpu" or i < 0 else f"{name}:{i}"
