"""The replay of ``perfkit.analysis.step.simulation`` on synthetic traces with exact expectations: it reproduces the
recorded steps, a blocking call waits for the last work launched before it, a step is its window or the GPU time
it queued, held work pins it, the main thread waits for the autograd thread, untraced time after a sync waits with
it, and the error table's arithmetic. No ../shared."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.step.graph import rank_graphs
from perfkit.analysis.step.simulation import TRUSTED_ERROR, ReplayResult, replay, simulate, step_times
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def load(tmp_path, b, name="t.json"):
    return load_trace(b.write(tmp_path / name), use_cache=False)


def synced_steps(n=3, kernel_us=300.0, step_us=1_000.0):
    """``n`` steps: an op launching a kernel, then a stream sync that returns 10 us after the kernel ends, then
    host work to the step's end."""
    b = TraceBuilder()
    for s in range(n):
        t0 = s * step_us
        b.step(s, t0, step_us)
        b.cpu_op("aten::mm", t0 + 10, 30)
        b.launch("gemm", t0 + 20, 10, t0 + 35, kernel_us)
        b.sync("cudaStreamSynchronize", t0 + 50, kernel_us - 5, gpu_kind="Stream Sync")
        b.cpu_op("aten::add", t0 + kernel_us + 60, step_us - kernel_us - 80)
    return b


def test_the_replay_reproduces_the_recorded_steps(tmp_path):
    r = replay(load(tmp_path, synced_steps()))
    assert r.steps["wall_us"].tolist() == [1_000.0] * 3
    assert r.steps["replay_us"].tolist() == pytest.approx([1_000.0] * 3)
    assert r.error == {"median": pytest.approx(0.0), "p90": pytest.approx(0.0), "worst": pytest.approx(0.0)}
    assert not r.not_modeled and not r.warnings


def test_a_blocking_call_waits_for_the_last_work_launched_before_it(tmp_path):
    trace = load(tmp_path, synced_steps())
    g = rank_graphs(trace)[0]
    calls = ~g.runs["shadow"][g.waits["run"]]
    assert calls.sum() == 3  # one wait a step, on that step's kernel (and its shadow: untraced time follows)
    longer = dataclasses.replace(g, gpu=dict(g.gpu, dur=g.gpu["dur"] + 200.0))
    # the sync returns 200 us later, and so does the rest of the step: each step 200 us longer
    assert step_times(longer, simulate(longer))["window_us"].tolist() == pytest.approx([1_200.0] * 3)
    shorter = dataclasses.replace(g, gpu=dict(g.gpu, dur=g.gpu["dur"] - 100.0))
    assert step_times(shorter, simulate(shorter))["window_us"].tolist() == pytest.approx([900.0] * 3)


def test_a_step_is_its_window_or_the_gpu_time_it_queued_whichever_is_longer(tmp_path):
    b = TraceBuilder()
    for s in range(3):  # the host issues 800 us of GPU work in each 500 us window and never waits
        b.step(s, s * 500, 500)
        b.launch(f"k{s}", s * 500 + 10, 10, 50 + s * 800, 800)
    r = replay(load(tmp_path, b))
    assert r.steps["wall_us"].tolist() == [500.0] * 3
    assert r.steps["queued_us"].tolist() == [800.0] * 3
    assert r.steps["measured_us"].tolist() == [800.0] * 3 and r.steps["replay_us"].tolist() == pytest.approx([800.0] * 3)


@pytest.mark.parametrize("wait, held", [(999.0, False), (1_000.0, True)])  # graph.HELD_WAIT_US
def test_work_that_waited_a_millisecond_for_what_the_trace_does_not_show_is_held(tmp_path, wait, held):
    b = TraceBuilder()
    b.step(0, 0, 3_000)
    b.launch("k", 100, 10, 110 + wait, 50)  # the stream was idle: nothing in the trace explains the wait
    b.sync("cudaStreamSynchronize", 200, wait - 30)
    g = rank_graphs(load(tmp_path, b))[0]
    assert bool(np.isfinite(g.gpu["base"][0])) is held
    earlier = dataclasses.replace(g, seg=dict(g.seg, dur=np.where(g.seg["start"] < 100, 0.0, g.seg["dur"])))
    t = simulate(earlier)  # the host reaches the launch 100 us sooner: held work does not move, kept latency does
    assert t.gpu_start[0] == pytest.approx(110 + wait + (0 if held else -100) + b.base_us)


