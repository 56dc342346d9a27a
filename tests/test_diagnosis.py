"""perfkit diagnose: the taxonomy on synthetic steps built after the traces that fooled the old
verdict (host compute sent to CUDA graphs, a cold first launch, a sync after the last step, an
unrecorded GPU), its surfaces agreeing, and the CLI."""
import json
import re

import pytest

import perfkit
import perfkit.cli
from perfkit.analysis.step.diagnosis import diagnose
from perfkit.analysis.step.gaps import gpu_gaps
from perfkit.analysis.summary import summarize
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def t4_like(tmp_path, steps: int = 3):
    """A T4 step after the one that read as "CPU-launch-bound": 63% of it in CPU aten::normal_ (random
    numbers made on the host), a pageable copy to the GPU, two kernels and a copy back on the
    compute stream."""
    b = TraceBuilder()
    for s in range(steps):
        t = s * 12_000
        b.step(s, t, 12_000)
        b.cpu_op("aten::randn", t + 100, 7_600)
        b.cpu_op("aten::normal_", t + 150, 7_500)
        b.cpu_op("aten::to", t + 7_800, 1_000)
        b.memcpy("HtoD", "Pageable", t + 7_810, 980, t + 8_300, 480, 4 << 20)
        b.cpu_op("aten::mm", t + 8_900, 40)
        b.launch("volta_sgemm_128x64_nn", t + 8_910, 20, t + 8_935, 900)
        b.cpu_op("aten::relu", t + 8_950, 30)
        b.launch("elementwise_kernel", t + 8_960, 15, t + 9_840, 40)
        b.cpu_op("aten::to", t + 9_000, 1_000)
        b.memcpy("DtoH", "Pageable", t + 9_010, 990, t + 9_885, 100, 1 << 20)
    return load_trace(b.write(tmp_path / "t4.json"), use_cache=False)


def test_host_compute_is_not_sent_to_cuda_graphs(tmp_path):
    d = diagnose(t4_like(tmp_path))
    assert d.verdict == "host-compute-bound" and set(d.steps["verdict"]) == {"host-compute-bound"}
    assert d.numbers[0]["text"].startswith("CPU op aten::randn 63%")
    assert "will not shorten the step" in d.fix and "on the GPU" in d.fix and "reduce-overhead" not in d.fix
    assert d.command.startswith("perfkit hotspots ")


def test_the_same_trace_gives_one_verdict_everywhere(tmp_path):
    trace = t4_like(tmp_path)
    d = diagnose(trace)
    assert perfkit.cpu_bound(trace).verdict == d.verdict == perfkit.step_anatomy(trace).verdict
    assert summarize(trace)["diagnosis"]["verdict"] == d.verdict
    assert perfkit.step_anatomy(trace).fix == d.fix


def test_a_copy_on_the_compute_stream_is_busy_time_not_another_stream(tmp_path):
    g = gpu_gaps(t4_like(tmp_path))
    assert g.totals["other_stream"]["dur_us"] == 0
    s = g.steps
    idle = sum(s[f"{c}_us"] for c in ("input", "launch", "sync_wait", "host_python", "compile", "other_stream", "tail"))
    assert (s["gpu_busy_us"] + idle - s["wall_us"]).abs().max() < 1e-6
    assert s["gpu_busy_us"].tolist() == [480 + 900 + 40 + 100] * 3


def test_a_cold_first_launch_is_warm_up_not_launch_overhead(tmp_path):
    """One step whose first cudaLaunchKernel takes 421 ms (module loading), then 200 launches of 5 us."""
    b = TraceBuilder()
    b.step(0, 0, 425_000)
    b.cpu_op("aten::linear", 10, 421_100)
    b.launch("gemm", 20, 421_000, 421_030, 50)
    t = 421_200
    for i in range(200):
        b.cpu_op("aten::add", t, 15)
        b.launch(f"add_{i % 4}", t + 2, 5, t + 10, 3)
        t += 18
    d = diagnose(load_trace(b.write(tmp_path / "cold.json"), use_cache=False))
    assert d.verdict == "warm-up" and d.warm_up["dur_us"].tolist() == [421_000]  # the launch; linear runs once
    assert "schedule(wait=1, warmup=3" in d.fix


@pytest.mark.parametrize("cold_us, verdict", [
    (6_500, "warm-up"),       # a 6.5 ms first launch in a 10 ms window (the MI250 toy step): it measures start-up
    (3_000, "launch-bound"),  # 3 ms of 6.5: under half, so it is left out and the rest decides
])
def test_warm_up_is_left_out_and_the_rest_of_the_step_decides(tmp_path, cold_us, verdict):
    b = TraceBuilder()
    b.step(0, 0, cold_us + 3_500)
    b.cpu_op("aten::add_", 0, cold_us + 100)
    b.launch("add_kernel", 10, cold_us, cold_us + 20, 5)   # the first launch of add_kernel: code loading
    t = cold_us + 100
    for i in range(40):
        b.cpu_op("aten::mul", t, 80)
        b.launch("mul_kernel", t + 10, 6, t + 20, 4)
        t += 84
    d = diagnose(load_trace(b.write(tmp_path / "rocm.json"), use_cache=False))
    assert d.verdict == verdict
    if verdict == "warm-up":
        assert "looks launch-bound" in d.fix and "reduce-overhead" not in d.fix
    else:
        assert any("warm-up left out of the verdict" in w and f"{cold_us / 1e3:.1f} ms" in w for w in d.warnings)


