"""Profiler steps: ProfilerStep# events, the DataLoader and Optimizer.step fallbacks, the whole-trace
fallback, the shared window lookup; and the ac2g flow fill of Trace.launches()."""
import numpy as np
import pandas as pd
import pytest

from perfkit.trace import load_trace
from perfkit.trace.steps import locate, window_index

from conftest import shared_traces
from tracebuilder import TraceBuilder

OPTIMIZER = "Optimizer.step#Adam.step"


def load(b, tmp_path):
    return load_trace(b.write(tmp_path / "t.json"), use_cache=False)


def steps_of(trace):
    s = trace.steps
    return list(zip(s["step"], s["start_us"] - s["start_us"].min(), s["end_us"] - s["start_us"].min(),
                    s["source"]))


def test_profiler_steps_win_over_annotations(tmp_path):
    b = TraceBuilder()
    b.step(7, 0, 100)
    b.step(8, 100, 50)
    b.dataloader(10, 5)
    b.dataloader(110, 5)
    t = load(b, tmp_path)
    assert steps_of(t) == [(7, 0, 100, "ProfilerStep"), (8, 100, 150, "ProfilerStep")]
    assert not any("ProfilerStep#" in w for w in t.warnings)


def test_dataloader_annotations_start_steps(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::empty", 0, 2)                 # host activity before the first loader call
    for start in (5, 105, 255):
        b.dataloader(start, 20)
        b.cpu_op("aten::mm", start + 30, 40)
    b.cpu_op("aten::add", 380, 20)                # the last step ends with the last host event (400)
    t = load(b, tmp_path)
    assert steps_of(t) == [(0, 0, 100, "dataloader"), (1, 100, 250, "dataloader"), (2, 250, 395, "dataloader")]
    assert any("enumerate(DataLoader)" in w for w in t.warnings)
    ev = t.events
    assert ev.loc[ev["name"] == "aten::empty", "step"].tolist() == [-1]   # before the first step
    assert ev.loc[ev["name"] == "aten::mm", "step"].tolist() == [0, 1, 2]


def test_optimizer_steps_end_steps(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 50)
    b.annotation(OPTIMIZER, 60, 20)               # step 0: [0, 80)
    b.cpu_op("aten::mm", 90, 50)
    b.annotation(OPTIMIZER, 150, 30)              # step 1: [80, 180)
    b.cpu_op("aten::mm", 200, 10)                 # after the last optimizer step: no step
    t = load(b, tmp_path)
    assert steps_of(t) == [(0, 0, 80, "optimizer"), (1, 80, 180, "optimizer")]
    assert any("Optimizer.step" in w for w in t.warnings)
    assert t.events.loc[t.events["name"] == "aten::mm", "step"].tolist() == [0, 1, -1]


def test_one_annotation_is_not_enough_and_the_whole_trace_is_one_step(tmp_path):
    b = TraceBuilder()
    b.dataloader(10, 5)
    b.annotation(OPTIMIZER, 60, 20)
    b.cpu_op("aten::mm", 100, 50)
    t = load(b, tmp_path)
    assert steps_of(t) == [(0, 0, 140, "whole trace")]
    assert any("whole trace is one step" in w for w in t.warnings)


def test_locate_and_window_index():
    starts, ends = np.array([0.0, 10.0, 30.0]), np.array([10.0, 20.0, 40.0])
    assert locate(starts, ends, [-1, 0, 9.5, 10, 25, 39, 40]).tolist() == [-1, 0, 0, 1, -1, 2, -1]
    windows = pd.DataFrame({"rank": [1, 0, 0], "start_us": [0.0, 10.0, 0.0], "end_us": [100.0, 20.0, 10.0]},
                           index=[5, 6, 7])
    got = window_index(windows, pd.Series([5.0, 15.0, 50.0, 50.0]), pd.Series([0, 0, 0, 1]))
    assert got.tolist() == [7, 6, -1, 5]


# --- Trace.launches(): correlation from ac2g flows -------------------------------------------------------

def test_gpu_events_without_correlation_are_linked_through_ac2g_flows(tmp_path):
    """Some traces write the correlation id only on the launch and on the flow arrows: the kernel is
    linked through the ac2g flow that ends where it starts."""
    b = TraceBuilder()
    b.step(0, 0, 1000)
    for k in range(3):
        b.launch(f"kernel_{k}", 100 * k + 10, 5, gpu_ts=100 * k + 50 + k, gpu_dur=20)
    for e in b.events:
        if e.get("cat") == "kernel":
            e["args"].pop("correlation")
    t = load(b, tmp_path)
    assert (t.kernels()["correlation"] < 0).all()
    links = t.launches()
    assert links["gpu_name"].tolist() == ["kernel_0", "kernel_1", "kernel_2"]
    assert links["launch_name"].tolist() == ["cudaLaunchKernel"] * 3
    assert links["queue_delay_us"].tolist() == pytest.approx([40, 41, 42])


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.parametrize("path", shared_traces(), ids=lambda p: p.name)
def test_launches_of_fewer_categories_equal_their_rows_of_all_links(path):
    """Once every category is linked, a call for fewer categories filters those links instead of
    joining again: the same table as linking them alone (ac2g flow fills, ROCm names, cuda_sync)."""
    alone = load_trace(path)
    keys = [("gpu_memcpy",), ("gpu_memcpy", "cuda_sync"), ("kernel",), ("kernel", "gpu_memcpy", "gpu_memset")]
    direct = {key: alone.launches(key) for key in keys}
    shared = load_trace(path)
    shared.launches()
    for key in keys:
        pd.testing.assert_frame_equal(shared.launches(key), direct[key])
