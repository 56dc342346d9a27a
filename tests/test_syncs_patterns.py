"""syncs() on synthetic traces built from the patterns of real GPU traces held out of this repo:
an A100 training step full of CPU-tensor .item() calls at whole-microsecond ties, an H100 OWLv2
inference run and its MI300X (ROCm) twin, and a 20 MiB pageable host-to-device copy (with its
pinned counterpart), whose blocking time cpu_bound must see too."""
import pytest

from perfkit.analysis.step.cpu_bound import cpu_bound
from perfkit.analysis.sync_points.find import syncs
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder

STEP_US = 100_000


def cpu_items(b, t, n_zero, n_long, *, after_select=False):
    """``n_zero`` 0 us aten::item calls at microsecond ``t`` (each with its 0 us _local_scalar_dense at
    External id + 1, all tied), then ``n_long`` 2 us items whose child starts at the item's last
    microsecond. Returns the next free time."""
    if after_select:
        b.cpu_op("aten::select", t - 2, 2)
        b.cpu_op("aten::as_strided", t - 1, 0)
    for _ in range(n_zero):
        b.cpu_op("aten::item", t, 0)
        b.cpu_op("aten::_local_scalar_dense", t, 0)
    t += 1
    for _ in range(n_long):
        b.cpu_op("aten::item", t, 2)
        b.cpu_op("aten::_local_scalar_dense", t + 2, 0)
        t += 3
    return t + 3


def blocking_to_cpu(b, t, *, rocm=False, memory="Pageable"):
    """``.cpu()``: aten::to -> _to_copy -> copy_ with a DtoH copy and the host wait; 40 us."""
    b.cpu_op("aten::to", t, 40)
    b.cpu_op("aten::_to_copy", t + 1, 38)
    b.cpu_op("aten::copy_", t + 3, 35)
    if rocm:
        b.memcpy("DtoH", "Host", t + 4, 30, t + 20, 2, 4096, launch_name="hipMemcpyWithStream")
    else:
        b.memcpy("DtoH", memory, t + 4, 5, t + 20, 2, 4096)
        b.sync("cudaStreamSynchronize", t + 10, 25, gpu_kind="Stream Sync")
    return t + 45


def a100_pattern() -> TraceBuilder:
    """945 aten::item on CPU tensors (513 of 0 us, tied with their child), 75 .cpu() copies whose
    cudaStreamSynchronize waits, 1 cudaDeviceSynchronize, over 5 steps."""
    b = TraceBuilder()
    zero_per_step = [103, 103, 103, 102, 102]
    for s in range(5):
        base = s * STEP_US
        b.step(s, base, STEP_US)
        t = base + 10
        for k in range(15):
            b.launch("ampere_sgemm", t, 5, gpu_ts=t + 20, gpu_dur=300)
            t = blocking_to_cpu(b, t + 10)
        zeros, longs = zero_per_step[s], 189 - zero_per_step[s]
        while zeros or longs:
            z, n = min(zeros, 3), min(longs, 4)
            t = cpu_items(b, t + 5, z, n, after_select=z % 2 == 1)
            zeros, longs = zeros - z, longs - n
    b.sync("cudaDeviceSynchronize", 5 * STEP_US - 500, 300, gpu_kind="Context Sync")
    return b


def test_a100_pattern_counts_76_sync_points_and_945_host_reads(tmp_path):
    b = a100_pattern()
    raw = [e for e in b.events if e.get("ph") == "X"]
    items = [e for e in raw if e["name"] == "aten::item"]
    assert len(items) == 945 and sum(e["dur"] == 0 for e in items) == 513
    r = syncs(load_trace(b.write(tmp_path / "a100.json"), use_cache=False))
    assert r.total["count"] == 76 and r.total["gpu_confirmed"] == 76
    assert r.by_kind.set_index("kind")["count"].to_dict() == {"memcpy_dtoh": 75, "device_sync": 1}
    assert r.total["host_scalar_reads"] == 945
    assert (r.host_reads["name"] == "aten::item").sum() == 945
    assert not (r.events["name"] == "aten::_local_scalar_dense").any()
    assert r.total["per_step"] == pytest.approx(76 / 5)
    assert r.sync_points.groupby("step").size().to_dict() == {0: 15, 1: 15, 2: 15, 3: 15, 4: 16}