def test_a_sync_after_the_last_step_is_outside_the_steps(tmp_path):
    b = TraceBuilder()
    for s in range(3):
        b.step(s, s * 1_000, 1_000)
        b.cpu_op("aten::mm", s * 1_000 + 10, 900)
        b.launch("gemm", s * 1_000 + 20, 10, s * 1_000 + 40, 950)
    b.sync("cudaDeviceSynchronize", 3_100, 6_500)
    trace = load_trace(b.write(tmp_path / "after.json"), use_cache=False)
    d = diagnose(trace)
    assert d.outside_steps["syncs"] == {"count": 1, "blocked_us": 6_500.0}
    assert d.verdict != "sync-bound" and any("outside the profiled steps" in w for w in d.warnings)
    sync = perfkit.syncs(trace)
    assert sync.total["per_step"] == 0 and sync.total["outside_steps"]["count"] == 1
    assert all(f.severity == "info" for f in sync.findings)
    assert perfkit.step_anatomy(trace).waiting is None


def test_launches_without_gpu_activity_say_the_gpu_was_not_recorded(tmp_path):
    b = TraceBuilder()
    b.device_properties([{"id": 0, "name": "NVIDIA A100-SXM4-40GB"}, {"id": 1, "name": "NVIDIA A100-SXM4-40GB"}])
    for s in range(2):
        b.step(s, s * 1_000, 1_000)
        for i in range(5):
            b.runtime("cudaLaunchKernel", s * 1_000 + 10 + 100 * i, 10)
    trace = load_trace(b.write(tmp_path / "nogpu.json"), use_cache=False)
    d = diagnose(trace)
    assert d.verdict == "GPU activity not recorded" and "NVIDIA A100-SXM4-40GB x2" in d.title
    assert "ProfilerActivity.CUDA" in d.fix
    s = summarize(trace)
    assert [x["name"] for x in s["devices"]] == ["NVIDIA A100-SXM4-40GB"] * 2
    assert not any(x.get("active", True) for x in s["devices"])


def test_cli_prints_one_screen_and_json(tmp_path, capsys):
    path = tmp_path / "t4.json"
    t4_like(tmp_path)
    assert perfkit.cli.main(["diagnose", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("verdict   host-compute-bound") and "fix       " in out and "more      perfkit hotspots" in out
    assert len(out.splitlines()) < 25
    assert perfkit.cli.main(["diagnose", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"verdict", "steps", "evidence", "fix", "warm_up", "outside_steps", "warnings"}
    assert data["steps"][0]["shares"]["host_compute"] > 0.6 and len(data["evidence"]) == 3


def host_ahead(tmp_path, gemm_us: int = 2_400):
    """Three 1 ms host windows, each launching three GEMMs of ``gemm_us``: the GPU runs them back to
    back long after the windows closed (a short profile where the host never waited; the H100 fp32
    MLP profile of scripts/gpu queued 7.19 ms of GEMMs per 3.20 ms window)."""
    b = TraceBuilder()
    gpu = 0
    for s in range(3):
        t = s * 1_000
        b.step(s, t, 1_000)
        for i in range(3):
            b.cpu_op("aten::mm", t + 100 + 250 * i, 60)
            gpu = max(gpu, t + 130 + 250 * i)  # a kernel starts after its launch, once the GPU is free
            b.launch("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n", t + 110 + 250 * i, 30, gpu, gemm_us)
            gpu += gemm_us
    return load_trace(b.write(tmp_path / "ahead.json"), use_cache=False)


def test_a_host_ahead_of_the_gpu_is_not_read_as_the_step_time(tmp_path):
    trace = host_ahead(tmp_path)
    result = perfkit.cpu_bound(trace)
    assert result.steps["queued_gpu_us"].tolist() == [7_200.0] * 3  # launched from each window, wherever it ran
    note = next(w for w in diagnose(trace).warnings if w.startswith("the host ran ahead of the GPU"))
    assert "queue a median 7.20 ms of GPU work but its window lasts 1.00 ms" in note and "(7.2x)" in note
    in_step = perfkit.cpu_bound(host_ahead(tmp_path, gemm_us=300))  # 0.9 ms queued per 1 ms window: no note
    assert in_step.steps["queued_gpu_us"].tolist() == [900.0] * 3
    assert not any(w.startswith("the host ran ahead") for w in in_step.warnings)


@pytest.mark.parametrize("name", ["ppo_item_logging", "ppo_sync_checks"])
def test_a_cpu_only_title_and_its_bullet_state_one_host_busy_share(name):
    """The title's "host busy N%" and the bullet "host busy N% of the step" are one figure, on one time base
    (the step less its warm-up calls): on ppo_item_logging they read 63% over 66% when the title divided by
    the whole window."""
    from conftest import ROOT

    d = diagnose(load_trace(ROOT / "data" / "traces" / "cpu" / f"{name}.json.gz"))
    title = re.search(r"host busy (\d+)%", d.title).group(1)
    bullets = [re.search(r"host busy (\d+)%", n["text"]) for n in d.numbers]
    assert d.verdict == "CPU-only trace" and [b.group(1) for b in bullets if b] == [title]
