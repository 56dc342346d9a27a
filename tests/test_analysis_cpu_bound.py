"""cpu_bound: exact numbers on synthetic traces, and per-step numbers of real traces checked
against an independent reading of the raw JSON."""
import gzip
import json

import pytest

from perfkit.analysis.step.cpu_bound import VERDICTS, cpu_bound
from perfkit.analysis.step.whatif import whatif
from perfkit.trace import load_trace

import compile_traces
from conftest import shared_trace
from tracebuilder import TraceBuilder

NW0 = "kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz"
NW4 = "kineto_v100_resnet50_dataloader_nw4.pt.trace.json.gz"
CPU_ONLY = "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def build(tmp_path, builder, name="t.json"):
    return load_trace(builder.write(tmp_path / name), use_cache=False)


# --- synthetic: exact expectations ---------------------------------------------------------------

@pytest.fixture
def small(tmp_path):
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.cpu_op("aten::linear", 100, 300)
    b.cpu_op("aten::addmm", 120, 200)
    b.launch("gemm", 150, 20, gpu_ts=200, gpu_dur=100)
    b.cpu_op("aten::relu", 500, 50)
    b.launch("relu_kernel", 510, 10, gpu_ts=560, gpu_dur=5)
    b.cpu_op("aten::linear", 600, 100, tid=2000)
    return cpu_bound(build(tmp_path, b))


def test_self_time_subtracts_children_on_the_same_thread_only(small):
    ops = small.ops.set_index("name")
    assert ops.at["aten::linear", "count"] == 2
    assert ops.at["aten::linear", "total_us"] == 400
    assert ops.at["aten::linear", "self_us"] == 100 + 100  # 300 - addmm 200 on tid 1000; 100 alone on tid 2000
    assert ops.at["aten::addmm", "self_us"] == 200 - 20
    assert ops.at["aten::relu", "self_us"] == 50 - 10
    assert ops.at["cudaLaunchKernel", "self_us"] == 30 and ops.at["cudaLaunchKernel", "count"] == 2
    assert "ProfilerStep#1" not in ops.index
    # inclusive time as a share of host busy time: union of work per thread = 300 + 50 (tid 1000) + 100 (tid 2000)
    assert ops.at["aten::linear", "total_pct"] == pytest.approx(100 * 400 / 450)
    assert small.ops["self_pct"].sum() == pytest.approx(100.0)


def test_busy_idle_ratio_launches_and_queue_delay(small):
    step = small.steps.iloc[0]
    assert step["wall_us"] == 1000
    assert step["gpu_busy_us"] == 105
    assert step["gpu_busy_pct"] == pytest.approx(10.5) and step["gpu_idle_pct"] == pytest.approx(89.5)
    assert step["host_busy_us"] == 450  # union over threads: [100,400) + [500,550) + [600,700)
    assert step["cpu_gpu_ratio"] == pytest.approx(450 / 105)
    assert step["launches"] == 2 and step["launch_us"] == 30 and step["queue_delay_us"] == 50
    assert small.overall["median_queue_delay_us"] == 50
    # The share rules: 2 launches, so launching is not what the GPU waits for. Replayed, the 180 us aten::addmm that
    # issues the GEMM is host overhead a CUDA graph removes (32% of the step): the saving decides.
    assert small.evidence["share_verdict"] == "host-compute-bound"
    assert small.verdict == "launch-bound" and small.evidence["decided_by"] == "replay"


def test_gpu_busy_is_clipped_to_each_step_and_unions_overlaps(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.step(1, 100, 100)
    b.kernel("k", 50, 100)                    # 50 us in each step
    b.gpu("gpu_memset", "Memset (Device)", 60, 10)  # inside the kernel: adds nothing
    b.gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 180, 10, stream=8, bytes=64)
    steps = cpu_bound(build(tmp_path, b)).steps
    assert steps["gpu_busy_us"].tolist() == [50, 60]
    assert steps["step"].tolist() == [0, 1]


