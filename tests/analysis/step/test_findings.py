"""The verdict's text (``perfkit.analysis.step.findings``) reads its thresholds from the evidence, never its own."""
from __future__ import annotations

import pytest

from perfkit.analysis.step.findings import _title


def _evidence(busy: float, sync: float, gpu_bound_busy: float, sync_share: float) -> dict:
    return {"comm_exposed_share": 0.4, "gpu_busy_share": busy, "sync_share": sync,
            "threshold_gpu_bound_busy": gpu_bound_busy, "threshold_sync_share": sync_share}


_OVERALL = {"steps": 1, "comm_exposed_us": 4000.0, "comm_exposed_warmup_us": 0.0, "wall_us": 10_000.0,
            "warmup_us": 0.0, "gpu_busy_pct": 85.0}


@pytest.mark.parametrize("gpu_bound_busy, sync_share, mentions", [
    (0.90, 0.10, True),    # busy 85% is under a raised GPU-bound line: the host's waits are named
    (0.80, 0.10, False),   # over the default line: the GPU is busy, nothing to say of waits
    (0.90, 0.25, False),   # the waits (20%) under a raised sync line
])
def test_the_communication_title_follows_the_thresholds_in_force(gpu_bound_busy, sync_share, mentions):
    title = _title("communication-bound", _evidence(0.85, 0.20, gpu_bound_busy, sync_share), _OVERALL, {})
    assert ("host blocked in syncs 20%" in title) == mentions


def test_exposed_collectives_are_quoted_on_the_shares_time_base():
    overall = dict(_OVERALL, comm_exposed_us=6_000.0, comm_exposed_warmup_us=2_000.0, warmup_us=5_000.0)
    title = _title("communication-bound", _evidence(0.85, 0.0, 0.8, 0.1), overall, {})
    assert "take 4.00 ms of 5.00 ms" in title  # not 6 ms of 5 ms (120%)
