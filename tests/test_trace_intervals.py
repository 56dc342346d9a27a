"""The interval union every analysis builds on, against a plain sweep over the sorted intervals."""
import math

import numpy as np
import pytest

from perfkit.trace.intervals import union


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
