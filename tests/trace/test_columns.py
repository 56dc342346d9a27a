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


def test_an_event_without_args_loads_as_one_with_empty_args(tmp_path):
    """No ``args``, ``"args": null`` and ``"args": {}`` are the same event (no ids, no sizes)."""
    loaded = []
    for i, args in enumerate(["", ', "args": null', ', "args": {}']):
        path = tmp_path / f"t{i}.json"
        path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, '
                        '"ts": 10, "dur": 5, "args": {"External id": 7}}, {"ph": "X", "cat": "cpu_op", "name": '
                        f'"aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 5{args}}}]}}')
        loaded.append(load_trace(path, use_cache=False))
    events = loaded[0].events
    assert list(events["external_id"]) == [7, -1] and list(events["bytes"]) == [-1, -1]
    for other in loaded[1:]:
        assert other.events.drop(columns="file_id").equals(events.drop(columns="file_id"))
        assert [w.split(": ", 1)[1] for w in other.warnings] == [w.split(": ", 1)[1] for w in loaded[0].warnings]
