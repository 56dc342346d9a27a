"""Interval algebra over half-open [start, end) intervals in microseconds, vectorized with numpy.

Each function takes interval arrays in any order (overlaps allowed) and returns the disjoint, sorted
blocks of the result as ``(starts, ends)``. ``Coverage`` holds one union with its prefix lengths and
answers "how much of [a, b) is covered", "is t covered" and "what in [a, b) is not" in O(log n);
``window_cover`` gives the covered length of step windows per rank. Every analysis uses these.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


def union(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted blocks covering the union of the intervals (empty ones dropped)."""
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s, e
    if not (s[1:] >= s[:-1]).all():  # a thread's events mostly come in start order: no gathers then
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    e = np.maximum.accumulate(e)
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


def length_by(groups, starts, ends, n: int | None = None) -> np.ndarray:
    """The length of the union of each group's intervals: ``groups`` holds each interval's group code
    (0..n-1); entry g of the result is ``length`` of group g's intervals. One sort for all groups, where a
    ``length`` per group cost 0.3 ms each (200,000 kernel names: 69 s)."""
    g = np.asarray(groups, dtype=np.int64)
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    n = int(g.max()) + 1 if n is None and len(g) else (n or 0)
    keep = e > s
    g, s, e = g[keep], s[keep], e[keep]
    if len(g) == 0:
        return np.zeros(n)
    order = np.lexsort((s, g))
    g, s, e = g[order], s[order], e[order]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()  # the furthest end so far within the group
    new_block = np.concatenate(([True], (g[1:] != g[:-1]) | (s[1:] > reach[:-1])))
    first = np.flatnonzero(new_block)
    last = np.append(first[1:], len(s)) - 1
    return np.bincount(g[first], weights=reach[last] - s[first], minlength=n)




def window_cover(intervals: pd.DataFrame, windows: pd.DataFrame) -> np.ndarray:
    """For each window (``rank``, ``start_us``, ``end_us``), the length of the union of the
    intervals (``rank``, ``ts_us``, ``dur_us``) of the same rank that falls inside it, in us."""
    if intervals.empty or windows.empty:
        return np.zeros(len(windows))
    return cover_within(rank_unions(intervals), windows)


def rank_unions(intervals: pd.DataFrame) -> dict:
    """``{rank: (starts, ends)}``: the blocks of the union of each rank's intervals (``rank``,
    ``ts_us``, ``dur_us``)."""
    out = {}
    for rank, grp in intervals.groupby("rank", sort=False, observed=True):
        start = grp["ts_us"].to_numpy(dtype=np.float64)
        out[rank] = union(start, start + grp["dur_us"].to_numpy(dtype=np.float64))
    return out


def cover_within(blocks: dict, windows: pd.DataFrame) -> np.ndarray:
    """For each window (``rank``, ``start_us``, ``end_us``), the length of ``blocks[rank]`` (``{rank:
    (starts, ends)}``, overlaps allowed) that falls inside it, in us."""
    out = np.zeros(len(windows))
    ranks = windows["rank"].to_numpy()
    for rank, (starts, ends) in blocks.items():
        mask = ranks == rank
        if mask.any():
            cover = Coverage.of(starts, ends)
            out[mask] = cover.within(windows["start_us"].to_numpy()[mask], windows["end_us"].to_numpy()[mask])
    return out


@dataclass(frozen=True)
class Coverage:
    """Disjoint sorted blocks of one interval union with their prefix lengths, for O(log n) queries."""

    starts: np.ndarray
    ends: np.ndarray
    prefix: np.ndarray

    @classmethod
    def of(cls, starts, ends) -> "Coverage":
        bs, be = union(starts, ends)
        return cls(bs, be, np.concatenate(([0.0], np.cumsum(be - bs))))

    def before(self, t) -> np.ndarray:
        """Covered length in (-inf, t) for each t."""
        t = np.asarray(t, dtype=np.float64)
        if len(self.starts) == 0:
            return np.zeros_like(t)
        k = np.searchsorted(self.starts, t, side="right")
        last = np.clip(k - 1, 0, None)
        partial = np.where(k > 0, np.clip(np.minimum(t, self.ends[last]) - self.starts[last], 0.0, None), 0.0)
        return np.where(k > 0, self.prefix[last], 0.0) + partial

    def within(self, a, b) -> np.ndarray:
        """Covered length of each [a, b)."""
        return np.maximum(self.before(b) - self.before(a), 0.0)

    def covers(self, t) -> np.ndarray:
        """Whether each time ``t`` lies inside a block."""
        return covers(self.starts, self.ends, t)

    def gaps(self, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
        """The blocks of [start, end) that no block covers (the complement inside the window)."""
        lo = np.searchsorted(self.ends, start, side="right")
        hi = np.searchsorted(self.starts, end, side="left")
        bs, be = self.starts[lo:hi], self.ends[lo:hi]
        gs = np.concatenate(([start], np.minimum(be, end)))
        ge = np.concatenate((np.maximum(bs, start), [end]))
        keep = ge > gs
        return gs[keep], ge[keep]