# --- OWLv2 inference: H100 and MI300X --------------------------------------------------------------

USER, MODEL = "owl_infer.py(31): detect", "transformers/models/owlv2/modeling_owlv2.py(1421): box_predictor"


def owlv2_pattern(rocm: bool) -> TraceBuilder:
    """82 waits (38 GPU nonzero, 20 GPU .item(), 20 .to("cpu") in box_predictor, 2 pageable input
    copies, 2 device synchronizes) and 21 scalar reads of CPU tensors (20 nonzero, 1 item)."""
    rt = "hip" if rocm else "cuda"
    b = TraceBuilder(with_stack=True, gpu_name="AMD Instinct MI300X" if rocm else "NVIDIA H100 80GB HBM3")
    b.step(0, 0, 40_000)
    b.python(USER, 0, 40_000)
    t = 100
    for _ in range(2):                                   # pixel_values.to("cuda") from pageable memory
        b.cpu_op("aten::to", t, 900)
        b.cpu_op("aten::copy_", t + 2, 895)
        if rocm:
            b.memcpy("HtoD", "Host", t + 3, 880, t + 10, 860, 20 << 20, launch_name="hipMemcpyWithStream")
        else:
            b.memcpy("HtoD", "Pageable", t + 3, 870, t + 10, 860, 20 << 20)
        t += 1000
    for k in range(58):                                  # nonzero / .item() on GPU tensors
        name = "aten::nonzero" if k < 38 else "aten::item"
        b.cpu_op(name, t, 60)
        if name == "aten::item":
            b.cpu_op("aten::_local_scalar_dense", t + 1, 58)
        if rocm and name == "aten::item":
            b.memcpy("DtoH", "Host", t + 3, 50, t + 10, 1, 8, launch_name="hipMemcpyWithStream")
        else:
            b.memcpy("DtoH", "Host" if rocm else "Pinned", t + 3, 5, t + 10, 1, 8,
                     launch_name=f"{rt}MemcpyAsync")
            b.sync(f"{rt}StreamSynchronize", t + 9, 45)
        t += 70
    for _ in range(20):                                  # .to("cpu") inside the model file
        b.python(MODEL, t, 50)
        b.python("<built-in method to of Tensor object at 0x7f00>", t + 1, 46)
        blocking_to_cpu(b, t + 2, rocm=rocm)
        t += 60
    for k in range(21):                                  # CPU tensors: no device wait under them
        b.cpu_op("aten::nonzero" if k < 20 else "aten::item", t, 3)
        t += 5
    for _ in range(2):
        b.sync(f"{rt}DeviceSynchronize", t, 200)
        t += 300
    return b


@pytest.mark.parametrize("rocm", [False, True], ids=["h100", "mi300x"])
def test_owlv2_pattern_counts_82_and_leaves_out_cpu_tensor_reads(tmp_path, rocm):
    r = syncs(load_trace(owlv2_pattern(rocm).write(tmp_path / "owl.json"), use_cache=False))
    assert r.total["count"] == 82 and r.total["host_scalar_reads"] == 21
    reads = r.host_reads["name"].value_counts().to_dict()
    assert reads == {"aten::nonzero": 20, "aten::item": 1}
    kinds = r.by_kind.set_index("kind")["count"].to_dict()
    copy_in = "memcpy_sync" if rocm else "memcpy_htod_pageable"   # ROCm names its host memory "Host" only
    assert kinds == {"nonzero": 38, "item": 20, "memcpy_dtoh": 20, copy_in: 2, "device_sync": 2}


