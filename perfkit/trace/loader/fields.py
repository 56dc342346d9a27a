"""The fields of a batch of events, as :class:`~perfkit.trace.loader.columns.ColumnBuilder` reads them.

A batch comes from one of two decoders, and the column builder reads both the same way, so that the
two give identical tables:

- :class:`EventFields`: the msgspec structs of :mod:`perfkit.trace.loader.events` (the pure-Python path),
  each field gathered across the events into a list;
- :class:`NativeFields`: the columns the C extension (:mod:`perfkit.trace.loader.native`) parsed, each
  field already an array.

Both answer: ``len()``; ``coded(field)``: (int32 code of each event, the distinct values in the code
order, every one used) of ``ph``, ``cat``, ``name``, ``pid`` or ``tid``, the values as msgspec decodes them
(str, int, float or None); ``numbers(field)``: what :func:`~perfkit.trace.loader.values.checked_ints` /
``checked_floats`` read (a list of the values, or a float64 array, NaN where absent or null) of ``ts``,
``dur``, ``id`` or an :class:`~perfkit.trace.loader.events.Args` attribute; ``written(field)``: whether any
event wrote the field (a null counts); ``either(first, second)``: :meth:`numbers` of ``first`` where it
holds a value, else of ``second``; ``ranks()``: the distinct ``args.rank`` values, None left out;
``value(field, row)``: one event's value as msgspec decodes it (``ABSENT`` where an id is left out); and
``subset(mask)``: the fields of the events ``mask`` marks.
"""
from __future__ import annotations

from operator import attrgetter

import numpy as np

from .columns import local_codes, used_codes
from .events import ABSENT, NO_ARGS

_EVENT_FIELDS = frozenset(("ph", "cat", "name", "pid", "tid", "ts", "dur", "id"))
_RANK = attrgetter("rank")


def _field(items: list, name: str) -> list:
    return list(map(attrgetter(name), items))


def _given(value) -> bool:
    return value is not ABSENT and value is not None


class EventFields:
    """The fields of a list of msgspec :class:`~perfkit.trace.loader.events.Event` structs."""

    def __init__(self, events: list, args: list | None = None):
        self.events = events
        self._args = args  # each event's Args (NO_ARGS for "args": null), gathered when first needed
        self._coded: dict[str, tuple] = {}
        self._ranks: set | None = None

    def __len__(self) -> int:
        return len(self.events)

    def args(self) -> list:
        if self._args is None:
            args = _field(self.events, "args")
            try:
                self._ranks = set(map(_RANK, args)) - {None}  # (while at it: ranks() wants them anyway)
            except AttributeError:  # an explicit "args": null (a missing one is NO_ARGS already)
                args = [a if a is not None else NO_ARGS for a in args]
            self._args = args
        return self._args

    def _values(self, name: str) -> list:
        return _field(self.events if name in _EVENT_FIELDS else self.args(), name)

    def coded(self, name: str) -> tuple[np.ndarray, list]:
        if name not in self._coded:
            self._coded[name] = local_codes(self._values(name))
        return self._coded[name]

    def numbers(self, name: str) -> list:
        return self._values(name)

    def written(self, name: str) -> bool:
        values = self._values(name)
        return values.count(ABSENT) < len(values)

    def either(self, first: str, second: str) -> list:
        """(Most events of the categories that carry ``bytes`` or ``size``, runtime calls, carry neither:
        the list is then taken without a Python call per event.)"""
        given = self._values(first)
        if given.count(ABSENT) == len(given):
            return self._values(second)
        return [a if _given(a) else b for a, b in zip(given, self._values(second))]

    def ranks(self) -> set:
        if self._ranks is None:
            self._ranks = set(map(_RANK, self.args())) - {None}
        return self._ranks

    def value(self, name: str, row: int):
        return getattr(self.events[row] if name in _EVENT_FIELDS else self.args()[row], name)

    def subset(self, mask: np.ndarray) -> "EventFields":
        rows = np.flatnonzero(mask).tolist()
        return EventFields(list(map(self.events.__getitem__, rows)),
                           None if self._args is None else list(map(self._args.__getitem__, rows)))


CODED = ("ph", "cat", "name", "pid", "tid", "rank")  # the order of the C extension's columns
NUMERIC = ("ts", "dur", "id", "external_id", "device", "stream", "correlation", "external_id_old", "bytes", "size",
           "python_parent", "python_id", "alloc_bytes")
