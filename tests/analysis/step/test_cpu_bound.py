"""``perfkit.analysis.step.cpu_bound``'s own rules, on small tables: the partial GPU recording warning."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.step.cpu_bound import PARTIAL_GPU_SHARE, PARTIAL_MIN_LAUNCHES, partial_gpu_warning


def _launches(n: int, unmatched: int) -> pd.DataFrame:
    delay = np.full(n, 5.0)
    delay[:unmatched] = np.nan
    return pd.DataFrame({"queue_delay_us": delay})


@pytest.mark.parametrize("n, unmatched, warns", [
    (530, 378, True),   # the trace the rule comes from
    (200, 20, True),    # at PARTIAL_GPU_SHARE
    (200, 19, False),   # under it
    (20, 10, True),     # PARTIAL_MIN_LAUNCHES unmatched
    (18, 9, False),     # fewer: a handful of launches say nothing
])
def test_partial_gpu_recording_table(n, unmatched, warns):
    assert PARTIAL_GPU_SHARE == 0.10 and PARTIAL_MIN_LAUNCHES == 10
    got = partial_gpu_warning(_launches(n, unmatched), has_gpu=True)
    assert bool(got) == warns
    if warns:
        assert got[0].startswith(f"the GPU recording is partial: {unmatched:,} of {n:,} launch calls")
    assert partial_gpu_warning(_launches(n, unmatched), has_gpu=False) == ()