@pytest.mark.parametrize("rocm", [False, True], ids=["h100", "mi300x"])
def test_library_copy_site_shows_user_function_and_model_frame(tmp_path, rocm):
    r = syncs(load_trace(owlv2_pattern(rocm).write(tmp_path / "owl.json"), use_cache=False))
    site = next(s for s in r.to_json()["sites"] if s["kind"] == "memcpy_dtoh")
    assert (site["file"], site["line"], site["func"]) == ("owl_infer.py", 31, "detect")
    assert (site["inner_file"], site["inner_line"], site["inner_func"]) == (
        "transformers/models/owlv2/modeling_owlv2.py", 1421, "box_predictor")
    assert site["count"] == 20
    finding = next(f for f in r.findings if f.title.startswith("memcpy_dtoh"))
    assert ("function starting at owl_infer.py:31 (detect), via transformers/models/owlv2/modeling_owlv2.py:1421 "
            "(box_predictor)") in finding.title


def test_rocm_synchronous_copy_fix_names_hip_not_cuda(tmp_path):
    r = syncs(load_trace(owlv2_pattern(True).write(tmp_path / "owl.json"), use_cache=False))
    fix = next(f.fix for f in r.findings if f.title.startswith("memcpy_sync"))
    assert "hipMemcpyWithStream" in fix and "cudaMemcpy" not in fix
    assert not any("cudaMemcpy" in f.fix for f in r.findings)


# --- pageable vs pinned host-to-device copy ----------------------------------------------------------

def copy_steps(pinned: bool) -> TraceBuilder:
    """Three 2 ms steps, each copying 20 MiB to the GPU and launching 20 short kernels. Pageable: the
    cudaMemcpyAsync itself blocks 870 us. Pinned: it returns in 18 us and the host waits 850 us in
    cudaEventSynchronize before reusing the buffer."""
    b = TraceBuilder()
    for s in range(3):
        base = s * 2000
        b.step(s, base, 2000)
        b.cpu_op("aten::to", base + 10, 880 if not pinned else 25)
        b.cpu_op("aten::copy_", base + 12, 875 if not pinned else 20)
        b.memcpy("HtoD", "Pinned" if pinned else "Pageable", base + 14, 18 if pinned else 870, base + 20, 850,
                 20 << 20)
        t = base + 900
        if pinned:
            b.sync("cudaEventSynchronize", base + 40, 850, gpu_kind="Event Sync")
        for k in range(20):
            b.launch("elementwise_kernel", t, 4, gpu_ts=t + 30, gpu_dur=3)
            t += 5
    return b


def test_pageable_copy_blocks_the_host_in_syncs_and_cpu_bound(tmp_path):
    trace = load_trace(copy_steps(pinned=False).write(tmp_path / "pageable.json"), use_cache=False)
    r = syncs(trace)
    points = r.sync_points
    assert points["kind"].tolist() == ["memcpy_htod_pageable"] * 3
    assert points["call"].tolist() == ["cudaMemcpyAsync"] * 3
    assert (points["blocked_us"] >= 870).all() and r.total["blocked_us"] == 3 * 875   # not 3 x 18 us
    cpu = cpu_bound(trace)
    assert cpu.steps["sync_blocked_us"].tolist() == [870.0] * 3
    assert (cpu.steps["sync_us"] >= 870).all()
    assert cpu.verdict not in ("launch-bound", "host-compute-bound")


def test_pinned_copy_counts_its_wait_as_an_event_sync(tmp_path):
    trace = load_trace(copy_steps(pinned=True).write(tmp_path / "pinned.json"), use_cache=False)
    r = syncs(trace)
    assert r.by_kind.set_index("kind")["count"].to_dict() == {"event_sync": 3}
    assert r.total["blocked_us"] == 3 * 850
    assert cpu_bound(trace).steps["sync_blocked_us"].tolist() == [850.0] * 3
