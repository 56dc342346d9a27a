"""The same quantity is the same number in every command (or the output says why it differs), on
every trace in data/traces/ and ../shared/traces/public: step time, GPU busy time, blocked time, and
per device and per compute stream, busy + idle = step wall time."""
from pathlib import Path

import numpy as np
import pytest

import perfkit
from perfkit.analysis.step.gaps import CLASSES
from perfkit.analysis.summary import summarize

from conftest import loaded_trace, shared_traces

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted((ROOT / "data" / "traces" / "cpu").glob("*.json.gz")) + shared_traces()


@pytest.mark.parametrize("path", TRACES, ids=[p.name[:48] for p in TRACES])
def test_one_trace_one_set_of_figures(path):
    trace = loaded_trace(path)
    d = perfkit.diagnose(trace)
    cpu = perfkit.cpu_bound(trace)
    full = cpu.steps[cpu.steps["verdict"] != "partial step"]
    anatomy = perfkit.step_anatomy(trace)
    # step time: the diagnosis, cpu_bound's full steps and step_anatomy's mean step
    assert d.steps["wall_us"].sum() == pytest.approx(full["wall_us"].sum())
    assert anatomy.wall_us == pytest.approx(full["wall_us"].mean())
    # blocked time: summary's sync points are perfkit sync-points' totals, inside + outside the steps
    sync = perfkit.syncs(trace).total
    points = summarize(trace)["sync_points"]
    assert points["count"] == sync["count"] and points["blocked_us"] == pytest.approx(sync["blocked_us"])
    assert points["in_steps"]["blocked_us"] + points["outside_steps"]["blocked_us"] == pytest.approx(sync["blocked_us"])
    assert points["note"]  # says why it differs from the runtime-call count beside it
    if anatomy.waiting is not None:
        assert anatomy.waiting["blocked_per_step_us"] == pytest.approx(sync["in_steps"]["blocked_us"] / sync["steps"])
    if not trace.has_gpu_events:
        assert anatomy.gpu_busy_us is None and d.verdict in ("CPU-only trace", "GPU activity not recorded")
        return
    gaps = perfkit.gpu_gaps(trace)
    s = gaps.steps
    idle = sum(s[f"{c}_us"] for c in CLASSES)
    # per device: busy + idle (the classes other than other_stream) = wall; per compute stream: busy + all idle
    assert (s["gpu_busy_us"] + idle - s["other_stream_us"] - s["wall_us"]).abs().max() < 0.01
    assert (s["compute_busy_us"] + idle - s["wall_us"]).abs().max() < 0.01
    # GPU busy: gaps, cpu_bound's full steps, step_anatomy and the diagnosis's shares
    assert s["gpu_busy_us"].sum() == pytest.approx(full["gpu_busy_us"].sum(), rel=1e-9, abs=0.01)
    assert anatomy.gpu_busy_us == pytest.approx(full["gpu_busy_us"].mean(), rel=1e-9, abs=0.01)
    less_warm = (full["wall_us"] - full["warmup_us"]).to_numpy()
    shares = d.steps["gpu_busy_share"].to_numpy() * less_warm  # NaN for a step that is warm-up whole
    steady = full["gpu_busy_us"] - full["gpu_busy_warmup_us"]  # the share's numerator leaves warm-up out too
    assert np.nansum(shares) == pytest.approx(steady.sum(), rel=1e-6, abs=0.01)
    assert (d.steps[[c for c in d.steps if c.endswith("_share")]].fillna(0) <= 1 + 1e-9).all().all()
