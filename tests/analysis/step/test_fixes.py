"""Each fix of ``perfkit.analysis.step.fixes`` on a small synthetic trace, with the step it predicts worked out by hand
from the numbers the test passes in, and one row each side of every threshold the module names. No ../shared."""
from __future__ import annotations

import pytest

import compile_traces
from perfkit.analysis.step import fixes
from perfkit.analysis.step.gpu_facts import gpu_facts
from perfkit.analysis.step.graph import rank_graphs
from perfkit.analysis.step.whatif import whatif
from perfkit.analysis.gpu_kernels.devices import DEVICES
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder

H100 = "NVIDIA H100 80GB HBM3"


def load(tmp_path, b, name="t.json"):
    return load_trace(b.write(tmp_path / name), use_cache=False)


def predicted(trace, fix: str) -> float:
    p = whatif(trace).prediction(fix)
    assert p.applies, p.assumes
    return p.predicted_step_us


def test_removing_a_sync_lets_the_host_run_on_while_the_gpu_work_stays(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.launch("gemm", 10, 10, 30, 300)                   # the GPU works 30-330
    b.sync("cudaStreamSynchronize", 40, 300)            # waits for it, returns at 340
    b.cpu_op("aten::add", 340, 640)                     # traced host work right after: nothing keeps it waiting
    trace = load(tmp_path, b)
    # the host goes on at 40: 40 + 640 + the 20 us left of the step = 700, longer than the 300 us GPU work
    assert predicted(trace, "remove_syncs") == pytest.approx(700.0)


@pytest.mark.parametrize("covered, removed", [(0.50, False), (0.49, True)])
def test_a_sync_on_a_collective_is_communication_not_a_sync_to_remove(tmp_path, covered, removed):
    b = TraceBuilder()
    b.step(0, 0, 2_000)
    b.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 10, 10, 30, 30 + covered * 1_000, stream=20)
    b.sync("cudaDeviceSynchronize", 60, 1_000)         # half of it (or just under) under the collective
    b.cpu_op("aten::add", 1_060, 900)
    p = whatif(load(tmp_path, b)).prediction("remove_syncs")
    assert p.applies is removed


def test_pinned_copies_run_at_the_devices_pinned_rate_and_stop_blocking(tmp_path):
    b = TraceBuilder(gpu_name="NVIDIA H200")
    b.step(0, 0, 12_000)
    b.memcpy("HtoD", "Pageable", 10, 11_000, 160, 10_800, 1 << 26)   # 64 MiB blocks the host 11 ms
    b.cpu_op("aten::add", 11_010, 980)
    trace = load(tmp_path, b)
    facts = gpu_facts(trace)
    assert facts.pinned_gbs == fixes.PINNED_HTOD_GBS["H200"] and facts.async_copy_us == fixes.ASYNC_COPY_US
    # the call returns in 20 us, the host's 1 ms follows at once; the copy alone takes 64 MiB at 53 GB/s
    assert predicted(trace, "pin_copies") == pytest.approx((1 << 26) / (fixes.PINNED_HTOD_GBS["H200"] * 1e3))


def test_an_unknown_gpu_copies_at_the_slowest_link_perfkit_knows(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 12_000)
    b.memcpy("HtoD", "Pageable", 10, 11_000, 160, 10_800, 1 << 26)
    facts = gpu_facts(load(tmp_path, b))
    assert facts.pinned_gbs == min(fixes.PINNED_HTOD_GBS.values()) and "PCIe 3" in facts.pinned_source


@pytest.mark.parametrize("loader_us, after", [(5_000.0, fixes.LOADER_FETCH_US), (200.0, 200.0)])
def test_dataloader_next_takes_a_fetch_once_workers_load_in_the_background(tmp_path, loader_us, after):
    b = TraceBuilder()
    b.step(0, 0, loader_us + 1_200)
    b.dataloader(10, loader_us)
    b.launch("k", loader_us + 20, 10, loader_us + 40, 100)
    b.cpu_op("aten::add", loader_us + 40, 1_000)
    trace = load(tmp_path, b)
    step = loader_us + 1_200
    p = whatif(trace).prediction("dataloader_workers")
    assert p.predicted_step_us == pytest.approx(step - loader_us + after)


def dense(b, t0, n, gap):
    """``n`` launches of 10 us, ``gap`` us apart (untraced between), from ``t0``; the time after the last."""
    t = t0
    for i in range(n):
        b.launch(f"k{t0}_{i}", t, 10, t + 5, 2)
        t += 10 + gap
    return t


@pytest.mark.parametrize("gap, stretches", [(100, 1), (101, 2)])  # rules.DENSE_LAUNCH_GAP_US
def test_cuda_graphs_capture_each_stretch_of_dense_launches(tmp_path, gap, stretches):
    b = TraceBuilder()
    b.step(0, 0, 5_000)
    t = dense(b, 10, 10, 20)
    t = dense(b, t - 20 + gap, 10, 20)
    trace = load(tmp_path, b)
    p = whatif(trace).prediction("cuda_graphs")
    assert p.assumes.startswith(f"{stretches:,} stretch(es) of dense launches (20 kernels)")


