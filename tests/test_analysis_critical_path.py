"""critical_path: exact paths on synthetic traces (GPU-bound, host-bound, a sync, a pageable copy),
the HTA event-sync trace checked by hand, and on real traces kinds summing to a path no longer than
the step; the CLI."""
import json

import pytest

import perfkit.cli
from perfkit.analysis.step.critical_path import KINDS, critical_path
from perfkit.errors import ParameterError
from perfkit.trace import load_trace

from conftest import shared_trace
from tracebuilder import TraceBuilder

EVENT_SYNC = "hta_critical_path__cuda_event_sync__event_sync_trace.json.gz"
REAL = ["hta_critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz", EVENT_SYNC,
        "kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz", "tracelens_b200_serving_eager_rank0.json.gz",
        "tracelens_mi300x_resnet_ddp_actckpt_bf16_rank0.json.gz", "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz", "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
        "tracelens_mi300x_vllm_piecewise_graph_exec.json.gz"]


def kinds(result, step=0) -> dict:
    row = result.steps.set_index("step").loc[step]
    return {k: row[f"{k}_us"] for k in KINDS if row[f"{k}_us"]}


def test_gpu_bound_step_is_its_kernels(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.cpu_op("aten::mm", 10, 30)
    b.launch("k1", 20, 10, 100, 300)           # queued: each kernel starts when the previous one ends
    b.launch("k2", 40, 10, 400, 300)
    b.launch("k3", 60, 10, 700, 300)
    r = critical_path(load_trace(b.write(tmp_path / "g.json")))
    # 1000 back to 100: three kernels; k1 waited for its launch (20-30 call, 30-100 delay); 0-20 host.
    assert kinds(r) == {"kernel": 900.0, "launch": 80.0, "host": 10.0, "idle": 10.0}
    assert r.steps.iloc[0]["path_us"] == 1000.0 and r.steps.iloc[0]["bound_by"] == "kernel"


def test_host_bound_step_follows_the_thread(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.cpu_op("aten::add", 100, 300)
    b.launch("tiny", 380, 10, 395, 5)
    b.cpu_op("aten::add", 500, 400)
    b.launch("tiny", 880, 10, 895, 5)
    r = critical_path(load_trace(b.write(tmp_path / "h.json")))
    # from 1000: idle 900-1000 (no op); the kernels ended long before, so the thread is the path.
    assert kinds(r) == {"host": 680.0, "launch": 20.0, "idle": 300.0}


def test_a_sync_hands_the_path_to_the_kernel_it_waits_for(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.cpu_op("aten::mm", 0, 50)
    b.launch("gemm", 10, 20, 40, 700)                     # GPU 40-740
    b.sync("cudaStreamSynchronize", 60, 690, gpu_kind="Stream Sync", gpu_ts=61, gpu_dur=689)   # host 60-750
    b.cpu_op("aten::add", 760, 240)
    r = critical_path(load_trace(b.write(tmp_path / "s.json")))
    # 760-1000 host, 750-760 idle, 740-750 sync wake-up, 40-740 kernel, 30-40 launch delay, 10-30 call, 0-10 op.
    assert kinds(r) == {"host": 250.0, "idle": 10.0, "sync_wait": 10.0, "kernel": 700.0, "launch": 30.0}
    seg = r.segments
    assert seg[seg["kind"] == "kernel"]["lane"].tolist() == ["GPU 0 stream 7"]


def test_a_pageable_copy_blocks_its_thread(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 500)
    b.memcpy("HtoD", "Pageable", 0, 400, 300, 100, 1 << 20)     # call 0-400, GPU copy 300-400
    b.cpu_op("aten::relu", 400, 100)
    r = critical_path(load_trace(b.write(tmp_path / "p.json")))
    assert kinds(r) == {"host": 100.0, "memcpy": 100.0, "sync_wait": 300.0}


def test_event_sync_trace_matches_a_hand_count():
    """Worked by hand from the raw events (times from the step start, us): see the module doc."""
    r = critical_path(load_trace(shared_trace(EVENT_SYNC)))
    # spin kernel 3037-3073; Memcpy DtoH 2935-2937; sync waits: cudaDeviceSynchronize 3139-3147 (GPU idle),
    # cudaEventSynchronize wake-up 3073-3081, cudaStreamSynchronize 2947-2953 (nothing left to wait for),
    # the pageable DtoH copy call before (2917-2935) and after (2937-2946) its copy.
    assert kinds(r, 100)["kernel"] == 36.0 and kinds(r, 100)["memcpy"] == 2.0
    assert kinds(r, 100)["sync_wait"] == 8 + 8 + 6 + 18 + 9
    assert r.steps.iloc[0]["path_us"] == r.steps.iloc[0]["wall_us"] == 3154.0


@pytest.mark.parametrize("name", REAL)
def test_real_traces_kinds_sum_to_a_path_within_the_step(name):
    r = critical_path(load_trace(shared_trace(name)))
    steps = r.steps
    assert len(steps)
    total = steps[[f"{k}_us" for k in KINDS]].sum(axis=1)
    assert (abs(total - steps["path_us"]) <= 1e-6 * steps["wall_us"].clip(lower=1)).all()
    assert (steps["path_us"] <= steps["wall_us"] + 1e-6).all()
    assert (r.segments["end_us"] > r.segments["start_us"]).all()
    for (_, step), seg in r.segments.groupby(["rank", "step"]):   # contiguous, latest first
        assert (seg["start_us"].to_numpy()[:-1] == seg["end_us"].to_numpy()[1:]).all()


def test_cpu_only_trace_is_host_time_with_a_warning():
    r = critical_path(load_trace(shared_trace("hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")))
    assert r.steps[["kernel_us", "memcpy_us", "launch_us"]].sum().sum() == 0
    assert any("no GPU events" in w for w in r.warnings)


def test_annotation_windows_and_unknown_annotation(tmp_path):
    b = TraceBuilder()
    b.annotation("## fwd ##", 0, 100)
    b.cpu_op("aten::mm", 10, 50)
    b.annotation("## fwd ##", 200, 100)
    trace = load_trace(b.write(tmp_path / "a.json"))
    r = critical_path(trace, annotation="## fwd")
    assert r.steps["step"].tolist() == [0, 1] and r.steps["wall_us"].tolist() == [100.0, 100.0]
    assert kinds(r, 0) == {"host": 50.0, "idle": 50.0}
    with pytest.raises(ParameterError, match="no host event is named"):
        critical_path(trace, annotation="## nope")


def test_cli_table_and_json(tmp_path, capsys):
    path = shared_trace(EVENT_SYNC)
    assert perfkit.cli.main(["critical-path", str(path)]) == 0
    assert "bound by" in capsys.readouterr().out
    assert perfkit.cli.main(["critical-path", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    row = d["steps"][0]
    assert set(row) >= {"step", "wall_us", "path_us", "by_kind"} and set(row["by_kind"]) == set(KINDS)
    assert sum(row["by_kind"].values()) == pytest.approx(row["path_us"])


def backward_on_autograd_thread(tmp_path, *, stacks: bool):
    """Main thread 1 marks the step, runs forward (0-100) and the optimizer (800-1000); backward
    (110-700) runs on the autograd engine's thread 2 while thread 1 waits in run_backward. Thread 2
    launches more kernels than thread 1, so "most launches" would call it the main thread."""
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.cpu_op("aten::linear", 0, 100)
    b.launch("fwd", 50, 10, 60, 100)
    if stacks:
        b.python("train.py(1): <module>", 0, 1000)
        b.python("<built-in method run_backward of torch._C._EngineBase object at 0x7f>", 100, 700)
    b.cpu_op("autograd::engine::evaluate_function: MmBackward0", 110, 290, tid=2)
    b.launch("bwd1", 200, 10, 210, 50, tid=2)
    b.launch("bwd2", 300, 10, 310, 50, tid=2)
    b.cpu_op("autograd::engine::evaluate_function: AddmmBackward0", 410, 290, tid=2)
    b.launch("bwd3", 690, 10, 700, 90, tid=2)
    b.cpu_op("Optimizer.step#SGD.step", 800, 200)
    return critical_path(load_trace(b.write(tmp_path / f"bwd{int(stacks)}.json")))


@pytest.mark.parametrize("stacks", [True, False])
def test_path_follows_backward_onto_the_autograd_thread(tmp_path, stacks):
    r = backward_on_autograd_thread(tmp_path, stacks=stacks)
    seg = r.segments
    on_autograd = seg[seg["lane"] == "2"]
    # The backward ops of thread 2 are on the path: 110-400 and 410-700, host with its launch calls.
    assert on_autograd["end_us"].sub(on_autograd["start_us"]).sum() == pytest.approx(580.0)
    t0 = r.steps["start_us"].iloc[0]
    spans = {(s - t0, e - t0) for s, e in zip(on_autograd["start_us"], on_autograd["end_us"])}
    assert spans >= {(110.0, 200.0), (690.0, 700.0)}
    k = kinds(r)
    # Untraced main-thread time (no Python frames) is idle: 100-110, 400-410 and 700-800.
    assert k["launch"] == pytest.approx(40.0) and k.get("idle", 0.0) == pytest.approx(0.0 if stacks else 120.0)
    assert sum(k.values()) == pytest.approx(1000.0)
