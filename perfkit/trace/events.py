"""Typed decoding of Chrome-trace events with msgspec.

Only the fields perfkit uses are decoded; everything else in an event (``Input Dims``, ``Concrete
Inputs``, kernel launch geometry, ...) is skipped by the decoder without ever becoming a Python
object, which is where most of a generic JSON parser's time and memory goes.
"""
from __future__ import annotations

import math
from typing import Union

import msgspec

Value = Union[int, float, str, None]


ABSENT = math.nan  # the default of an id field an event lacks: np.array converts a list of ints and this
# float twice as fast as one holding None (an explicit JSON null stays None; both read as absent)


class Args(msgspec.Struct, gc=False):
    correlation: Value = ABSENT
    external_id: Value = msgspec.field(default=ABSENT, name="External id")
    external_id_old: Value = msgspec.field(default=ABSENT, name="external id")
    bytes: Value = ABSENT
    size: Value = ABSENT
    device: Value = ABSENT
    stream: Value = ABSENT
    python_id: Value = msgspec.field(default=ABSENT, name="Python id")
    python_parent: Value = msgspec.field(default=ABSENT, name="Python parent id")
    alloc_bytes: Value = msgspec.field(default=ABSENT, name="Bytes")
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