def test_held_work_pins_the_step_to_its_end(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 5_000)
    b.launch("k", 100, 10, 2_000, 500)  # held: waited 1.9 ms for something the trace does not show
    b.cpu_op("aten::add", 200, 4_700)
    g = rank_graphs(load(tmp_path, b))[0]
    no_host = dataclasses.replace(g, seg=dict(g.seg, dur=np.zeros_like(g.seg["dur"])))
    # with no host time at all, the step still lasts until the held kernel ends
    assert step_times(no_host, simulate(no_host))["step_us"].tolist() == pytest.approx([2_500.0])


def test_the_main_thread_waits_for_the_autograd_thread_in_its_episode(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.cpu_op("aten::mse_loss", 10, 90)
    b.cpu_op("MseLossBackward0", 110, 480, tid=2000)  # backward on the engine's thread; main waits untraced
    b.launch("bwd", 120, 10, 140, 20, tid=2000)
    b.cpu_op("aten::add", 600, 100)
    g = rank_graphs(load(tmp_path, b))[0]
    assert len(g.hdeps["run"]) >= 2  # the engine's run waits for main; main's run after the episode for the engine
    backward = (g.seg["thread"] == 1) & (g.seg["start"] == 130 + b.base_us)  # the op's time after its launch
    faster = dataclasses.replace(g, seg=dict(g.seg, dur=np.where(backward, g.seg["dur"] - 290.0, g.seg["dur"])))
    # the engine's ops end 290 us sooner, so main resumes and the step ends 290 us sooner
    assert step_times(faster, simulate(faster))["window_us"].tolist() == pytest.approx([1_000.0 - 290.0])


def test_untraced_time_after_a_sync_keeps_waiting_for_what_it_waited_for(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.launch("k", 10, 10, 30, 600)
    b.sync("cudaStreamSynchronize", 40, 595)  # returns at 635, 5 us after the kernel; untraced time follows
    g = rank_graphs(load(tmp_path, b))[0]
    assert g.runs["shadow"].sum() == 1
    call = ~g.runs["shadow"][g.waits["run"]]
    no_wait = dataclasses.replace(g, waits={k: v[~call] for k, v in g.waits.items()})
    # the shadow still waits for the kernel: the untraced 365 us start at 630, not at 40
    assert step_times(no_wait, simulate(no_wait))["window_us"].tolist() == pytest.approx([1_000.0 - 5.0])


def test_a_trace_whose_gpu_work_has_no_launch_call_is_not_replayed(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.kernel("k", 100, 800)  # no correlation: nothing ties it to the host
    r = replay(load(tmp_path, b))
    assert r.steps.empty and "linked to a launch call" in r.warnings[0]


@pytest.mark.parametrize("errors, median, p90, worst", [
    ([0.0, 0.02, -0.04], 0.02, 0.036, 0.04),
    ([0.5], 0.5, 0.5, 0.5),
])
def test_the_error_table_is_over_absolute_errors(errors, median, p90, worst):
    steps = pd.DataFrame({"rank": 0, "step": range(len(errors)), "wall_us": 1.0, "queued_us": 0.0,
                          "measured_us": 1.0, "replay_us": [1 + e for e in errors], "error": errors})
    r = ReplayResult(steps=steps, not_modeled={}, graphs={}, timings={}, warnings=())
    assert r.error == {"median": pytest.approx(median), "p90": pytest.approx(p90), "worst": pytest.approx(worst)}
    assert r.to_json()["replay_error"]["worst"] == pytest.approx(worst)


def test_trusted_error_is_the_target_p90():
    assert TRUSTED_ERROR == 0.10
