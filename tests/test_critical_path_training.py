"""critical_path on training steps: the dependencies HTA's model and perfkit's walk part on, each
with a synthetic trace (exact path) and the real traces behind it (DLRM V100 rank 0, checked against
a count from the raw events)."""
import gzip
import json

import pytest

from perfkit.analysis.critical_path import KINDS, critical_path
from perfkit.trace import load_trace

from conftest import shared_trace
from tracebuilder import TraceBuilder

DLRM0 = "param_v100_dlrm_rank0.pt.trace.json.gz"


def kinds(result, step=0) -> dict:
    row = result.steps.set_index("step").loc[step]
    return {k: row[f"{k}_us"] for k in KINDS if row[f"{k}_us"]}


def test_a_blocking_copy_held_by_a_collective_on_another_stream_waits_for_the_collective(tmp_path):
    """A device-to-host copy from pageable memory (call 300-800) on stream 7 that starts at 790,
    when an all-reduce on stream 20 (launched 100-110, GPU 110-790) ends: the thread waits for the
    collective (cudaStreamWaitEvent), not for the copy's staging."""
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.cpu_op("c10d::allreduce_", 90, 30)
    b.launch("ncclKernel_AllReduce_RING_LL_Sum_float", 100, 10, 110, 680, stream=20)
    b.cpu_op("aten::mul", 120, 180)
    b.memcpy("DtoH", "Pageable", 300, 500, 790, 5, 1 << 10)    # GPU copy 790-795, call returns at 800
    b.cpu_op("aten::add", 800, 200)
    r = critical_path(load_trace(b.write(tmp_path / "c.json")))
    # 800-1000 host; 795-800 the call's wake-up; 790-795 copy; 110-790 the all-reduce; 100-110 its
    # launch; 90-100 host. The host work 120-300 ran beside the collective: off the path.
    assert kinds(r) == {"host": 210.0, "sync_wait": 5.0, "memcpy": 5.0, "comm": 680.0, "launch": 10.0,
                        "idle": 90.0}
