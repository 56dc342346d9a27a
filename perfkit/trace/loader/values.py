"""Numbers from JSON event fields, checked against the ranges in :mod:`perfkit.limits`.

A field value may be an int, a float, a numeric or hex string, or absent. Each converter returns
the column and a mask of the values that are present but unusable: not finite (``"inf"``,
``"-inf"``), or outside the field's range (``2**70``, a negative duration). The column builder
drops those events and :class:`Drops` counts them per field, so the trace loads with one warning
per field instead of an ``inf s`` GPU time or an id that silently wrapped to -2**63.
Integers beyond 2**53 are converted exactly (never through float64, which would round them).
"""
from __future__ import annotations

import math

import numpy as np

_EXACT = 2.0**53  # float64 holds every integer below this
_SAFE = 2**53 - 1  # within +-_SAFE a float64 from JSON is the integer written


def checked_floats(values: list, bounds: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(float64 array, bad mask). Absent and non-numeric values are NaN and count as bad: a time
    is required where this is used (``ts``, ``dur``)."""
    try:
        out = np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        out = np.array([_to_float(v) for v in values], dtype=np.float64)
    lo, hi = bounds
    with np.errstate(invalid="ignore"):
        bad = ~((out >= lo) & (out <= hi))
    return out, bad


def checked_ints(values: list, bounds: tuple, default: int = -1, *, wrap: dict | None = None):
    """(int64 array, bad mask). Absent (None, NaN, a non-numeric string) gives ``default`` and is
    not bad; ``wrap`` maps special raw values to what they mean (e.g. Kineto's 2**32-1 stream)."""
    n = len(values)
    try:
        floats = np.array(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return _slow_ints(values, bounds, default, wrap)
    if wrap:
        for raw, meant in wrap.items():
            floats[floats == raw] = meant
    lo, hi = bounds
    with np.errstate(invalid="ignore"):  # NaN (absent) compares False: not ok
        ok = (floats >= max(lo, -_SAFE)) & (floats <= min(hi, _SAFE))
    if ok.all():
        return floats.astype(np.int64), np.zeros(n, dtype=bool)
    absent = np.isnan(floats)
    bad = ~(ok | absent)
    if bad.any() and not (np.abs(floats[bad]) < _EXACT).all():  # beyond 2**53 (or inf): exactly, one by one
        return _slow_ints(values, bounds, default, wrap)
    out = np.full(n, default, dtype=np.int64)
    out[ok] = floats[ok].astype(np.int64)
    return out, bad


def _slow_ints(values: list, bounds: tuple, default: int, wrap: dict | None):
    lo, hi = bounds
    out = np.full(len(values), default, dtype=np.int64)
    bad = np.zeros(len(values), dtype=bool)
    for i, raw in enumerate(values):
        value = _to_int(raw)
        if value is None:
            continue
        if wrap and value in wrap:
            value = wrap[value]
        if lo <= value <= hi:
            out[i] = value
        else:
            bad[i] = True
    return out, bad


def _to_int(v):
    """An int (exact), +-inf for an infinite number, or None when there is no number."""
    if v is None or isinstance(v, bool):
        return None if v is None else int(v)
    if isinstance(v, float):
        return None if math.isnan(v) else (v if math.isinf(v) else int(v))
    if isinstance(v, int):
        return v
    return _parse_int(str(v))


def _parse_int(text: str):
    text = text.strip()
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return _to_int(float(text))
    except (ValueError, OverflowError):
        digits = "".join(ch for ch in text if ch.isdigit())  # e.g. "7 (default)"
        return int(digits) if digits and len(digits) < 40 else None


def _to_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan


class Drops:
    """Events dropped per field while building columns, each counted once (under its first bad
    field in column order), with the first one's name and raw value for the warning."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.first: dict[str, tuple[str, object]] = {}

    def __bool__(self) -> bool:
        return bool(self.counts)

    def record(self, bad: dict[str, np.ndarray], names: list, raw_of) -> np.ndarray:
        """Count the rows that ``bad`` (field -> mask) marks; returns the mask of rows to keep.
        ``raw_of(field, row)`` gives the raw value shown as the first example."""
        taken = np.zeros(len(names), dtype=bool)
        for field, mask in bad.items():
            new = mask & ~taken
            if new.any():
                i = int(np.flatnonzero(new)[0])
                self.counts[field] = self.counts.get(field, 0) + int(new.sum())
                self.first.setdefault(field, (str(names[i]), raw_of(field, i)))
                taken |= new
        return ~taken

    def absorb(self, other: "Drops") -> None:
        """Add the drops counted by another builder (a later chunk of the same file)."""
        for field, count in other.counts.items():
            self.counts[field] = self.counts.get(field, 0) + count
            self.first.setdefault(field, other.first[field])

    def messages(self, labels: dict[str, str], seen: int) -> list[str]:
        """One sentence per field: how many events were dropped and why, with the first example."""
        out = []
        for field, count in self.counts.items():
            name, value = self.first[field]
            out.append(f"dropped {count:,} of {seen:,} events: {labels[field]} "
                       f"(first: {short_repr(name)} with {short_repr(value)})")
        return out


def short_repr(value) -> str:
    """``repr(value)`` cut to 40 characters (never raising for an int too long to print)."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return "<a number too long to show>"
    return text if len(text) <= 40 else text[:37] + "..."
