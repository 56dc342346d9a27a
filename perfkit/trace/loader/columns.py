"""Turn batches of events into typed columns, one batch at a time.

A batch is the fields of its events (:mod:`perfkit.trace.loader.fields`): msgspec's structs
(:mod:`perfkit.trace.loader.events`) or the C extension's columns, read the same way here.

String columns are dictionary-encoded while reading: each batch's values are coded through a dict
(hashed in C), and its few distinct values are mapped into one code table per column shared across
batches, so a name repeated two million times is stored once. The result is a pandas ``category``
column whose values are the original strings, its categories sorted (the table does not depend on how
the file was cut into batches). Builders of different batches merge with :meth:`ColumnBuilder.absorb`
(chunks decoded in worker processes). Argument fields are read only for the events that carry them (Python ids for
python_function events, device and stream for GPU events, ...).
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from ...limits import DUR_RANGE_US, ID_RANGES, STREAM_ALL, TIME_RANGE_US, span
from .events import ABSENT
from ..schema import EVENT_COLUMNS, FLOW_CATEGORIES, GPU_SIDE_CATEGORIES, INT_COLUMNS, LEGACY_PIDS, normalize_category
from .values import Drops, checked_floats, checked_ints
from .workers import release_freed_memory

_STRING_COLUMNS = ("name", "cat", "ph", "pid", "tid")
_KEEP_PH = ("X", "i", "I", "C", "B", "E")  # B/E: paired into X rows by perfkit.trace.loader.durations
_FLOW_PH = ("s", "f", "t")


class Encoder:
    """Maps values to int32 codes through their string form, shared across batches."""

    def __init__(self, normalize=str):
        self.codes: dict[str, int] = {}
        self.normalize = normalize

    def encode(self, values: list) -> np.ndarray:
        return self.encode_local(*local_codes(values))

    def encode_local(self, local: np.ndarray, uniques: list) -> np.ndarray:
        """:meth:`encode` of values already coded by :func:`local_codes` (every unique used)."""
        table, normalize = self.codes, self.normalize
        mapping = np.array([table.setdefault(normalize(u), len(table)) for u in uniques], dtype=np.int32)
        return mapping[local] if len(local) else local

    def translate(self, other: "Encoder") -> np.ndarray:
        """This encoder's code for each of ``other``'s codes (adding the strings it lacks)."""
        table = self.codes
        return np.fromiter((table.setdefault(v, len(table)) for v in other.codes), dtype=np.int32,
                           count=len(other.codes))

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        """The strings as a categorical with sorted categories, so that the table does not depend on
        the order the chunks of a file were read in (nor on its layout)."""
        strings = np.array(list(self.codes), dtype=object)
        order = np.argsort(strings, kind="stable")
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        return pd.Categorical.from_codes(rank[codes] if len(codes) else codes,
                                         categories=pd.Index(strings[order].tolist(), dtype="str"))


def local_codes(values: list) -> tuple[np.ndarray, list]:
    """(int32 code of each value, the distinct values in first-seen order): a dict hashes them in C,
    about twice as fast as pd.factorize on an object array of a chunk's few distinct strings. One
    pass of ``setdefault`` gives each value the index of its first occurrence, renumbered in numpy
    (10-20% faster than a pass to collect the distinct values and another to look each one up)."""
    first_seen: dict = {}
    first = np.fromiter(map(first_seen.setdefault, values, itertools.count()), dtype=np.int64, count=len(values))
    renumber = np.zeros(len(values), dtype=np.int32)
    renumber[np.fromiter(first_seen.values(), dtype=np.int64, count=len(first_seen))] = np.arange(
        len(first_seen), dtype=np.int32)
    return renumber[first], list(first_seen)


def used_codes(codes: np.ndarray, uniques: list) -> tuple[np.ndarray, list]:
    """(codes, uniques) of a subset of values, without the uniques it does not hold."""
    used = np.zeros(len(uniques), dtype=bool)
    used[codes] = True
    if used.all():
        return codes, uniques
    return (np.cumsum(used, dtype=np.int32) - 1)[codes], [u for u, k in zip(uniques, used.tolist()) if k]


def _blank(value) -> bool:
    return value is None or value != value or value == ""  # None, NaN (how factorize may return None), ""


def _text(value) -> str:
    return "" if _blank(value) else str(value)


def _phase(value) -> str:
    return "i" if value == "I" else _text(value)  # "I" is the legacy spelling of an instant event


def _scatter(n: int, mask: np.ndarray, checked: tuple, default: int) -> tuple[np.ndarray, np.ndarray]:
    values, bad = checked
    out = np.full(n, default, dtype=np.int64)
    out[mask] = values
    flags = np.zeros(n, dtype=bool)
    flags[mask] = bad
    return out, flags


def _given(value) -> bool:
    """Whether an argument field was written with a value (not left out, not null)."""
    return value is not ABSENT and value is not None


# What an event's field must be, by column, for the warning that counts the events dropped for it.
_TIME = f"missing, not finite or outside {span(TIME_RANGE_US)} us"
DROP_LABELS = {
    "ts_us": f"'ts' is {_TIME}", "dur_us": f"'dur' is missing, not finite or outside {span(DUR_RANGE_US)} us (a week)",
    **{col: f"'{key}' is not finite or outside {span(ID_RANGES[col])}" for col, key in (
        ("device", "device"), ("stream", "stream"), ("correlation", "correlation"),
        ("external_id", "External id"), ("bytes", "bytes"), ("python_id", "Python id"),
        ("python_parent", "Python parent id"), ("alloc_bytes", "Bytes"), ("id", "id"))},
    "flow_ts_us": f"flow 'ts' is {_TIME}",
}


class ColumnBuilder:
    """Accumulates event and flow columns over batches; ``frames()`` returns the two tables.

    Events whose numbers are unusable (see :mod:`perfkit.trace.loader.values`) are dropped and counted
    in ``drops``; flows likewise in ``flow_drops``.
    """

    def __init__(self, file_id: int, rank: int):
        self.file_id, self.rank = file_id, rank
        self.encoders = {c: Encoder(_text) for c in _STRING_COLUMNS}
        self.encoders["ph"] = Encoder(_phase)
        self.parts: list[dict] = []
        self.flow_parts: list[dict] = []
        self.flow_encoders = {c: Encoder(_text) for c in ("ph", "cat", "pid", "tid")}
        self.n_seen = 0
        self.skipped_phases: dict[str, int] = {}  # events of a phase perfkit does not read (M, s/f flows...)
        self.arg_ranks: set = set()  # distinct args.rank values (a file of several merged ranks has more than one)
        self.drops = Drops()
        self.flow_drops = Drops()

    def add(self, fields) -> None:
        """Add the events of a batch (:mod:`perfkit.trace.loader.fields`)."""
        self.n_seen += len(fields)
        local, uniques = fields.coded("ph")
        keep = np.array([u in _KEEP_PH for u in uniques], dtype=bool)[local]
        flows = np.array([u in _FLOW_PH for u in uniques], dtype=bool)[local]
        for code, phase in enumerate(uniques):
            if phase not in _KEEP_PH:
                self.skipped_phases[_text(phase)] = self.skipped_phases.get(_text(phase), 0) + int(
                    np.count_nonzero(local == code))
        if keep.all():
            self.parts.append(self._columns(fields, local, uniques))
        elif keep.any():
            self.parts.append(self._columns(fields.subset(keep), *used_codes(local[keep], uniques)))
        if flows.any():
            self._add_flows(fields.subset(flows), local[flows], uniques)

    def absorb(self, other: "ColumnBuilder") -> None:
        """Append the events ``other`` read after this builder's (a later chunk of the same file,
        e.g. decoded in a worker process), translating its string codes into this builder's."""
        self.parts += _translated(other.parts, self.encoders, other.encoders)
        self.flow_parts += _translated(other.flow_parts, self.flow_encoders, other.flow_encoders)
        self.n_seen += other.n_seen
        self.arg_ranks |= other.arg_ranks
        for phase, count in other.skipped_phases.items():
            self.skipped_phases[phase] = self.skipped_phases.get(phase, 0) + count
        self.drops.absorb(other.drops)
        self.flow_drops.absorb(other.flow_drops)

    def _add_flows(self, flows, phase_codes: np.ndarray, phases: list) -> None:
        """Flow columns of the flow-phase events ``flows`` (phases ``phases[phase_codes]``) whose category
        is one of the flow categories (the others are no arrows perfkit reads)."""
        cat_codes, cats = flows.coded("cat")
        arrows = np.array([c in FLOW_CATEGORIES for c in cats], dtype=bool)[cat_codes]
        if not arrows.any():
            return
        if not arrows.all():
            flows, phase_codes, cat_codes = flows.subset(arrows), phase_codes[arrows], cat_codes[arrows]
        self.flow_parts.append(self._flow_columns(flows, used_codes(phase_codes, phases), used_codes(cat_codes, cats)))

    def _flow_columns(self, flows, phases: tuple, cats: tuple) -> dict:
        """Columns of ``flows``, with their phase and category codes (:func:`local_codes`, every unique used)."""
        ids = checked_ints(flows.numbers("id"), ID_RANGES["id"])
        ts = checked_floats(flows.numbers("ts"), TIME_RANGE_US)
        bad = {"flow_ts_us": ts[1], "id": ids[1]}
        keep = self.flow_drops.record(bad, _Names(flows), lambda f, i: _shown(flows.value("ts", i))
                                      if f == "flow_ts_us" else flows.value("id", i))
        cols = {"id": ids[0], "ts_us": ts[0], "ph": self.flow_encoders["ph"].encode_local(*phases),
                "cat": self.flow_encoders["cat"].encode_local(*cats)}
        for col in ("pid", "tid"):
            cols[col] = self.flow_encoders[col].encode_local(*flows.coded(col))
        return cols if keep.all() else {k: v[keep] for k, v in cols.items()}

    def _columns(self, events, phase_codes: np.ndarray, phases: list) -> dict:
        """Columns of the fields ``events``, whose phases are ``phases[phase_codes]`` (:func:`local_codes`)."""
        cat_codes = self._categories(events)
        self.arg_ranks |= events.ranks()
        cols, bad = self._numbers(events, cat_codes)
        bad["dur_us"] &= np.array([p == "X" for p in phases], dtype=bool)[phase_codes]  # an instant's dur is ignored (0)
        keep = self.drops.record(bad, _Names(events), lambda f, i: _raw(events, i, f))
        cols.update({
            "name": self.encoders["name"].encode_local(*events.coded("name")),
            "cat": cat_codes,
            "ph": self.encoders["ph"].encode_local(phase_codes, phases),
            "pid": self.encoders["pid"].encode_local(*events.coded("pid")),
            "tid": self.encoders["tid"].encode_local(*events.coded("tid")),
        })
        cols = {k: v.astype(INT_COLUMNS[k], copy=False) if k in INT_COLUMNS else v for k, v in cols.items()}
        return cols if keep.all() else {k: v[keep] for k, v in cols.items()}

    def _numbers(self, events, cat_codes: np.ndarray) -> tuple[dict, dict]:
        """Numeric columns and, per column, the mask of events whose value is unusable."""
        n = len(events)
        checked = {
            "ts_us": checked_floats(events.numbers("ts"), TIME_RANGE_US),
            "dur_us": checked_floats(events.numbers("dur"), DUR_RANGE_US),
            "correlation": checked_ints(events.numbers("correlation"), ID_RANGES["correlation"]),
            "external_id": self._external_ids(events),
        }
        subsets = {}  # device and stream (and both Python ids) are read from the same events
        for col, cats, attr, default in _ARG_COLUMNS:
            if cats not in subsets:
                mask = self._is(cat_codes, *cats)
                subsets[cats] = mask, events.subset(mask)
            mask, subset = subsets[cats]
            values = subset.either("bytes", "size") if attr == "bytes" else subset.numbers(attr)
            wrap = {STREAM_ALL: -1} if col == "stream" else None
            checked[col] = _scatter(n, mask, checked_ints(values, ID_RANGES[col], default, wrap=wrap), default)
        return {c: v for c, (v, _) in checked.items()}, {c: b for c, (_, b) in checked.items()}

    def _is(self, cat_codes: np.ndarray, *categories: str) -> np.ndarray:
        table = self.encoders["cat"].codes
        return np.isin(cat_codes, [table[c] for c in categories if c in table])

    def _categories(self, events) -> np.ndarray:
        """Normalized category codes; events without a category are named by what they are."""
        local, uniques = events.coded("cat")
        table = self.encoders["cat"].codes
        mapped = [table.setdefault(normalize_category(None if _blank(u) else u, ""), len(table)) for u in uniques]
        codes = np.array(mapped, dtype=np.int32)[local] if len(local) else local
        blank = [i for i, u in enumerate(uniques) if _blank(u)]
        if blank:
            rows = np.isin(local, blank)
            memory = table.setdefault("cpu_instant_event", len(table))
            names, name_values = events.coded("name")
            codes[rows & np.isin(names, [i for i, u in enumerate(name_values) if u == "[memory]"])] = memory
            legacy = {pid: table.setdefault(cat, len(table)) for pid, cat in LEGACY_PIDS.items()}
            pids, pid_values = events.coded("pid")
            for i, pid in enumerate(pid_values):
                if isinstance(pid, str) and pid in legacy:
                    codes[rows & (pids == i)] = legacy[pid]
        return codes

    @staticmethod
    def _external_ids(events) -> tuple[np.ndarray, np.ndarray]:
        """``External id``, else the older spelling ``external id``."""
        new, bad = checked_ints(events.numbers("external_id"), ID_RANGES["external_id"])
        missing = (new < 0) & ~bad
        if missing.any():
            olds = events.subset(missing)
            if olds.written("external_id_old"):  # a trace of the older spelling
                new[missing], bad[missing] = checked_ints(olds.numbers("external_id_old"), ID_RANGES["external_id"])
        return new, bad

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        return self._events_frame(), self._flows_frame()

    def _events_frame(self) -> pd.DataFrame:
        n = sum(len(p["ts_us"]) for p in self.parts)
        data = {}
        for col in EVENT_COLUMNS:
            if col == "file_id":
                data[col] = np.full(n, self.file_id, dtype=np.int16)
            elif col == "rank":
                data[col] = np.full(n, self.rank, dtype=np.int32)
            else:
                arrays = [p.pop(col) for p in self.parts]  # free each batch's column once merged
                merged = np.concatenate(arrays) if arrays else np.empty(0, dtype=_dtype(col))
                del arrays
                release_freed_memory()  # the batches' column back to the system now, not after the last column
                data[col] = self.encoders[col].categorical(merged) if col in _STRING_COLUMNS else merged
                if col in _STRING_COLUMNS and self.drops:  # names seen only on dropped events
                    data[col] = data[col].remove_unused_categories()
        self.parts = []
        data["dur_us"][_instant(data["ph"])] = 0.0
        return pd.DataFrame(data, columns=list(EVENT_COLUMNS), copy=False)

    def _flows_frame(self) -> pd.DataFrame:
        parts = self.flow_parts
        frame = pd.DataFrame({
            "id": _merge(parts, "id", np.int64),
            **{c: self.flow_encoders[c].categorical(_merge(parts, c, np.int32)) for c in ("ph", "cat", "pid", "tid")},
            "ts_us": _merge(parts, "ts_us", np.float64),
        })
        frame["file_id"] = np.int16(self.file_id)
        self.flow_parts = []
        return frame