def test_cuda_graphs_replace_the_launches_and_the_gaps_by_one_graph_launch(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    end = dense(b, 0, 20, 20)                 # 20 launches of 10 us, 20 us apart: 0-590 issuing
    b.cpu_op("aten::add", end, 1_000 - end)   # the rest of the step is the host's own work
    trace = load(tmp_path, b)
    # the 600 us of issuing (the launches and the short gaps around them) become one 10 us graph launch
    assert predicted(trace, "cuda_graphs") == pytest.approx(1_000.0 - end + fixes.GRAPH_LAUNCH_US)


def test_the_optimizer_is_left_out_of_a_graph(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.annotation("Optimizer.step#Adam.step", 0, 600)
    dense(b, 0, 20, 20)
    b.cpu_op("aten::add", 600, 400)
    assert not whatif(load(tmp_path, b)).prediction("cuda_graphs").applies


def test_amp_runs_fp32_gemms_at_the_bf16_peak_times_their_share_of_the_fp32_one(tmp_path):
    b = TraceBuilder(gpu_name=H100)
    b.step(0, 0, 1_500)
    b.launch("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1", 10, 10, 30, 1_000)
    b.sync("cudaStreamSynchronize", 40, 995)             # returns at 1,035, 5 us after the GEMM
    b.cpu_op("aten::add", 1_035, 465)
    trace = load(tmp_path, b)
    dev = DEVICES["H100-SXM"]
    gemm = 1_000.0 * dev.vector["fp32"] / dev.matrix["bf16"]
    assert predicted(trace, "amp") == pytest.approx(1_500.0 - (1_000.0 - gemm))


def test_amp_leaves_tensor_core_gemms_alone(tmp_path):
    b = TraceBuilder(gpu_name=H100)
    b.step(0, 0, 1_500)
    b.launch("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 10, 10, 30, 1_000)
    assert "no GEMM, convolution or attention in fp32" in whatif(load(tmp_path, b)).prediction("amp").assumes


def add_op(b, ts, n=1024):
    op = b.cpu_op("aten::add", ts, 20)
    op["args"].update({"Input Dims": [[n, n], [n, n], []], "Input type": ["float", "float", "Scalar"]})
    return op


def test_consecutive_memory_bound_kernels_fuse_into_one_at_the_memory_roof(tmp_path):
    b = TraceBuilder(gpu_name=H100)
    b.step(0, 0, 1_000)
    for i in range(3):
        add_op(b, 10 + 30 * i)
        b.launch("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
                 12 + 30 * i, 5, 100 + 100 * i, 100)
    b.sync("cudaStreamSynchronize", 120, 285)           # returns at 405, 5 us after the third kernel
    b.cpu_op("aten::mul", 405, 595)
    trace = load(tmp_path, b)
    g = rank_graphs(trace)[0]
    facts = gpu_facts(trace)
    nbytes = facts.op_bytes(g)
    assert (nbytes == 3 * 4 * 1024 * 1024).all()         # two fp32 inputs and an output, 4 MiB each
    fused, _ = fixes.fuse_elementwise(g, facts)
    # 300 us of kernels become one moving 12 MiB at 3,350 GB/s, the other two take no time
    assert fused.gpu["dur"].tolist() == pytest.approx([nbytes[0] / (DEVICES["H100-SXM"].mem_bw_gbs * 1e3), 0.0, 0.0])
    assert predicted(trace, "fuse_elementwise") < 1_000.0 - 250.0


def test_kernels_of_other_classes_do_not_fuse(tmp_path):
    b = TraceBuilder(gpu_name=H100)
    b.step(0, 0, 1_000)
    add_op(b, 10)
    b.launch("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 12, 5, 100, 100)
    b.launch("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32", 40, 5, 200, 100)
    assert not whatif(load(tmp_path, b)).prediction("fuse_elementwise").applies


def test_collectives_overlap_once_nothing_waits_for_them(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 2_000)
    b.launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 10, 10, 30, 1_000, stream=20)
    b.launch("gemm", 30, 10, 1_040, 200)                # waited for the all-reduce on the other stream
    b.sync("cudaStreamSynchronize", 50, 1_195)          # returns at 1,245, 5 us after the GEMM
    b.cpu_op("aten::add", 1_245, 755)
    trace = load(tmp_path, b)
    g = rank_graphs(trace)[0]
    assert (g.gpu["cross"] >= 0).sum() == 1
    # the GEMM starts 10 us (the trace's launch latency) after its launch returns, under the all-reduce, and the
    # sync no longer waits for the all-reduce: 40 + 10 + 200 + 5 us to wake + 755 us of host work
    assert predicted(trace, "overlap_comm") == pytest.approx(1_010.0)
    assert "2 wait(s) for collectives go" in whatif(trace).prediction("overlap_comm").assumes  # the GEMM's and the sync's


def test_skipping_warmup_costs_each_first_call_its_later_median(tmp_path):
    b = TraceBuilder()
    for s in range(7):  # warmup.MIN_LATER calls after the first WARMUP_FIRST
        b.step(s, s * 30_000, 30_000)
        b.cpu_op("aten::conv2d", s * 30_000 + 10, 20_000 if s == 0 else 1_000)
        b.launch("k", s * 30_000 + 25_000, 10, s * 30_000 + 25_020, 100)
    r = whatif(load(tmp_path, b))
    p = r.prediction("skip_warmup")
    # the window's mean step less the 19 ms the first call costs above its later median, over 7 steps
    assert p.predicted_mean_us == pytest.approx(30_000.0 - 19_000.0 / 7)
    assert p.share == pytest.approx(19_000.0 / 210_000.0)  # of all the steps' time: a one-time cost


def test_skipping_compile_costs_the_compile_spans_nothing(tmp_path):
    r = whatif(load(tmp_path, compile_traces.compile_dominated()))
    assert r.prediction("skip_compile").share == pytest.approx(1.42 / 1.73, abs=0.01)


def test_host_compute_is_a_bound_on_ops_that_launch_nothing_not_on_untraced_time(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.launch("k", 10, 10, 30, 50)
    b.cpu_op("aten::index", 100, 400)               # the host's own work: 400 us
    p = whatif(load(tmp_path, b)).prediction("host_compute")
    assert p.measure and p.predicted_step_us == pytest.approx(600.0)  # the 480 us untraced are left alone
