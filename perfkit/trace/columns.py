"""Turn batches of typed events (:mod:`perfkit.trace.events`) into typed columns, one batch at a time.

String columns are dictionary-encoded while reading: each batch is factorized in C (pandas), and its
few distinct values are mapped into one code table per column shared across batches, so a name repeated
two million times is stored once. The result is a pandas ``category`` column whose values are the
original strings. Argument fields are read only for the events that carry them (Python ids for
python_function events, device and stream for GPU events, ...).
"""
from __future__ import annotations

from operator import attrgetter

import numpy as np
import pandas as pd

from .events import NO_ARGS
from .schema import EVENT_COLUMNS, FLOW_CATEGORIES, GPU_SIDE_CATEGORIES, INT_COLUMNS, normalize_category

_STRING_COLUMNS = ("name", "cat", "ph", "pid", "tid")
_KEEP_PH = ("X", "i", "I", "C")
_FLOW_PH = ("s", "f", "t")


class Encoder:
    """Maps values to int32 codes through their string form, shared across batches."""

    def __init__(self, normalize=str):
        self.codes: dict[str, int] = {}
        self.normalize = normalize

    def encode(self, values: list) -> np.ndarray:
        local, uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=False)
        table = self.codes
        mapping = np.fromiter((table.setdefault(self.normalize(u), len(table)) for u in uniques),
                              dtype=np.int32, count=len(uniques))
        return mapping[local] if len(local) else np.empty(0, dtype=np.int32)

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        return pd.Categorical.from_codes(codes, categories=pd.Index(list(self.codes), dtype="str"))


def _blank(value) -> bool:
    return value is None or value != value or value == ""  # None, NaN (how factorize may return None), ""


def _text(value) -> str:
    return "" if _blank(value) else str(value)


def _phase(value) -> str:
    return "i" if value == "I" else _text(value)  # "I" is the legacy spelling of an instant event


def _ints(values: list, default: int = -1) -> np.ndarray:
    """Integers from JSON values that may be ints, floats, numeric or hex strings, or None."""
    try:
        floats = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_to_int(v, default) for v in values], dtype=np.int64)
    out = np.full(len(floats), default, dtype=np.int64)
    ok = np.isfinite(floats)
    out[ok] = floats[ok].astype(np.int64)
    return out


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
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_to_float(v) for v in values], dtype=np.float64)


def _to_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return np.nan


def _field(items: list, name: str) -> list:
    return list(map(attrgetter(name), items))


def _subset(items: list, mask: np.ndarray) -> list:
    return [items[i] for i in np.flatnonzero(mask).tolist()]


def _scatter(n: int, mask: np.ndarray, values: np.ndarray, default: int) -> np.ndarray:
    out = np.full(n, default, dtype=np.int64)
    out[mask] = values
    return out