_ABSENT, _NULL, _INT, _FLOAT, _OBJECT = range(5)  # the C extension's kinds of value
_TIMES = ("ts", "dur")  # float64 fields (Event.ts/dur): msgspec makes a float of an integer there


class NativeFields:
    """The columns of a chunk that the C extension decoded (its ``decode``: see ``cdecoder.c``), of
    all its events or of ``rows`` of them."""

    def __init__(self, decoded: tuple, rows: np.ndarray | None = None):
        n, codes, uniques, values, kinds, objects = decoded
        self.n, self.rows = n, rows
        self.codes = {f: np.frombuffer(c, dtype=np.int32) for f, c in zip(CODED, codes)}
        self.uniques = dict(zip(CODED, uniques))
        self.values = {f: None if v is None else np.frombuffer(v, dtype=np.float64) for f, v in zip(NUMERIC, values)}
        self.kinds = {f: None if k is None else np.frombuffer(k, dtype=np.uint8) for f, k in zip(NUMERIC, kinds)}
        self.objects = dict(zip(NUMERIC, objects))  # strings, integers past 2**53: the Python values
        self._coded: dict[str, tuple] = {}

    def __len__(self) -> int:
        return self.n if self.rows is None else len(self.rows)

    def _pick(self, column: np.ndarray) -> np.ndarray:
        return column if self.rows is None else column[self.rows]

    def coded(self, name: str) -> tuple[np.ndarray, list]:
        if name not in self._coded:
            codes, uniques = self._pick(self.codes[name]), self.uniques[name]
            self._coded[name] = (codes, uniques) if self.rows is None else used_codes(codes, uniques)
        return self._coded[name]

    def numbers(self, name: str) -> np.ndarray | list:
        """float64 (NaN: absent or null); the list of the Python values where the field holds a
        string or an integer past 2**53 (what :mod:`perfkit.trace.loader.values` reads one by one)."""
        values = self.values[name]
        if values is None:
            return np.full(len(self), np.nan)
        return self._pick(values) if self.objects[name] is None else self._exact(name)

    def _exact(self, name: str) -> list:
        """The values of ``name`` as msgspec decodes them (ts and dur: floats, None where absent)."""
        values, kinds = self._pick(self.values[name]), self._pick(self.kinds[name])
        out = np.full(len(values), None if name in _TIMES else ABSENT, dtype=object)
        out[kinds == _NULL] = None
        ints = kinds == _INT
        out[ints] = values[ints].tolist() if name in _TIMES else values[ints].astype(np.int64).tolist()
        out[kinds == _FLOAT] = values[kinds == _FLOAT].tolist()
        held = kinds == _OBJECT
        out[held] = list(map(self.objects[name].__getitem__, values[held].astype(np.int64).tolist()))
        return out.tolist()

    def written(self, name: str) -> bool:
        kinds = self.kinds[name]
        return kinds is not None and bool(self._pick(kinds).any())

    def either(self, first: str, second: str) -> np.ndarray | list:
        kinds = self.kinds[first]
        if kinds is None:
            return self.numbers(second)
        if self.objects[first] is not None or self.objects[second] is not None:
            return [a if _given(a) else b for a, b in zip(self.numbers(first), self.numbers(second))]
        return np.where(self._pick(kinds) >= _INT, self.numbers(first), self.numbers(second))

    def ranks(self) -> set:
        return set(self.coded("rank")[1]) - {None}

    def value(self, name: str, row: int):
        at = row if self.rows is None else int(self.rows[row])
        if name in self.codes:
            return self.uniques[name][self.codes[name][at]]
        values, kinds = self.values[name], self.kinds[name]
        kind = _ABSENT if kinds is None else int(kinds[at])
        if kind == _OBJECT:
            return self.objects[name][int(values[at])]
        if name in _TIMES:
            return float(values[at]) if kind >= _INT else None
        if kind < _INT:
            return ABSENT if kind == _ABSENT else None
        return int(values[at]) if kind == _INT else float(values[at])

    def subset(self, mask: np.ndarray) -> "NativeFields":
        other = object.__new__(NativeFields)
        other.__dict__.update(self.__dict__, _coded={})
        other.rows = np.flatnonzero(mask) if self.rows is None else self.rows[mask]
        return other
