"""The shapes of issue 48 the saving must get right, each rebuilt as a small synthetic trace from the traces where
a share threshold went the wrong way: the verdict, the fix, and the rule and number it turns on."""
from __future__ import annotations

import pytest

import perfkit
from perfkit.analysis.step.whatif import whatif
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder

MS = 1000.0


def _load(tmp_path, b, name="t.json"):
    return load_trace(b.write(tmp_path / name), use_cache=False)


def test_a_step_of_few_slow_launches_and_the_gaps_between_them_is_launch_bound(tmp_path):
    """6 launches a step, each call 80 us with 20 us of untraced time after it, 10 us kernels: there are fewer than
    the share rules' 10 launches per step, but capturing them in one graph saves most of the step."""
    b = TraceBuilder()
    for s in range(3):
        t0 = s * 1_000
        b.step(s, t0, 1_000)
        b.cpu_op("aten::add", t0 + 5, 390)
        for i in range(6):
            b.launch("vectorized_elementwise_kernel", t0 + 400 + 100 * i, 80, t0 + 400 + 100 * i + 82, 10)
    trace = _load(tmp_path, b)
    w = whatif(trace)
    assert w.verdict == "launch-bound" and w.top.fix == "cuda_graphs"
    assert w.top.share == pytest.approx(0.59, abs=0.01)  # 600 us of launching -> one 10 us graph launch
    assert perfkit.diagnose(trace).verdict == "launch-bound"


def test_a_compiled_step_of_dense_launches_without_stacks_is_helped_by_cuda_graphs(tmp_path):
    """1,200 launches a step inside a compiled region, no Python stacks: the untraced 4 us between launches is the
    host issuing them (segments: DENSE_LAUNCH_GAP_US), so CUDA graphs save it; the fix never says they will not."""
    b = TraceBuilder()
    step = 1_200 * 10.0 + 100
    for s in range(3):
        t0 = s * step
        b.step(s, t0, step)
        b.annotation("Torch-Compiled Region: 0/0", t0 + 10, step - 20)
        for i in range(1_200):
            ts = t0 + 50 + 10 * i
            b.launch(f"triton_poi_fused_add_{i % 7}", ts, 6, ts + 8, 3)
    trace = _load(tmp_path, b)
    w = whatif(trace)
    # 12.1 ms of launching a step -> the GPU's own 3.6 ms (1,200 kernels of 3 us)
    assert w.verdict == "launch-bound" and w.top.fix == "cuda_graphs"
    assert w.top.predicted_step_us == pytest.approx(3_600.0) and w.top.share == pytest.approx(0.70, abs=0.01)
    d = perfkit.diagnose(trace)
    assert d.verdict == "launch-bound" and "will not shorten" not in d.fix


def test_python_frames_spanning_the_loop_with_nothing_traced_inside_are_not_issuing(tmp_path):
    """<module> and main() span the step; for 5 ms nothing is traced inside them, then 4 launches: that time is
    untraced host work (segments: ISSUING_PYTHON_US), not the host issuing GPU work, and no compile advice follows."""
    b = TraceBuilder(with_stack=True)
    b.python("<module>", 0, 18_000)
    b.python("train.py(10): main", 1, 17_998)
    for s in range(3):
        t0 = s * 6_000
        b.step(s, t0 + 2, 5_996)
        for i in range(4):
            b.launch("gemm", t0 + 5_100 + 20 * i, 10, t0 + 5_115 + 20 * i, 15)
    trace = _load(tmp_path, b)
    w = whatif(trace)
    assert w.prediction("cuda_graphs").share < 0.05  # four launches a step: a graph saves their 70 us, not the 5 ms
    d = perfkit.diagnose(trace)
    assert d.verdict == "host-compute-bound" and "reduce-overhead" not in d.fix and "will not shorten" in d.fix
    assert "did not record" in d.fix and "with_stack=True" not in d.fix  # the trace has its Python frames


def test_gpu_activity_without_any_host_event_asks_for_cpu_activity(tmp_path):
    b = TraceBuilder()
    for i in range(20):
        b.kernel("gemm", i * 100.0, 50)
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "host activity not recorded" and "ProfilerActivity.CPU" in d.fix


def test_runtime_calls_beside_cpu_kernels_mean_the_model_ran_on_the_cpu(tmp_path):
    """No launch, no GPU event, mkldnn ops doing the work: not 'GPU activity not recorded' but a CPU model."""
    b = TraceBuilder()
    for s in range(3):
        b.step(s, s * 1_000, 1_000)
        b.cpu_op("aten::mkldnn_convolution", s * 1_000 + 10, 800)
        b.runtime("cudaGetDeviceCount", s * 1_000 + 900, 2)
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "CPU-only trace" and "The model ran on the CPU" in d.fix


