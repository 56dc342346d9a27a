"""The interval union every analysis builds on, against a plain sweep over the sorted intervals."""
import math

import numpy as np
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.trace.intervals import length, length_by, union


def _sweep(starts, ends) -> list[tuple[float, float]]:
    blocks = []
    for s, e in sorted((s, e) for s, e in zip(starts, ends) if e > s):  # NaN and empty intervals drop out
        if blocks and s <= blocks[-1][1]:
            blocks[-1] = (blocks[-1][0], max(blocks[-1][1], e))
        else:
            blocks.append((s, e))
    return blocks


@pytest.mark.parametrize("seed", range(4))
def test_union_equals_a_sweep_in_start_order_or_not(seed):
    """Starts in order (a thread's events: the sort is skipped) or not, touching, nested, empty
    and NaN intervals."""
    rng = np.random.default_rng(seed)
    for _ in range(500):
        n = int(rng.integers(0, 40))
        starts = np.round(rng.random(n) * 20, 1)
        if rng.random() < 0.5:
            starts = np.sort(starts)
        ends = starts + np.round(rng.random(n) * 5 - 0.5, 1)
        if n and rng.random() < 0.2:
            ends[rng.integers(0, n)] = math.nan
        got_s, got_e = union(starts, ends)
        assert list(zip(got_s.tolist(), got_e.tolist())) == _sweep(starts.tolist(), ends.tolist())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 200), st.integers(-5, 60)), max_size=60))
def test_length_by_is_length_of_each_group(rows):
    """Issue 54: one sort for every kernel name's covered time (a length per name took 69 s on 200,000 names)."""
    groups = np.array([g for g, _, _ in rows], dtype=np.int64)
    starts = np.array([s for _, s, _ in rows], dtype=float)
    ends = starts + np.array([d for _, _, d in rows], dtype=float)
    got = length_by(groups, starts, ends, 6)
    want = [length(starts[groups == g], ends[groups == g]) for g in range(6)]
    assert got.tolist() == want
