"""Interval algebra over half-open [start, end) intervals in microseconds, vectorized with numpy.

Each function takes interval arrays in any order (overlaps allowed) and returns the disjoint, sorted
blocks of the result as ``(starts, ends)``.
"""
from __future__ import annotations

import numpy as np


def union(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted blocks covering the union of the intervals (empty ones dropped)."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    new_block = np.concatenate(([True], s[1:] > e[:-1]))
    first = np.flatnonzero(new_block)
    last = np.append(first[1:], len(s)) - 1
    return s[first], e[last]


def subtract(a_starts, a_ends, b_starts, b_ends) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of the union of ``a`` less the union of ``b``."""
    a_s, a_e = union(a_starts, a_ends)
    b_s, b_e = union(b_starts, b_ends)
    if len(a_s) == 0 or len(b_s) == 0:
        return a_s, a_e
    cuts = np.unique(np.concatenate([a_s, a_e, b_s, b_e]))
    mids = (cuts[:-1] + cuts[1:]) / 2
    keep = covers(a_s, a_e, mids) & ~covers(b_s, b_e, mids)
    return union(cuts[:-1][keep], cuts[1:][keep])


def intersect(a_starts, a_ends, b_starts, b_ends) -> tuple[np.ndarray, np.ndarray]:
    """Blocks covered by both unions."""
    a_s, a_e = union(a_starts, a_ends)
    b_s, b_e = union(b_starts, b_ends)
    if len(a_s) == 0 or len(b_s) == 0:
        return a_s[:0], a_e[:0]
    cuts = np.unique(np.concatenate([a_s, a_e, b_s, b_e]))
    mids = (cuts[:-1] + cuts[1:]) / 2
    keep = covers(a_s, a_e, mids) & covers(b_s, b_e, mids)
    return union(cuts[:-1][keep], cuts[1:][keep])


def covers(block_starts: np.ndarray, block_ends: np.ndarray, t) -> np.ndarray:
    """Whether each time ``t`` lies inside one of the disjoint sorted blocks."""
    t = np.asarray(t, dtype=np.float64)
    if len(block_starts) == 0:
        return np.zeros(t.shape, dtype=bool)
    k = np.searchsorted(block_starts, t, side="right") - 1
    return (k >= 0) & (t < block_ends[np.clip(k, 0, None)])


def length(starts, ends) -> float:
    """Total length of the union."""
    s, e = union(starts, ends)
    return float((e - s).sum())
