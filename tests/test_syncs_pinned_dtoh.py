"""syncs: a device-to-host copy into pinned memory blocks the host when it is launched by the
synchronous runtime call (``cudaMemcpy``), and is then a ``memcpy_dtoh`` sync point like a pageable
one; the same copy launched with ``cudaMemcpyAsync`` returns at once and is no sync point."""
import pytest

from perfkit.analysis.sync_points.find import syncs
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def copy_to_pinned(b, ts, launch_name):
    """aten::copy_ into a pinned host tensor: one DtoH copy launched by ``launch_name``."""
    b.cpu_op("aten::copy_", ts, 60)
    b.memcpy("DtoH", "Pinned", ts + 2, 50, ts + 5, 40, 4096, launch_name=launch_name)


@pytest.fixture
def result(tmp_path):
    b = TraceBuilder(with_stack=False)
    b.step(0, 0, 1000)
    copy_to_pinned(b, 100, "cudaMemcpy")        # synchronous: the host waits for the copy
    copy_to_pinned(b, 500, "cudaMemcpyAsync")   # asynchronous into pinned memory: returns at once
    return syncs(load_trace(b.write(tmp_path / "pinned.json"), use_cache=False))


def test_synchronous_copy_to_pinned_memory_is_a_blocking_dtoh_sync_point(result):
    points = result.sync_points
    assert len(points) == 1
    point = points.iloc[0]
    assert (point["kind"], point["call"], point["op"], point["gpu_confirmed"]) == (
        "memcpy_dtoh", "cudaMemcpy", "aten::copy_", True)
    assert point["blocked_us"] == 60   # the enclosing aten::copy_ waits for the whole copy


def test_asynchronous_copy_to_pinned_memory_is_not_counted(result):
    assert result.total["count"] == 1
    assert "cudaMemcpyAsync" not in set(result.sync_points["call"])
    assert result.to_json()["by_kind"] == {"memcpy_dtoh": {"count": 1, "blocked_us": 60.0, "per_step": 1.0}}
