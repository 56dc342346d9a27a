"""The memory timeline figure (perfkit.report.plots.memory_over_time) and the memory_leak notebook's
trace mode on traces recorded with profile_memory=True: a leaky and a clean trainer recorded here, and
a shared GPU trace."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import perfkit
from conftest import SHARED_TRACES
from nbsession import KernelSession, html_text
from perfkit.report import plots

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "memory_leak.py"
UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}
GPU_TRACE = SHARED_TRACES / "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Traces of the leaky trainer (accumulating_callback) and its clean variant: 4 steps, [memory] on."""
    folder = tmp_path_factory.mktemp("memtraces")
    paths = {}
    for variant in ("accumulating_callback", "clean"):
        w = perfkit.make_workload("leaky", "cpu", variant=variant)
        with perfkit.profile(steps=4, wait=2, warmup=1, memory=True, out=folder, name=variant) as p:
            for _ in range(8):
                w.step()
        paths[variant] = p.result.trace
    return paths


def _raw_allocated(path) -> list[int]:
    with gzip.open(path, "rt") as f:
        return [e["args"]["Total Allocated"] for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]


def test_figure_draws_allocated_reserved_steps_and_peak(recorded):
    timeline = perfkit.memory_timeline(perfkit.load_trace(recorded["accumulating_callback"], use_cache=False))
    fig = plots.memory_over_time(timeline)
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert "reserved" not in lines  # the CPU allocator reserves nothing: no flat zero line
    scale = UNITS[ax.get_ylabel()]
    allocated = lines["allocated"].get_ydata()
    assert max(allocated) * scale == pytest.approx(max(_raw_allocated(recorded["accumulating_callback"])))
    peak_x, peak_y = lines["peak"].get_xdata()[0], lines["peak"].get_ydata()[0]
    assert peak_y * scale == pytest.approx(timeline.devices[0]["peak_bytes"])
    assert peak_x == pytest.approx(lines["allocated"].get_xdata()[list(allocated).index(max(allocated))])
    boundaries = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(boundaries) == 4 + 1  # each recorded step's start, and the last step's end
    assert "+16.2 KiB/step held at step ends" in ax.get_title() and "cpu (rank 0): peak" in ax.get_title()


def test_figure_without_memory_events_says_how_to_record():
    path = SHARED_TRACES / "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    if not path.exists():
        pytest.skip(f"{path} not found: real traces live in ../shared/traces")
    fig = plots.memory_over_time(perfkit.memory_timeline(perfkit.load_trace(path, use_cache=False)))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["no [memory] events: record with profile_memory=True (perfkit profile --memory)"]


def test_figure_on_a_shared_gpu_trace_has_a_panel_per_device():
    if not GPU_TRACE.exists():
        pytest.skip(f"{GPU_TRACE} not found: real traces live in ../shared/traces")
    timeline = perfkit.memory_timeline(perfkit.load_trace(GPU_TRACE, use_cache=False))
    fig = plots.memory_over_time(timeline)
    assert [ax.get_title().split(" (rank")[0] for ax in fig.axes] == [d["device"] for d in timeline.devices]
    cuda = next(ax for ax in fig.axes if ax.get_title().startswith("cuda"))
    peak = next(line for line in cuda.get_lines() if line.get_label() == "peak")
    assert peak.get_ydata()[0] * UNITS[cuda.get_ylabel()] == timeline.device("cuda:0")["peak_bytes"]
    assert {line.get_label() for line in cuda.get_lines()} >= {"allocated", "reserved", "peak"}


@pytest.mark.slow
def test_notebook_trace_mode_shows_the_memory_timeline(recorded, tmp_path):
    session = KernelSession(tmp_path)
    try:
        nb = session.run(NOTEBOOK, {"mode": "trace", "trace_path": str(recorded["accumulating_callback"]),
                                    "trace_path_b": str(recorded["clean"]),
                                    "perf_log_path": str(tmp_path / "perf_log.csv")})
        text = html_text(nb)
        assert text.count("Memory timeline") >= 2  # one summary per trace
        assert "a leak inside this trace" in text  # the leaky trace's growth per step
        assert "no [memory] events" not in text
        plain = session.run(NOTEBOOK, {"mode": "trace", "perf_log_path": str(tmp_path / "perf_log.csv")})
        assert html_text(plain).count("no [memory] events: record with profile_memory=True") == 2
    finally:
        session.close()


ANATOMY = Path(__file__).resolve().parents[1] / "notebooks" / "step_anatomy.py"


@pytest.mark.slow
def test_step_anatomy_report_shows_memory_over_time(recorded, tmp_path):
    """The report `perfkit profile --memory --report` writes: step_anatomy on a trace with [memory]
    events shows the timeline with the growth per step; without them, one line on how to record it."""
    session = KernelSession(tmp_path)
    try:
        nb = session.run(ANATOMY, {"trace_path": str(recorded["accumulating_callback"]),
                                   "perf_log_path": str(tmp_path / "perf_log.csv")})
        text = html_text(nb)
        assert "growth per step" in text and "KiB" in text and "No [memory] events" not in text
        plain = session.run(ANATOMY, {"perf_log_path": str(tmp_path / "perf_log.csv")})
        assert "No [memory] events in this trace: record with profile_memory=True" in html_text(plain)
    finally:
        session.close()
