"""Typed decoding of Chrome-trace events with msgspec.

Only the fields perfkit uses are decoded; everything else in an event (``Input Dims``, ``Concrete
Inputs``, kernel launch geometry, ...) is skipped by the decoder without ever becoming a Python
object, which is where most of a generic JSON parser's time and memory goes.
"""
from __future__ import annotations

from typing import Union

import msgspec

Value = Union[int, float, str, None]


class Args(msgspec.Struct, gc=False):
    correlation: Value = None
    external_id: Value = msgspec.field(default=None, name="External id")
    external_id_old: Value = msgspec.field(default=None, name="external id")
    bytes: Value = None
    size: Value = None
    device: Value = None
    stream: Value = None
    python_id: Value = msgspec.field(default=None, name="Python id")
    python_parent: Value = msgspec.field(default=None, name="Python parent id")
    alloc_bytes: Value = msgspec.field(default=None, name="Bytes")
    rank: Value = None  # set by tools that merge ranks into one file; more than one value is refused


NO_ARGS = Args()


class Event(msgspec.Struct, gc=False):
    ph: Union[str, None] = None
    name: Union[str, int, float, None] = ""
    cat: Union[str, None] = None
    ts: Value = None
    dur: Value = None
    pid: Union[int, str, float, None] = ""
    tid: Union[int, str, float, None] = ""
    id: Value = None
    args: Union[Args, None] = None


EVENTS = msgspec.json.Decoder(list[Event])
TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
