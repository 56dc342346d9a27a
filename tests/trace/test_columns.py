"""``perfkit.trace.loader.columns``: a value no event can have is dropped and counted, not carried into figures."""
from __future__ import annotations

import pytest

from perfkit.limits import DUR_RANGE_US
from perfkit.trace import load_trace
from tracebuilder import TraceBuilder


@pytest.mark.parametrize("dur, kept", [(DUR_RANGE_US[1], True), (DUR_RANGE_US[1] + 1, False), (1e15, False)])
def test_an_event_longer_than_a_week_is_dropped_and_counted(tmp_path, dur, kept):
    b = TraceBuilder()
    b.step(0, 0, 3000)
    b.launch("gemm", 10, 5, gpu_ts=100, gpu_dur=50)
    b.kernel("broken", 200, dur)
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    assert ("broken" in set(trace.kernels()["name"].astype(str))) == kept
    assert any("'dur' is missing, not finite or outside" in w for w in trace.warnings) != kept