_ARG_COLUMNS = (  # (column, categories whose events carry it, Args attribute, default)
    ("bytes", ("gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver"), "bytes", -1),
    ("python_id", ("python_function",), "python_id", -1),
    ("python_parent", ("python_function",), "python_parent", -1),
    ("alloc_bytes", ("cpu_instant_event",), "alloc_bytes", 0),
    ("device", GPU_SIDE_CATEGORIES, "device", -1),
    ("stream", GPU_SIDE_CATEGORIES, "stream", -1),
)


def _raw(events, row: int, column: str):
    """The raw JSON value behind ``column`` of one event (for the warning's example)."""
    if column in ("ts_us", "dur_us"):
        return _shown(events.value("ts" if column == "ts_us" else "dur", row))
    if column in ("bytes", "external_id"):
        value = events.value(column, row)
        return value if _given(value) else events.value("size" if column == "bytes" else "external_id_old", row)
    return events.value(column, row)


def _shown(time):
    """A time as the JSON wrote it, near enough: msgspec reads ``"dur": -5`` as the float -5.0."""
    return int(time) if isinstance(time, float) and time.is_integer() and abs(time) < 2**53 else time


class _Names:
    """The names of ``events``, read one by one: a batch's drops need the first dropped event's name
    only, so a batch without drops reads none (flows: 6% of their column building)."""

    def __init__(self, events):
        self.events = events

    def __len__(self) -> int:
        return len(self.events)

    def __getitem__(self, row: int):
        return self.events.value("name", row)


def _translated(parts: list[dict], mine: dict, theirs: dict) -> list[dict]:
    tables = {col: encoder.translate(theirs[col]) for col, encoder in mine.items()}
    return [{col: tables[col][values] if col in tables else values for col, values in part.items()}
            for part in parts]


def _merge(parts: list[dict], col: str, dtype) -> np.ndarray:
    return np.concatenate([p[col] for p in parts]) if parts else np.empty(0, dtype=dtype)


def _instant(ph: pd.Categorical) -> np.ndarray:
    """Rows without a duration: instant events and counter samples."""
    codes = [i for i, c in enumerate(ph.categories) if c in ("i", "C")]
    return np.isin(ph.codes, codes)


def _dtype(col: str):
    if col in _STRING_COLUMNS:
        return np.int32
    if col in ("ts_us", "dur_us"):
        return np.float64
    return INT_COLUMNS.get(col, np.int64)