def test_collectives_recorded_with_cuda_activity_off_are_not_recorded_not_cpu_only(tmp_path):
    b = TraceBuilder()
    for s in range(3):
        b.step(s, s * 1_000, 1_000)
        b.cpu_op("c10d::allreduce_", s * 1_000 + 10, 100)
        b.cpu_op("nccl:all_reduce", s * 1_000 + 20, 80)
        b.cpu_op("aten::mm", s * 1_000 + 200, 600)
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "GPU activity not recorded" and "ProfilerActivity.CUDA" in d.fix


def test_short_profilerstep_markers_are_boundaries_not_steps(tmp_path):
    """Legacy ProfilerStep events of 1 us (all of them under MARKER_SHARE, 1%, of the host's time) each start a step
    that lasts until the next."""
    b = TraceBuilder()
    for s in range(4):
        b.step(s, s * 1_000, 1)
        b.cpu_op("aten::mm", s * 1_000 + 10, 900)
    trace = _load(tmp_path, b)
    steps = trace.steps
    assert steps["source"].unique().tolist() == ["ProfilerStep markers"]
    assert (steps["end_us"] - steps["start_us"]).tolist()[:3] == pytest.approx([1_000.0] * 3)


def test_a_sync_whose_wait_is_work_already_queued_saves_nothing(tmp_path):
    """The GPU is busy 95% of each step and the host waits for it at a sync: removing the sync leaves the GPU's
    work, so it saves under MIN_SAVING (5%) and the step is GPU-bound."""
    b = TraceBuilder()
    for s in range(3):
        t0 = s * 1_000
        b.step(s, t0, 1_000)
        b.launch("gemm", t0 + 5, 10, t0 + 20, 950)
        b.sync("cudaStreamSynchronize", t0 + 20, 955)
    trace = _load(tmp_path, b)
    w = whatif(trace)
    assert w.prediction("remove_syncs").share < 0.05 and perfkit.diagnose(trace).verdict == "GPU-bound"


def test_an_op_slow_on_its_first_call_in_every_step_is_a_per_step_cost_not_warm_up(tmp_path):
    """aten::nonzero takes 2 ms on its first call of each of 4 steps and 20 us on its later ones: the slow call is in
    every step it appears in (warmup._every_step), so it is the step's own cost."""
    b = TraceBuilder()
    for s in range(4):
        t0 = s * 3_000
        b.step(s, t0, 3_000)
        b.cpu_op("aten::nonzero", t0 + 10, 2_000)
        for i in range(5):
            b.cpu_op("aten::nonzero", t0 + 2_100 + 100 * i, 20)
        b.launch("k", t0 + 2_800, 10, t0 + 2_815, 50)
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict != "warm-up" and d.warm_up.empty


def test_gpu_bound_on_tensor_cores_at_a_low_share_of_peak_gets_the_rate_not_amp_or_compile(tmp_path):
    b = TraceBuilder(gpu_name="NVIDIA H100 80GB HBM3")
    for s in range(4):
        t0 = s * 1_000
        b.step(s, t0, 1_000)
        op = b.cpu_op("aten::mm", t0 + 10, 30)
        op["args"].update({"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16"] * 2})
        b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", t0 + 15, 10, t0 + 40, 900)
        b.sync("cudaStreamSynchronize", t0 + 50, 895)
    trace = _load(tmp_path, b)
    assert whatif(trace).prediction("amp").applies is False  # Tensor Cores already run
    d = perfkit.diagnose(trace)
    assert d.verdict == "GPU-bound"
    assert d.fix.startswith("100% of GPU time is bf16 GEMMs on Tensor Cores at 153 of the NVIDIA H100 SXM's 989 "
                            "TFLOP/s (15% of peak")
    advice = d.fix.split(": ", 1)[1]
    assert "autocast" not in advice and "torch.compile" not in advice


def test_a_dataloader_holding_a_tenth_of_the_step_is_named_beside_the_verdict(tmp_path):
    """Launch-bound steps whose DataLoader takes 12% of each: the title names it (MENTION_SHARE, 10%)."""
    b = TraceBuilder()
    for s in range(3):
        t0 = s * 2_000
        b.step(s, t0, 2_000)
        b.dataloader(t0 + 5, 240)
        for i in range(80):
            ts = t0 + 260 + 20 * i
            b.cpu_op("aten::add", ts, 18)
            b.launch("vectorized_elementwise_kernel", ts + 2, 14, ts + 17, 3)
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "launch-bound" and "also: DataLoader 12% of the step" in d.title
