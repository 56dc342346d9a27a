"""The verdict and its fix on trace shapes perfkit had never seen (issue 35), rebuilt as synthetic traces from
the numbers of the traces where the advice went wrong: first-call windows, shares above 100%, syncs waiting on
a collective, a step of copies, a DataLoader whose workers already run, launches without Python stacks."""
from __future__ import annotations

import pytest

import perfkit
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder

MS = 1000.0


def _load(tmp_path, b, name="t.json"):
    return load_trace(b.write(tmp_path / name), use_cache=False)


def _op_with_launch(b, name, ts, dur, kernel_us, *, launch_us=5.0):
    """An op issuing one kernel that starts right after its launch (an idle GPU)."""
    b.cpu_op(name, ts, dur)
    b.launch(f"{name}_kernel", ts + 1, launch_us, ts + 1 + launch_us + 5, kernel_us)


def _first_call_cnn(tmp_path):
    """An RTX 3090 CNN's first inference call: the first convolution 146.6 ms (3.1 ms later), more first calls,
    over 200 ms of them in a 307.7 ms window."""
    b = TraceBuilder()
    b.step(0, 0, 307.7 * MS)
    t = 10.0
    for name, first, later in (("aten::conv2d", 146.6 * MS, 3.1 * MS), ("aten::batch_norm", 40 * MS, 0.2 * MS),
                               ("aten::linear", 30 * MS, 0.1 * MS)):
        _op_with_launch(b, name, t, first, 50.0)
        t += first + 10
        for _ in range(8):  # the later layers of the same op
            _op_with_launch(b, name, t, later, 40.0)
            t += later + 10
    for _ in range(60):  # the rest of the call: small eager ops
        _op_with_launch(b, "aten::relu", t, 30.0, 3.0)
        t += 40
    return _load(tmp_path, b)


def test_a_first_call_window_is_warm_up_not_launch_bound(tmp_path):
    d = perfkit.diagnose(_first_call_cnn(tmp_path))
    assert d.verdict == "warm-up" and "--wait" in d.fix and "reduce-overhead" not in d.fix
    assert 0.5 <= d.steps["warmup_share"].iloc[0] <= 1.0


def test_a_cold_launch_with_untraced_time_around_it_is_warm_up(tmp_path):
    """An A100 model's first call: one 629.6 ms cudaLaunchKernel, 64% of the window."""
    b = TraceBuilder()
    b.step(0, 0, 983.0 * MS)
    t = 100.0
    _op_with_launch(b, "aten::addmm", t, 630 * MS, 20.0, launch_us=629.6 * MS)
    t += 630 * MS + 200 * MS  # untraced host time after the first call
    for _ in range(40):
        _op_with_launch(b, "aten::addmm", t, 30.0, 20.0, launch_us=8.0)
        t += 50
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "warm-up" and "reduce-overhead" not in d.fix


def test_a_half_warm_window_is_warm_up_and_names_the_rest(tmp_path):
    """A compiled MoE step's first profile: a 12.0 ms first launch inside AccumulateGrad, 52% of the window; the
    rest launch-bound."""
    b = TraceBuilder()
    b.step(0, 0, 23.0 * MS)
    b.cpu_op("torch::autograd::AccumulateGrad", 10, 12.02 * MS)
    b.launch("accumulate_kernel", 11, 12.0 * MS, 12.02 * MS, 5.0)
    t = 12.1 * MS
    for _ in range(120):  # more launches than the first: their own later calls
        _op_with_launch(b, "aten::add_", t, 70.0, 2.0)
        t += 90
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "warm-up" and "looks launch-bound" in d.fix


def test_no_share_exceeds_the_step_when_the_gpu_works_during_warm_up(tmp_path):
    """A 1,065 ms window with a 572 ms first call under which the GPU runs: GPU busy read "52%" of the whole
    window while shares were of the window less warm-up, and exposed collectives "313 ms of 266 ms"."""
    b = TraceBuilder()
    b.step(0, 0, 1065 * MS)
    b.cpu_op("aten::mm", 0, 572 * MS)
    b.launch("first_gemm", 1, 571 * MS, 572 * MS - 10, 5.0)
    b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100 * MS, 450 * MS)  # under the warm-up
    b.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 600 * MS, 300 * MS)  # after it
    t = 572 * MS + 10
    for _ in range(4):
        _op_with_launch(b, "aten::mm", t, 50.0, 30.0)
        t += 60
    d = perfkit.diagnose(_load(tmp_path, b))
    shares = d.steps[[c for c in d.steps if c.endswith("_share")]].iloc[0].dropna()
    assert (shares <= 1.0 + 1e-9).all(), shares[shares > 1]
    assert "%" in d.title and not any(int(p) > 100 for p in __import__("re").findall(r"(\d+)%", d.title))


