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
Time = Union[float, str, None]  # ts and dur: float64 columns, so msgspec makes floats (numpy converts a list of
# floats 2x as fast as one of ints); an integer past float64's range is refused like 1e400 ("Number out of range")


ABSENT = math.nan  # the default of an id field an event lacks: np.array converts a list of ints and this
# float twice as fast as one holding None (an explicit JSON null stays None; both read as absent)


# Fields in the order Kineto writes them: msgspec compares a key with the fields in turn, starting
# after the field it matched last, so in this order each key is found at the first comparison (6.6%
# fewer instructions decoding V100 and B200 events than in the order of perfkit's columns).
class Args(msgspec.Struct, gc=False, frozen=True):  # frozen: shared as the default of Event.args
    external_id: Value = msgspec.field(default=ABSENT, name="External id")
    device: Value = ABSENT
    stream: Value = ABSENT
    correlation: Value = ABSENT
    external_id_old: Value = msgspec.field(default=ABSENT, name="external id")
    bytes: Value = ABSENT
    size: Value = ABSENT
    python_parent: Value = msgspec.field(default=ABSENT, name="Python parent id")
    python_id: Value = msgspec.field(default=ABSENT, name="Python id")
    alloc_bytes: Value = msgspec.field(default=ABSENT, name="Bytes")
    rank: Value = None  # set by tools that merge ranks into one file; more than one value is refused


NO_ARGS = Args()  # an event without "args" (an explicit "args": null stays None)


class Event(msgspec.Struct, gc=False):  # in Kineto's order too (see Args)
    ph: Union[str, None] = None
    cat: Union[str, None] = None
    name: Union[str, int, float, None] = ""
    pid: Union[int, str, float, None] = ""
    tid: Union[int, str, float, None] = ""
    ts: Time = None
    dur: Time = None
    args: Union[Args, None] = NO_ARGS
    id: Value = None


EVENTS = msgspec.json.Decoder(list[Event])
