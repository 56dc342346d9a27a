"""Turn batches of Chrome-trace event dicts into typed columns, one batch at a time.

String columns are dictionary-encoded while reading (one shared code table per column across
batches), so a name repeated two million times is stored once; the result is a pandas
``category`` column whose values are the original strings.
"""
from __future__ import annotations

from operator import itemgetter

import numpy as np
import pandas as pd

from .schema import EVENT_COLUMNS, FLOW_CATEGORIES, GPU_SIDE_CATEGORIES, INT_COLUMNS, normalize_category

_EMPTY: dict = {}
_STRING_COLUMNS = ("name", "cat", "ph", "pid", "tid")


class Encoder:
    """Maps strings to int32 codes, shared across batches."""

    def __init__(self):
        self.codes: dict = {}

    def encode(self, values) -> np.ndarray:
        table = self.codes
        out = [table.get(v) for v in values]
        if None in out:
            out = [table.setdefault(v, len(table)) for v in values]
        return np.fromiter(out, dtype=np.int32, count=len(out))

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        categories = list(self.codes)
        return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype="str"))


def _get(events: list, key: str, default=None) -> list:
    try:
        return list(map(itemgetter(key), events))
    except KeyError:
        return [e.get(key, default) for e in events]


def _ints(values: list, default: int = -1) -> np.ndarray:
    """Integers from JSON values that may be ints, floats, numeric strings, hex strings or None."""
    try:
        return np.fromiter((default if v is None else v for v in values), dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter((_to_int(v, default) for v in values), dtype=np.int64, count=len(values))


def _to_int(v, default: int) -> int:
    if v is None:
        return default
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            return int(str(v), 0)
        except ValueError:
            digits = "".join(ch for ch in str(v) if ch.isdigit())
            return int(digits) if digits else default


def _floats(values: list) -> np.ndarray:
    try:
        return np.fromiter((np.nan if v is None else v for v in values), dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)


def _to_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


class ColumnBuilder:
    """Accumulates event and flow columns over batches; ``frames()`` returns the two tables."""

    def __init__(self, file_id: int, rank: int):
        self.file_id, self.rank = file_id, rank
        self.encoders = {c: Encoder() for c in _STRING_COLUMNS}
        self.parts: list[dict] = []
        self.flow_parts: list[list] = []
        self.metadata_events: list[dict] = []
        self.n_seen = 0

    def add(self, batch: list) -> None:
        self.n_seen += len(batch)
        phases = _get(batch, "ph")
        keep, flows = [], []
        for event, ph in zip(batch, phases):
            if ph == "X" or ph == "i" or ph == "I":
                keep.append(event)
            elif ph == "s" or ph == "f" or ph == "t":
                flows.append(event)
            elif ph == "M":
                self.metadata_events.append(event)
        if keep:
            self.parts.append(self._columns(keep))
        if flows:
            self.flow_parts.append(flows)

    def _columns(self, events: list) -> dict:
        enc = self.encoders
        names = [n if isinstance(n, str) else str(n) for n in _get(events, "name", "")]
        raw_cats = _get(events, "cat")
        cats = [_norm_cat(c, n) for c, n in zip(raw_cats, names)]
        args = [a if a.__class__ is dict else _EMPTY for a in _get(events, "args")]
        gpu = np.fromiter((c in GPU_SIDE_CATEGORIES for c in cats), dtype=bool, count=len(cats))
        cols = {
            "name": enc["name"].encode(names),
            "cat": enc["cat"].encode(cats),
            "ph": enc["ph"].encode(["i" if p == "I" else p for p in _get(events, "ph")]),
            "ts_us": _floats(_get(events, "ts")),
            "dur_us": _floats(_get(events, "dur")),
            "pid": enc["pid"].encode([str(p) for p in _get(events, "pid", "")]),
            "tid": enc["tid"].encode([str(t) for t in _get(events, "tid", "")]),
            "correlation": _ints([a.get("correlation") for a in args]),
            "external_id": _ints([a.get("External id", a.get("external id")) for a in args]),
            "bytes": _ints([a.get("bytes", a.get("size")) for a in args]),
            "python_id": _ints([a.get("Python id") for a in args]),
            "python_parent": _ints([a.get("Python parent id") for a in args]),
            "alloc_bytes": _ints([a.get("Bytes") for a in args], default=0),
        }
        cols["device"] = np.where(gpu, _ints([a.get("device") for a in args]), -1).astype(np.int16)
        cols["stream"] = np.where(gpu, _ints([a.get("stream") for a in args]), -1).astype(np.int32)
        return cols

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
                arrays = [p[col] for p in self.parts]
                merged = np.concatenate(arrays) if arrays else np.empty(0, dtype=_dtype(col))
                data[col] = self.encoders[col].categorical(merged) if col in _STRING_COLUMNS else merged
        frame = pd.DataFrame(data, columns=list(EVENT_COLUMNS))
        frame["dur_us"] = frame["dur_us"].where(frame["ph"] != "i", 0.0)
        return frame.astype(dict(INT_COLUMNS))

    def _flows_frame(self) -> pd.DataFrame:
        flows = [e for part in self.flow_parts for e in part if e.get("cat") in FLOW_CATEGORIES]
        encoders = {c: Encoder() for c in ("ph", "cat", "pid", "tid")}
        frame = pd.DataFrame({"id": _ints(_get(flows, "id"))})
        for col in ("ph", "cat"):
            frame[col] = encoders[col].categorical(encoders[col].encode(_get(flows, col)))
        for col in ("pid", "tid"):
            frame[col] = encoders[col].categorical(encoders[col].encode([str(v) for v in _get(flows, col, "")]))
        frame["ts_us"] = _floats(_get(flows, "ts"))
        frame["file_id"] = np.int16(self.file_id)
        return frame


def _dtype(col: str):
    if col in _STRING_COLUMNS:
        return np.int32
    if col in ("ts_us", "dur_us"):
        return np.float64
    return np.int64


_CAT_CACHE: dict = {}


def _norm_cat(cat, name: str) -> str:
    if not cat:
        return normalize_category(cat, name)
    out = _CAT_CACHE.get(cat)
    if out is None:
        out = _CAT_CACHE[cat] = normalize_category(cat, name)
    return out