def test_a_host_blocked_on_a_collective_is_communication(tmp_path):
    """The second rank of a 2xA100 MoE step: NCCL kernels 94% of GPU busy time and 62.9% of the window exposed;
    the host's 74% blocked in syncs waits for them."""
    b = TraceBuilder()
    b.step(0, 0, 10 * MS)
    t = 10.0
    for _ in range(12):
        _op_with_launch(b, "aten::mm", t, 20.0, 30.0)
        t += 25
    b.launch("ncclDevKernel_AllToAll_RING_LL", t, 5, 2.6 * MS, 6.29 * MS)
    b.sync("cudaStreamSynchronize", 1.5 * MS, 7.4 * MS)  # returns when the collective ends
    t = 9.0 * MS
    for _ in range(8):
        _op_with_launch(b, "aten::add", t, 20.0, 5.0)
        t += 25
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "communication-bound", d.title
    assert "no_sync()" in d.fix and "Make the kernels faster" not in d.fix


def test_a_step_of_copies_gets_copy_advice_not_kernel_advice(tmp_path):
    """An A100 step moving 154 MB pageable host-to-device and back: busy 98.7%, all copies, 0 kernels."""
    b = TraceBuilder()
    for step in range(3):
        t0 = step * 67.5 * MS
        b.step(step, t0, 67.5 * MS)
        b.memcpy("HtoD", "Pageable", t0 + 10, 33 * MS, t0 + 20, 33.2 * MS, 77_000_000)
        b.memcpy("DtoH", "Pageable", t0 + 33.3 * MS, 33.9 * MS, t0 + 33.4 * MS, 33.4 * MS, 77_000_000)
    d = perfkit.diagnose(_load(tmp_path, b))
    # Replayed, copying from pinned memory (at the slowest link perfkit knows: the test GPU is in no table) takes the
    # 33 ms copy to 6 ms: the pageable copies decide, not the kernels (none run)
    assert d.verdict == "sync-bound" and "pin" in d.fix and "non_blocking" in d.fix
    assert "mixed precision" not in d.fix and "elementwise" not in d.fix


def test_running_workers_are_not_told_to_turn_workers_on(tmp_path):
    """Two T4 training runs whose DataLoader is _MultiProcessingDataLoaderIter: say what is left to do."""
    b = TraceBuilder()
    for step in range(3):
        t0 = step * 100 * MS
        b.step(step, t0, 100 * MS)
        b.annotation("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t0 + 10, 60 * MS)
        t = t0 + 60 * MS + 20
        for _ in range(20):
            _op_with_launch(b, "aten::conv2d", t, 30.0, 1000.0)
            t += 1500
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "input-bound" and "already runs worker processes" in d.fix and "num_workers>0" not in d.fix


def test_untraced_time_between_dense_launches_is_launch_overhead(tmp_path):
    """A torch.compile'd ResNet-18 step recorded without stacks: 1,278 launches in 60.6 ms (half cuLaunchKernel,
    Triton's launcher), median kernel 4.4 us, GPU busy 16%, much of the window untraced between launches."""
    b = TraceBuilder()
    b.step(0, 0, 60.6 * MS)
    b.step(1, 60.6 * MS, 60.6 * MS)
    for step in range(2):
        t = step * 60.6 * MS + 20
        for i in range(1278 // 2):
            if i % 2:
                b.launch("triton_poi_fused_0", t, 6.0, t + 8, 4.4, launch_name="cuLaunchKernel", cat="cuda_driver")
            else:
                _op_with_launch(b, "aten::convolution", t, 25.0, 14.0)
            b.cpu_op("aten::empty_strided", t + 30, 20.0)  # host work that launches nothing: measured, so it
            t += 94.0                                         # outweighed the untraced launcher time before
    d = perfkit.diagnose(_load(tmp_path, b))
    assert d.verdict == "launch-bound", d.title
    assert "will not shorten the step" not in d.fix


def test_a_rank_that_starts_late_is_named_by_its_arrival_not_its_collective_time(tmp_path):
    """A 4xMI300X DDP step: the rank that arrives last does so by 1.6-3.8 ms because it starts its step late (its
    backward is no slower); step less collective time read "40% slower"."""
    from perfkit.analysis.ranks.combine import ranks

    late = {3: 2_500.0}
    for rank in range(4):
        b = TraceBuilder(rank=rank)
        for step in range(4):
            t0 = step * 20_000 + late.get(rank, 0.0) + 10 * ((rank + step) % 3)
            b.step(step, t0, 20_000 - late.get(rank, 0.0))
            t = t0 + 10
            for bucket in range(8):  # backward, with a bucket all-reduce every 1.5 ms on its own stream
                _op_with_launch(b, "aten::mm", t, 30.0, 1_400.0)
                ar_start = t + 1_450
                last = step * 20_000 + late[3] + 10 + bucket * 1_500 + 1_450 + 30
                b.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", t + 40, 5, ar_start, max(last, ar_start) + 300 - ar_start,
                         stream=20)
                t += 1_500
        b.write(tmp_path / f"rank{rank}.json")
    result = ranks(tmp_path, workers=1, use_cache=False)
    s = result.stragglers
    assert set(s["rank"]) == {3} and set(s["cause"]) == {"late start"}
    assert s["excess_us"].between(2_400, 2_600).all()  # its lateness, not its collectives' summed time
    assert any("starts its steps late" in f.title for f in result.findings)
