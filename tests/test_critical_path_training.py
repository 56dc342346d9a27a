"""critical_path on training steps: the dependencies HTA's model and perfkit's walk part on, each
with a synthetic trace (exact path) and the real traces behind it (DLRM V100 rank 0, checked against
a count from the raw events)."""
import gzip
import json

import pytest

from perfkit.analysis.step.critical_path import KINDS, critical_path
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


# --- DLRM V100 rank 0, ProfilerStep#10, counted from the raw events --------------------------------

def _raw_step(name: str):
    with gzip.open(shared_trace(name), "rt") as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    step = min((e for e in events if str(e.get("name", "")).startswith("ProfilerStep")), key=lambda e: e["ts"])
    return events, step


def _union(spans) -> float:
    total, cur = 0.0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            total += 0.0 if cur is None else cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (0.0 if cur is None else cur[1] - cur[0])


@pytest.fixture(scope="module")
def dlrm0():
    events, step = _raw_step(DLRM0)
    path = critical_path(load_trace(shared_trace(DLRM0)), annotation="ProfilerStep")
    return events, step, path


def test_dlrm_the_host_waits_for_both_all_to_alls_of_the_forward(dlrm0):
    """The main thread blocks twice for over 0.5 ms (cudaStreamSynchronize, then a device-to-host
    cudaMemcpyAsync whose copy waits behind an all-to-all on the NCCL stream): each wait ends when a
    SendRecv kernel ends, and the path holds those two kernels, whole, as comm."""
    events, step, path = dlrm0
    t0, t1, main = step["ts"], step["ts"] + step["dur"], step["tid"]
    waits = [e for e in events if e.get("cat") == "cuda_runtime" and e["tid"] == main and e["dur"] > 500
             and t0 <= e["ts"] < t1]
    nccl = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")]
    waited = []
    for call in waits:   # the collective that ended last before the call returned
        done = [k for k in nccl if call["ts"] < k["ts"] + k["dur"] <= call["ts"] + call["dur"]]
        waited.append(max(done, key=lambda k: k["ts"] + k["dur"]))
    assert [w["name"].split("(")[0] for w in waited] == ["ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"] * 2
    row = path.steps.iloc[0]
    assert row["comm_us"] == pytest.approx(sum(k["dur"] for k in waited))
    comm = path.segments[(path.segments["step"] == 0) & (path.segments["kind"] == "comm")]
    assert sorted(comm["end_us"] - comm["start_us"]) == sorted(float(k["dur"]) for k in waited)


def test_dlrm_the_whole_backward_is_on_the_path_and_the_step_ends_on_the_host(dlrm0):
    """Backward runs on the autograd engine's thread while the main thread has no ops of its own
    (HTA's path, which does not link threads, holds only this stretch): the path holds the union of
    that thread's ops in the step; the step ends on the main thread's optimizer, no GPU work running."""
    events, step, path = dlrm0
    t0, t1, main = step["ts"], step["ts"] + step["dur"], step["tid"]
    other = [e for e in events if e.get("cat") in ("cpu_op", "cuda_runtime") and e["tid"] != main
             and t0 <= e["ts"] < t1]
    assert len({e["tid"] for e in other}) == 1
    seg = path.segments[path.segments["step"] == 0]
    a0, a1 = min(e["ts"] for e in other), max(e["ts"] + e["dur"] for e in other)
    # Over the backward, the path is its ops (where it waits for two small copies, on stream 7 instead);
    # the gaps between ops are idle, as in HTA (zero-weight dependency edges).
    during = seg[(seg["start_us"] >= a0) & (seg["end_us"] <= a1) & (seg["kind"] != "idle")]
    raw = _union((e["ts"], e["ts"] + e["dur"]) for e in other)
    assert (during["end_us"] - during["start_us"]).sum() == pytest.approx(raw, abs=2.0)
    assert set(during["lane"]) <= {str(other[0]["tid"]), "GPU 0 stream 7"}
    gpu_end = max(e["ts"] + e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
                  and e["ts"] < t1)
    assert gpu_end < t1 and seg.iloc[0]["lane"] == str(main)