def test_launch_count_covers_runtime_driver_and_graph_launches(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("a", 10, 5, 20, 5)
    b.launch("triton_poi_x", 30, 5, 40, 5, launch_name="cuLaunchKernel", cat="cuda_driver")
    b.runtime("cudaGraphLaunch", 50, 5)
    b.memcpy("HtoD", "Pinned", 70, 5, 80, 5, 1024)
    b.runtime("cudaStreamIsCapturing", 90, 1)
    r = cpu_bound(build(tmp_path, b))
    assert r.steps["launches"].tolist() == [3]
    assert r.overall["launches_per_step"] == 3


def scenario(tmp_path, busy, loader, sync, name="s.json"):
    """One 1000 us step: DataLoader for loader*1000 us, then a stream sync for sync*1000 us, GPU busy
    for the last busy*1000 us, and a few host ops in between."""
    b = TraceBuilder()
    b.step(0, 0, 1000)
    if loader:
        b.dataloader(0, loader * 1000)
    if sync:
        b.sync("cudaStreamSynchronize", loader * 1000, sync * 1000)
    b.cpu_op("aten::add", 900, 10)
    b.kernel("k", 1000 - busy * 1000, busy * 1000)
    return build(tmp_path, b, name)


@pytest.mark.parametrize("busy, loader, sync, verdict", [
    (0.85, 0, 0, "GPU-bound"),
    (0.80, 0, 0, "GPU-bound"),            # threshold is inclusive
    (0.79, 0, 0, "host-compute-bound"),  # no launches: the idle host, not launching, is the cause
    (0.30, 0.30, 0, "input-bound"),
    (0.30, 0.09, 0, "host-compute-bound"),  # below the 10% input share
    (0.30, 0, 0.20, "sync-bound"),
    (0.30, 0.15, 0.20, "sync-bound"),     # sync share larger than the loader share
    (0.30, 0.20, 0.15, "input-bound"),
    (0.85, 0.30, 0.30, "GPU-bound"),      # a busy GPU wins over host-side causes
])
def test_verdict_thresholds(tmp_path, busy, loader, sync, verdict):
    r = cpu_bound(scenario(tmp_path, busy, loader, sync))
    assert r.verdict == verdict
    assert r.steps["verdict"].tolist() == [verdict]
    assert r.evidence["threshold_gpu_bound_busy"] == 0.80
    assert r.evidence["gpu_busy_share"] == pytest.approx(busy)
    assert r.evidence["dataloader_share"] == pytest.approx(loader)
    assert r.evidence["sync_share"] == pytest.approx(sync)
    finding = next(f for f in r.findings if f.title.startswith(verdict))
    assert finding.threshold and not any(k.startswith("threshold_") for k in finding.evidence)
    # severity: info when GPU-bound, high under torch-tb-profiler's 50% "low utilization", else medium
    assert finding.severity == ("info" if verdict == "GPU-bound" else "high" if busy < 0.5 else "medium")


def test_thresholds_are_knobs(tmp_path):
    trace = scenario(tmp_path, 0.85, 0.3, 0)
    assert cpu_bound(trace).verdict == "GPU-bound"
    assert cpu_bound(trace, gpu_bound_busy=0.9).verdict == "input-bound"
    assert cpu_bound(trace, gpu_bound_busy=0.9, input_share=0.5).verdict == "host-compute-bound"


def test_tiny_kernel_share_follows_the_knob(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    for i, dur in enumerate((2, 5, 9, 30)):
        b.kernel(f"k{i}", 100 * i, dur)
    trace = build(tmp_path, b)
    assert cpu_bound(trace).steps["tiny_kernel_pct"].tolist() == [75.0]
    assert cpu_bound(trace, tiny_kernel_us=5).steps["tiny_kernels"].tolist() == [1]


def test_annotations_copy_ops_and_dataloader_time(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.dataloader(0, 90)
    b.annotation("## train/sample ##", 100, 50)
    b.annotation("## train/sample ##", 300, 30)
    b.cpu_op("aten::to", 400, 100)
    b.cpu_op("aten::_to_copy", 405, 90)
    b.cpu_op("aten::copy_", 410, 80)
    b.memcpy("HtoD", "Pageable", 420, 20, 450, 10, 4096)
    r = cpu_bound(build(tmp_path, b))
    ann = r.annotations.set_index("name")
    assert ann.at["## train/sample ##", "count"] == 2 and ann.at["## train/sample ##", "total_us"] == 80
    assert "ProfilerStep#0" not in ann.index
    copies = r.copy_ops.set_index("name")
    assert copies["count"].to_dict() == {"aten::to": 1, "aten::_to_copy": 1, "aten::copy_": 1}
    assert copies.at["aten::copy_", "self_us"] == 80 - 20
    assert r.steps["dataloader_us"].tolist() == [90]


def test_trace_without_gpu_events_warns_and_uses_host_time(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.dataloader(0, 600)
    b.cpu_op("aten::add", 700, 10)
    r = cpu_bound(build(tmp_path, b))
    assert not r.has_gpu and r.verdict == "input-bound"
    assert next(f for f in r.findings if f.title.startswith("input-bound")).severity == "medium"
    assert any("no GPU events" in w and "ProfilerActivity.CUDA" in w for w in r.warnings)
    assert "no GPU events" in repr(r)


def test_trace_without_steps_warns(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::add", 0, 10)
    b.launch("k", 2, 3, 10, 40)
    r = cpu_bound(build(tmp_path, b))
    assert len(r.steps) == 1 and r.steps["wall_us"].iloc[0] == 50
    assert any("prof.step()" in w for w in r.warnings)


def test_html_escapes_trace_names_and_repr_is_short(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.cpu_op("<script>alert(1)</script>", 10, 10)
    r = cpu_bound(build(tmp_path, b))
    html = r._repr_html_()
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert len(repr(r)) < 200 and r.verdict in repr(r)
    assert r.to_frame() is not r.steps and list(r.to_frame()["step"]) == [0]
    json.dumps(r.to_json(), allow_nan=False)


# --- real traces against the raw JSON ------------------------------------------------------------

def raw_complete(path):
    return [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]


def raw_step_numbers(events):
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if str(e["name"]).startswith("ProfilerStep#"))
    loaders, launches, gpu = [], [], []
    for s, t in steps:
        loaders.append(sum(e["dur"] for e in events if e["name"].startswith("enumerate(DataLoader)")
                           and s <= e["ts"] < t))
        launches.append(sum(1 for e in events if e["name"] == "cudaLaunchKernel" and s <= e["ts"] < t))
        gpu.append(_union_inside([(e["ts"], e["ts"] + e["dur"]) for e in events
                                  if e.get("cat") in ("Kernel", "Memcpy", "Memset")], s, t))
    return {"dataloader_us": loaders, "launches": launches, "gpu_busy_us": gpu}


def _union_inside(intervals, lo, hi):
    clipped = sorted((max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi)
    total, end = 0.0, lo
    for a, b in clipped:
        if b > end:
            total += b - max(a, end)
            end = b
    return total


@pytest.fixture(scope="module")
def resnet():
    out = {}
    for key, name in (("nw0", NW0), ("nw4", NW4)):
        path = shared_trace(name)
        out[key] = (cpu_bound(load_trace(path, use_cache=False)), raw_complete(path))
    return out


@pytest.mark.parametrize("key", ["nw0", "nw4"])
def test_per_step_numbers_match_raw_json(resnet, key):
    result, events = resnet[key]
    expected = raw_step_numbers(events)
    assert result.steps["dataloader_us"].tolist() == pytest.approx(expected["dataloader_us"])
    assert result.steps["launches"].tolist() == expected["launches"]
    assert result.steps["gpu_busy_us"].tolist() == pytest.approx(expected["gpu_busy_us"])
    ops = result.ops.set_index("name")
    for name in ("aten::cudnn_convolution", "cudaLaunchKernel", "aten::copy_"):
        mine = [e["dur"] for e in events if e["name"] == name]
        assert ops.at[name, "count"] == len(mine)
        assert ops.at[name, "total_us"] == pytest.approx(sum(mine))


def test_num_workers_0_is_input_bound_and_4_is_not(resnet):
    nw0, nw4 = resnet["nw0"][0], resnet["nw4"][0]
    assert nw0.verdict == "input-bound"
    assert nw4.verdict != "input-bound" and nw4.verdict in VERDICTS
    per_step = [r.overall["dataloader_us"] / r.overall["steps"] for r in (nw0, nw4)]
    assert per_step[0] > 10 * per_step[1]
    assert nw0.evidence["dataloader_share"] >= 0.10 > nw4.evidence["dataloader_share"]
    assert any(f.title.startswith("input-bound") and "num_workers" in f.fix for f in nw0.findings)


def test_cpu_only_trace_gives_warning_not_exception():
    r = cpu_bound(load_trace(shared_trace(CPU_ONLY), use_cache=False))
    assert r.verdict in VERDICTS and not r.has_gpu
    assert any("ProfilerActivity.CUDA" in w for w in r.warnings)
    assert r.steps["gpu_busy_us"].sum() == 0


# --- compiling, host ahead, CPU-only ------------------------------------------------------------

def test_compile_dominated_step_is_compiling_with_the_union_of_compile_spans(tmp_path):
    r = cpu_bound(build(tmp_path, compile_traces.compile_dominated()))
    assert r.verdict == "compiling" and r.steps["verdict"].tolist() == ["compiling"]
    step = r.steps.iloc[0]
    assert step["compile_us"] == compile_traces.COMPILE_US  # union: nested phases and ties counted once
    assert r.evidence["compile_share"] == pytest.approx(1.42 / 1.73)
    # the layers are disjoint and add up to the host's busy time
    assert step["host_busy_us"] == pytest.approx(step["dataloader_us"] + step["compile_us"] + step["sync_us"]
                                                 + step["host_other_us"])
    verdict = r.findings[0]
    assert verdict.severity == "high" and verdict.title.startswith("compiling: torch.compile compiled for 1.42 s of 1.73 s")
    assert "warm" in verdict.fix and "CUDA graphs" not in verdict.fix and "use torch.compile" not in verdict.fix
    assert verdict.threshold.startswith("skip_compile saves most: 82% of the steps' time")
    assert r.compile["compile_s"] == pytest.approx(1.42) and r.compile["compiled_regions"] == 1


def test_run_time_wrappers_of_compiled_code_are_not_compile_work(tmp_path):
    r = cpu_bound(build(tmp_path, compile_traces.runtime_only()))
    assert r.steps["compile_us"].tolist() == [0] and r.verdict != "compiling"
    assert r.compile == {"kernels": 5, "triton_kernels": 4, "triton_time_share": pytest.approx(200 / 350),
                         "compile_s": 0.0, "compiled_regions": 2}
    # 5 launches in a 10 ms step: the host's time is not launching
    assert r.verdict == "host-compute-bound" and "CUDA graphs" in r.findings[0].fix
    b = compile_traces.runtime_only()
    for i in range(20):  # the same compiled model launching 30 more small kernels: launch-bound
        b.launch(f"triton_poi_fused_{i}", 1_000 + 100 * i, 90, 1_100 + 100 * i, 5)
    for i in range(10):  # ... 10 of them after the resume function, which launches nothing for 4 ms
        b.launch(f"triton_poi_fused_late_{i}", 8_000 + 100 * i, 90, 8_100 + 100 * i, 5)
    r = cpu_bound(build(tmp_path, b, "many.json"))
    assert r.verdict == "launch-bound"
    fix = r.findings[0].fix
    assert "already runs torch.compile'd code" in fix and "reduce-overhead" in fix


def test_recompiling_in_later_steps_is_said(tmp_path):
    b = TraceBuilder()
    for s in range(3):
        b.step(s, s * 1000, 1000)
        b.launch("k", s * 1000 + 10, 5, s * 1000 + 20, 100)
        if s:
            b.cpu_op("aten::index", s * 1000 + 100, 850)
    b.cpu_op("_compile.compile_inner (dynamo_timed)", 100, 800)
    b.cpu_op("_compile.compile_inner (dynamo_timed)", 2000, 50)  # before the op: a recompile
    r = cpu_bound(build(tmp_path, b))
    # aten::index computes on the host for 850 us per step and launches nothing: host compute, not launching
    assert r.steps["verdict"].tolist() == ["compiling", "host-compute-bound", "host-compute-bound"]
    assert r.steps["compile_us"].tolist() == [800, 0, 50]
    assert r.verdict == "host-compute-bound"  # 850 of 3000 us: less than the host's other 1,700 us
    note = next(f for f in r.findings if f.title.startswith("torch.compile compiled for"))
    assert "2 of 3 step(s)" in note.title and "TORCH_LOGS=recompiles" in note.fix


def host_ahead(tmp_path, delay_us, name="t.json", wake_us=600):
    """A 10 ms step: the host launches 5 kernels of 300 us in its first 0.5 ms, then blocks in a
    cudaStreamSynchronize until the GPU is done and ``wake_us`` more; each kernel starts ``delay_us`` after its
    launch."""
    b = TraceBuilder()
    b.step(0, 0, 10_000)
    for i in range(5):
        b.launch(f"k{i}", 100 * i, 10, 100 * i + delay_us + 300 * i, 300)
    b.sync("cudaStreamSynchronize", 600, delay_us + 1_300 + wake_us)
    b.cpu_op("aten::add", 9_000, 10)
    return build(tmp_path, b, name)


def test_host_far_ahead_of_the_gpu_is_gpu_bound_not_sync_bound(tmp_path):
    trace = host_ahead(tmp_path, delay_us=6_000, wake_us=20)
    r = cpu_bound(trace)
    # the sync waits 7.3 ms for work queued behind something the trace does not show: removing it saves its own
    # 20 us, not the wait (the GPU work ends when it did)
    assert whatif(trace).prediction("remove_syncs").saving_us < 100 and r.evidence["decided_by"] == "replay"
    assert r.steps["queue_delay_us"].tolist() == [6_000 + 600]  # kernel i waits 6000 + 300 i us: median i=2
    assert r.evidence["sync_share"] >= 0.10 and r.evidence["gpu_busy_share"] < 0.80
    assert r.verdict == "GPU-bound (host ahead)"
    f = r.findings[0]
    assert f.title.startswith("GPU-bound (host ahead): kernels start a median 6.6 ms after their launch (66% of a step)")
    assert "will not shorten the step" in f.fix and "waiting for that queue" in f.fix
    assert "Remove host-device syncs" not in f.fix


def test_a_short_queue_keeps_the_sync_bound_verdict(tmp_path):
    r = cpu_bound(host_ahead(tmp_path, delay_us=20))
    assert r.verdict == "sync-bound" and r.evidence["share_verdict"] == "sync-bound"
    assert r.evidence["queue_delay_us"] == 620 and r.evidence["queue_delay_share"] == pytest.approx(0.062)


def test_launch_latency_in_a_tiny_step_is_not_a_queue(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 200)
    b.launch("k", 0, 5, 30, 20)                  # 30 us after launch: 15% of the step, under 100 us
    b.sync("cudaStreamSynchronize", 10, 45)
    r = cpu_bound(build(tmp_path, b))
    assert r.evidence["queue_delay_share"] == pytest.approx(0.15) and r.evidence["share_verdict"] == "sync-bound"


def test_cpu_only_trace_gets_host_side_advice(tmp_path):
    b = TraceBuilder()
    for s in range(3):
        b.step(s, s * 1000, 1000)
        b.cpu_op("aten::addmm", s * 1000 + 10, 600)
        b.cpu_op("aten::item", s * 1000 + 700, 5)
    r = cpu_bound(build(tmp_path, b))
    assert r.verdict == "CPU-only trace" and set(r.steps["verdict"]) == {"CPU-only trace"}
    f = r.findings[0]
    assert f.title == "CPU-only trace: no GPU activity; host busy 60% of 3 step(s)"
    assert "aten::addmm" in f.fix and "CUDA graphs" not in f.fix and "launch" not in f.fix
    assert "ProfilerActivity.CUDA" in f.fix


def test_real_cpu_only_trace_is_cpu_only():
    r = cpu_bound(load_trace(shared_trace(CPU_ONLY), use_cache=False))
    assert r.verdict == "CPU-only trace"
    assert "gloo:all_reduce" in r.findings[0].fix  # where its time goes: the longest record_function range


@pytest.mark.parametrize("name, verdict", [
    ("tracelens_h100_timesformer_infer_bf16.json.gz", "host-compute-bound"),    # was GPU-bound (host ahead)
    ("tracelens_mi300x_vllm_piecewise_graph_exec.json.gz", "GPU-bound (host ahead)"),  # was launch-bound
    ("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz", "input-bound"),
    ("param_v100_dlrm_rank1.pt.trace.json.gz", "communication-bound"),  # was sync-bound
])
def test_real_trace_verdicts(name, verdict):
    """Hand-checked: TimeSformer's GPU idles 218 ms of 383 ms in one gap while the host runs Python
    (run_on_input) that launches nothing; once started, its kernels idle 1.6 ms and wait a median
    62.7 ms in the queue, and the host's 126 ms in a blocking aten::to copy is it waiting for that
    queue. DLRM rank 1's syncs wait on NCCL kernels that wait 11 ms for peers (perfkit ranks)."""
    r = cpu_bound(load_trace(shared_trace(name), use_cache=False))
    assert r.verdict == verdict