class ColumnBuilder:
    """Accumulates event and flow columns over batches; ``frames()`` returns the two tables."""

    def __init__(self, file_id: int, rank: int):
        self.file_id, self.rank = file_id, rank
        self.encoders = {c: Encoder(_text) for c in _STRING_COLUMNS}
        self.encoders["ph"] = Encoder(_phase)
        self.parts: list[dict] = []
        self.flow_parts: list[dict] = []
        self.flow_encoders = {c: Encoder(_text) for c in ("ph", "cat", "pid", "tid")}
        self.n_seen = 0

    def add(self, batch: list) -> None:
        self.n_seen += len(batch)
        phases = _field(batch, "ph")
        local, uniques = pd.factorize(np.array(phases, dtype=object), use_na_sentinel=False)
        keep = np.isin(local, [i for i, u in enumerate(uniques) if u in _KEEP_PH])
        flows = np.isin(local, [i for i, u in enumerate(uniques) if u in _FLOW_PH])
        if keep.all():
            self.parts.append(self._columns(batch, phases))
        elif keep.any():
            rows = np.flatnonzero(keep).tolist()
            self.parts.append(self._columns([batch[i] for i in rows], [phases[i] for i in rows]))
        if flows.any():
            arrows = [e for e in _subset(batch, flows) if e.cat in FLOW_CATEGORIES]
            if arrows:
                self.flow_parts.append(self._flow_columns(arrows))

    def _flow_columns(self, flows: list) -> dict:
        cols = {"id": _ints(_field(flows, "id")), "ts_us": _floats(_field(flows, "ts"))}
        for col, encoder in self.flow_encoders.items():
            cols[col] = encoder.encode(_field(flows, col))
        return cols

    def _columns(self, events: list, phases: list) -> dict:
        n = len(events)
        names = _field(events, "name")
        cat_codes = self._categories(events, names)
        args = [a if a is not None else NO_ARGS for a in _field(events, "args")]
        cols = {
            "name": self.encoders["name"].encode(names),
            "cat": cat_codes,
            "ph": self.encoders["ph"].encode(phases),
            "ts_us": _floats(_field(events, "ts")),
            "dur_us": _floats(_field(events, "dur")),
            "pid": self.encoders["pid"].encode(_field(events, "pid")),
            "tid": self.encoders["tid"].encode(_field(events, "tid")),
            "correlation": _ints(_field(args, "correlation")),
            "external_id": self._external_ids(args),
        }
        copies = self._is(cat_codes, "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver")
        copy_args = _subset(args, copies)
        sizes = [b if b is not None else s for b, s in zip(_field(copy_args, "bytes"), _field(copy_args, "size"))]
        cols["bytes"] = _scatter(n, copies, _ints(sizes), -1)
        python = self._is(cat_codes, "python_function")
        py_args = _subset(args, python)
        cols["python_id"] = _scatter(n, python, _ints(_field(py_args, "python_id")), -1)
        cols["python_parent"] = _scatter(n, python, _ints(_field(py_args, "python_parent")), -1)
        memory = self._is(cat_codes, "cpu_instant_event")
        cols["alloc_bytes"] = _scatter(n, memory, _ints(_field(_subset(args, memory), "alloc_bytes"), 0), 0)
        gpu = self._is(cat_codes, *GPU_SIDE_CATEGORIES)
        gpu_args = _subset(args, gpu)
        cols["device"] = _scatter(n, gpu, _ints(_field(gpu_args, "device")), -1)
        cols["stream"] = _scatter(n, gpu, _ints(_field(gpu_args, "stream")), -1)
        return {k: v.astype(INT_COLUMNS[k], copy=False) if k in INT_COLUMNS else v for k, v in cols.items()}

    def _is(self, cat_codes: np.ndarray, *categories: str) -> np.ndarray:
        table = self.encoders["cat"].codes
        return np.isin(cat_codes, [table[c] for c in categories if c in table])

    def _categories(self, events: list, names: list) -> np.ndarray:
        """Normalized category codes; events without a category are named by what they are."""
        raw = _field(events, "cat")
        local, uniques = pd.factorize(np.array(raw, dtype=object), use_na_sentinel=False)
        table = self.encoders["cat"].codes
        mapped = [table.setdefault(normalize_category(None if _blank(u) else u, ""), len(table)) for u in uniques]
        codes = np.array(mapped, dtype=np.int32)[local] if len(local) else np.empty(0, dtype=np.int32)
        blank = [i for i, u in enumerate(uniques) if _blank(u)]
        if blank:
            rows = np.flatnonzero(np.isin(local, blank))
            memory = table.setdefault("cpu_instant_event", len(table))
            codes[rows] = [memory if names[i] == "[memory]" else codes[i] for i in rows.tolist()]
        return codes

    @staticmethod
    def _external_ids(args: list) -> np.ndarray:
        new = _ints(_field(args, "external_id"))
        missing = new < 0
        if missing.any():
            old = _ints(_field(_subset(args, missing), "external_id_old"))
            new[missing] = old
        return new

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
                data[col] = self.encoders[col].categorical(merged) if col in _STRING_COLUMNS else merged
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
