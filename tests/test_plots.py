"""Figures of perfkit.report.plots on small real results, and the widgets explorer.

Each plot is called on a real result (a shipped CPU trace, a tiny A/B, a short leak hunt, a
short monitor run, a perf log) and checked for its axes, labels and drawn artists; GPU-only
figures are checked for their "no GPU" text on this CPU machine and, where ../shared has GPU
traces, for their GPU lanes.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from conftest import shared_trace
from perfkit.errors import ParameterError
from perfkit.report import plots, widgets
from perfkit.report.plots.figure import label
from perfkit.report.prose import ab_word
from perfkit.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "data" / "traces" / "cpu"


def _texts(fig) -> str:
    out = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return " | ".join(out)


@pytest.fixture(scope="module")
def cpu_trace():
    return load_trace(CPU / "ppo_item_logging.json.gz")


@pytest.fixture(scope="module")
def ab():
    from perfkit.bench.compare import compare

    return compare(lambda: sum(range(200)), lambda: sum(range(2000)), repeats=12, warmup=1, labels=("short", "long"))


@pytest.fixture(scope="module")
def leak():
    from perfkit.bench.leak import hunt_leak
    from perfkit.workloads.registry import make_workload

    with make_workload("leaky", "cpu", variant="unbounded_history") as w:
        return hunt_leak(w.step, steps=40, warmup=2, sample_every=10)


def test_step_timeline_cpu_trace_has_thread_lanes_and_says_no_gpu(cpu_trace):
    fig = plots.step_timeline(cpu_trace, step=2)
    ax = fig.axes[0]
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert lanes and all(lane.startswith("thread ") for lane in lanes)  # no GPU lane on a CPU-only trace
    assert "step 2" in ax.get_title() and ax.get_xlabel().endswith("(ms)")
    assert len(ax.collections) >= 1  # broken_barh per lane and category
    wall_ms = float(cpu_trace.steps.set_index("step").loc[2, "dur_us"]) / 1e3
    assert ax.get_xlim()[1] == pytest.approx(wall_ms)
    assert "no GPU events in this trace" in _texts(fig)


def test_step_timeline_rejects_unknown_step(cpu_trace):
    with pytest.raises(ParameterError, match="step=99.*steps: 1, 2, 3"):
        plots.step_timeline(cpu_trace, step=99)


def test_step_timeline_gpu_trace_has_stream_lanes():
    trace = load_trace(shared_trace("param_v100_dlrm_rank0.pt.trace.json.gz"))
    ax = plots.step_timeline(trace).axes[0]
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert any(l.startswith("stream 0:") for l in lanes) and any(l.startswith("thread ") for l in lanes)
    assert {"kernel", "cuda_runtime"} <= {c.get_label() for c in ax.collections}


def test_breakdown_bars_follow_the_table(cpu_trace):
    from perfkit.analysis.step.cpu_bound import cpu_bound

    result = cpu_bound(cpu_trace)
    table = result.top_ops(5)
    ax = plots.breakdown(table, value="self_us", top=5).axes[0]
    # long op names are shortened on the axis, with an ellipsis (plots.figure.label)
    assert [t.get_text() for t in ax.get_yticklabels()] == [label(n) for n in table["name"]]
    widths = sorted((p.get_width() for p in ax.patches), reverse=True)
    assert widths == pytest.approx(sorted(table["self_us"], reverse=True))
    with pytest.raises(ParameterError, match="total_ms"):
        plots.breakdown(table, value="total_ms")
    fig = plots.step_breakdown(result)
    ax = fig.axes[0]
    # CPU-only: four host layers per step, no GPU bar, and the title says why
    assert "CPU-only trace" in ax.get_title() and "no GPU events" in ax.get_title()
    assert len(ax.patches) == 4 * len(result.steps)
    assert "GPU busy" not in ax.get_legend_handles_labels()[1]


def test_step_breakdown_stacks_compile_time_so_host_bars_add_up(tmp_path):
    """A compiling step's host bars (DataLoader, compile, syncs, other) end at host_busy_us."""
    from compile_traces import COMPILE_US, compile_dominated
    from perfkit.analysis.step.cpu_bound import cpu_bound

    result = cpu_bound(load_trace(compile_dominated().write(tmp_path / "c.json")))
    assert result.verdict == "compiling"
    ax = plots.step_breakdown(result).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels.index("host: DataLoader") < labels.index("host: compile") < labels.index("host: syncs")
    assert "GPU busy" in labels
    host_bars = [p for p in ax.patches if p.get_y() < 0]  # host bars sit above the step's tick
    right = max(p.get_x() + p.get_width() for p in host_bars)
    assert right == pytest.approx(result.steps["host_busy_us"].iloc[0] / 1e3)
    compile_bar = max(host_bars, key=lambda p: p.get_width())
    assert compile_bar.get_width() == pytest.approx(COMPILE_US / 1e3)


def test_queue_delay_histogram_marks_median_threshold_and_step():
    from perfkit.analysis.step.cpu_bound import cpu_bound

    result = cpu_bound(load_trace(shared_trace("tracelens_mi300x_vllm_piecewise_graph_exec.json.gz")))
    assert result.verdict == "GPU-bound (host ahead)"
    fig = plots.queue_delay(result)
    ax = fig.axes[0]
    delays = result.launches["queue_delay_us"].dropna()
    assert sum(p.get_height() for p in ax.patches) == len(delays)
    lines = {l.get_label(): l.get_xdata()[0] for l in ax.get_lines()}
    median = next(k for k in lines if k.startswith("median delay"))
    assert lines[median] == pytest.approx(delays.median() / 1e3)
    step = next(k for k in lines if k.startswith("mean step"))
    assert lines[step] == pytest.approx(result.overall["wall_us"] / result.overall["steps"] / 1e3)
    assert "GPU-bound (host ahead)" in ax.get_title()


def test_queue_delay_on_a_cpu_only_trace_says_no_gpu(cpu_trace):
    from perfkit.analysis.step.cpu_bound import cpu_bound

    assert "no GPU" in _texts(plots.queue_delay(cpu_bound(cpu_trace)))


def test_names_with_dollar_are_literal_text():
    import pandas as pd

    fig = plots.breakdown(pd.DataFrame({"name": ["$x$ kernel<script>"], "total_us": [1.0]}))
    assert fig.axes[0].get_yticklabels()[0].get_text() == r"\$x\$ kernel<script>"
    plots.figure_png(fig)  # renders without a mathtext error


def test_ab_distribution_shows_both_sides_and_the_speedup_ci(ab):
    fig = plots.ab_distribution(ab)
    left, right = fig.axes
    assert [t.get_text() for t in left.get_xticklabels()] == ["short", "long"]
    assert left.get_ylabel() == "time per call (ms)"
    assert ab_word(ab) in left.get_title()  # its own verdict, or "inconclusive" on a machine too loaded for one
    assert right.get_title() == f"speedup {ab.speedup:.3g}x" and right.get_ylabel().startswith("speedup")
    point, *caps = (line.get_ydata()[0] for line in right.lines[1:])  # after the no-change line: point, CI caps
    assert point == pytest.approx(ab.speedup) and sorted(caps) == pytest.approx(list(ab.speedup_ci))
    assert len(left.collections) >= 2  # violins and strip points


def test_memory_growth_panels_have_samples_and_fit(leak):
    fig = plots.memory_growth(leak)
    assert leak.verdict in fig._suptitle.get_text()
    heap = next(ax for ax in fig.axes if ax.get_ylabel().startswith("tracemalloc_bytes"))
    assert [l.get_label() for l in heap.get_lines()] == ["samples", "fit"]
    assert len(heap.get_lines()[0].get_xdata()) == len(leak.to_frame())
    assert "growing" in heap.get_title()


def test_monitor_timeline_without_gpu_says_why():
    import time

    from perfkit.bench.monitor import SystemMonitor

    with SystemMonitor(interval_s=0.02, gpu=False) as mon:
        time.sleep(0.1)
    fig = plots.monitor_timeline(mon.result())
    assert fig.axes[0].get_title() == "System monitor (no GPU: GPU monitoring switched off)"  # no "(gpu=False)"
    assert [ax.get_ylabel() for ax in fig.axes] == ["cpu_process_percent", "cpu_system_percent", "rss (MiB)"]
    assert fig.axes[-1].get_xlabel() == "time since start (s)"


def test_copy_figures_without_gpu_say_no_gpu(cpu_trace):
    from perfkit.analysis.htod import htod
    from perfkit.bench.htod import htod_sweep

    sweep = htod_sweep(sizes_bytes=[4096], repeats=1, device="auto")
    if sweep.available:
        fig = plots.copy_bandwidth(sweep)
        assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_ylabel().startswith("GB/s")
    else:
        assert "no GPU: torch.cuda.is_available() is False" in _texts(plots.copy_bandwidth(sweep))
    assert "no GPU" in _texts(plots.copy_kinds(htod(cpu_trace)))


def test_copy_kinds_on_a_gpu_trace():
    from perfkit.analysis.htod import htod

    result = htod(load_trace(shared_trace("param_v100_dlrm_rank0.pt.trace.json.gz")))
    left, right = plots.copy_kinds(result).axes
    kinds = [t.get_text() for t in left.get_xticklabels()]
    assert "HtoD pageable" in kinds and "HtoD pinned" in kinds
    assert right.get_ylabel().startswith("GB/s") and len(right.patches) == 2 * len(result.to_frame())


def test_diff_breakdown_and_loss_curves():
    from perfkit.analysis.trace_diff.diff import diff
    from perfkit.bench.amp_ab import amp_ab
    from perfkit.workloads.mlp import mlp_problem

    d = diff(load_trace(CPU / "leaky_accumulating_callback.json.gz"), load_trace(CPU / "leaky_clean.json.gz"))
    ax = plots.diff_breakdown(d, top=5).axes[0]
    assert len(ax.patches) == 5 and ax.get_xlabel() == "change in time per step (us)"
    assert all(t.get_text().startswith(("op: ", "kernel: ")) for t in ax.get_yticklabels())
    p = mlp_problem(batch=4, features=4, hidden=8, layers=1)
    amp = amp_ab(p.make_model, p.make_batch, p.loss_fn, steps=3, repeats=5, warmup=1, device="cpu", compare_fused=False)
    left, right = plots.loss_curves(amp).axes
    assert [l.get_label() for l in left.get_lines()] == ["fp32", "bfloat16 autocast"]
    assert len(left.get_lines()[0].get_xdata()) == 3 and right.get_xlabel() == "step"


@pytest.mark.parametrize("value, low, high", [(5.5, 1.0, 2.0), (1.5, 1.0, 2.0), (0.5, 1.0, 2.0)])
def test_perf_log_trend_draws_each_interval_as_measured(tmp_path, value, low, high):
    """A figure may lie outside its CI (the ratio of medians beside the paired CI): the interval is drawn from its
    low to its high end wherever the point is (errorbar refused a negative length: a notebook failed under load)."""
    from perfkit.report.perflog import PerfLog

    log = PerfLog(tmp_path / "log.csv")
    for i in range(2):
        log.append(investigation="sync_points", metric="speedup", value=value, unit="x", device="cpu", ci_low=low,
                   ci_high=high, run_id=f"2026-01-0{i + 1}/120000/sync_points")
    ax = plots.perf_log_trend(log.read(), "sync_points").axes[0]
    segments = [tuple(seg[:, 1]) for c in ax.collections for seg in c.get_segments()]
    assert segments and set(segments) == {(low, high)}


def test_perf_log_trend_marks_regressions(tmp_path):
    from perfkit.report.perflog import PerfLog

    log = PerfLog(tmp_path / "log.csv")
    for i, v in enumerate([10.0, 10.1, 24.0]):
        log.append(investigation="cpu_bound", metric="median_step_ms", value=v, unit="ms", change=f"c{i}",
                   device="cpu", higher_is_better=False, ci_low=v * 0.99, ci_high=v * 1.01,
                   run_id=f"2026-01-0{i + 1}/12000{i}/cpu_bound")
    ax = plots.perf_log_trend(log.read(), "cpu_bound").axes[0]
    lines = {l.get_label(): l for l in ax.get_lines()}
    assert list(lines["regressed"].get_ydata()) == [24.0]
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "01-01 12:00:00 c0"  # the run, not only its day
    assert "cpu_bound: median_step_ms (cpu)" == ax.get_title()
    assert "no rows" in _texts(plots.perf_log_trend(log.read(), "htod"))


def test_workload_steps_and_png(tmp_path):
    from perfkit.workloads.registry import make_workload

    with make_workload("leaky", "cpu") as w:
        run = w.run(3)
    fig = plots.workload_steps(run)
    assert isinstance(fig, Figure) and len(fig.axes[0].get_lines()[0].get_xdata()) == 3
    assert plots.figure_png(fig)[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_do_not_touch_pyplot(cpu_trace):
    plots.step_timeline(cpu_trace)
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or pyplot.get_fignums() == []


# -- widgets -----------------------------------------------------------------------------------

def test_trace_files_lists_shipped_traces():
    files = widgets.trace_files()
    assert CPU / "ppo_item_logging.json.gz" in files and all(f.name != "MANIFEST.json" for f in files)
    with pytest.raises(ParameterError, match="does not exist"):
        widgets.trace_files(ROOT / "no-such-folder")


def test_filter_ops_is_literal_and_case_insensitive():
    import pandas as pd

    table = pd.DataFrame({"name": ["aten::addmm", "aten::ADD_", "aten::mm", "a.b"]})
    assert widgets.filter_ops(table, "add")["name"].tolist() == ["aten::addmm", "aten::ADD_"]
    assert widgets.filter_ops(table, ".")["name"].tolist() == ["a.b"]
    assert len(widgets.filter_ops(table, "")) == 4
    with pytest.raises(ParameterError, match="op"):
        widgets.filter_ops(table, "x", column="op")


def test_explorer_updates_its_view_on_filter_and_step():
    ex = widgets.explorer(trace_path=CPU / "leaky_clean.json.gz", top=5)
    assert ex.view.step == 1 and len(ex.view.ops) == 5
    assert [list(o["data"]) for o in ex.out.outputs][1][0] == "image/png"
    ex.filter_box.value = "ADDMM"
    assert ex.view.pattern == "ADDMM" and all("addmm" in n.lower() for n in ex.view.ops["name"])
    ex.step_box.value = 3
    assert ex.view.step == 3 and "step 3" in ex.view.timeline.axes[0].get_title()
    assert len(ex.out.outputs) == 4  # replaced, not appended


def test_diff_breakdown_ranks_ops_and_kernels_together():
    from types import SimpleNamespace

    import pandas as pd

    ops = pd.DataFrame({"name": ["a", "b", "c"], "delta_per_step_us": [1.0, -50.0, 3.0]})
    kernels = pd.DataFrame({"name": ["k1", "k2"], "delta_per_step_us": [40.0, -2.0]})
    ax = plots.diff_breakdown(SimpleNamespace(top_ops=ops, kernels=kernels), top=2).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["op: b", "kernel: k1"]
    assert sorted(p.get_width() for p in ax.patches) == [-50.0, 40.0]


class _FakeGrowth:
    series, unit, state = "rss_bytes", "bytes", "growing"
    per_1000 = 2510.4 * 1024  # bytes per 1,000 steps: 2,510 KiB


class _FakeLeak:
    verdict, decided_by = "leak", "rss_bytes"

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"step": [0, 10, 20], "rss_bytes": [1e8, 1e8 + 25_000, 1e8 + 51_000]})

    def series(self, name):
        return _FakeGrowth() if name == "rss_bytes" else None


def test_memory_growth_title_uses_separators_not_exponents():
    (ax,) = plots.memory_growth(_FakeLeak(), series=("rss_bytes",)).axes
    assert ax.get_title() == "+2,510 KiB/1k steps (growing)"


def test_roofline_ticks_are_plain_numbers_and_log_no_font_noise(caplog):
    import logging

    import perfkit

    result = perfkit.kernels(load_trace(ROOT / "data" / "traces" / "gpu" / "transformer_bf16.pt.trace.json.gz"))
    with caplog.at_level(logging.WARNING, logger="matplotlib"):
        fig = plots.roofline(result)
        plots.figure_png(fig)
    ax = fig.axes[0]
    assert [ax.xaxis.get_major_formatter()(v, 0) for v in (0.1, 1000.0)] == ["0.1", "1,000"]
    assert not [r for r in caplog.records if "findfont" in r.getMessage()]


def test_fix_steps_draws_each_fix_that_applies_against_the_measured_step():
    from perfkit.analysis.step.whatif import whatif

    w = whatif(load_trace(ROOT / "data" / "traces" / "gpu" / "dataloader_workers0.pt.trace.json.gz"))
    ax = plots.fix_steps(w).axes[0]
    applies = [p for p in w.fixes if p.applies]
    assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["dataloader_workers", "cuda_graphs"]
    assert len(ax.patches) == len(applies) and "input-bound" in ax.get_title()
    assert ax.patches[0].get_width() == pytest.approx(w.top.predicted_step_us / 1e3)
    assert ax.patches[0].get_facecolor()[:3] != ax.patches[1].get_facecolor()[:3]  # the top fix stands out
    # skip_warmup is a one-time cost: drawn on the mean step, beside a line at the measured mean
    assert "skip_warmup (mean)" in [t.get_text() for t in ax.get_yticklabels()]
    assert [line.get_xdata()[0] for line in ax.get_lines()] == pytest.approx(
        [w.step_us / 1e3, w.replay.steps["measured_us"].mean() / 1e3])


def test_fix_steps_says_why_when_nothing_was_replayed():
    from perfkit.analysis.step.whatif import whatif

    fig = plots.fix_steps(whatif(load_trace(CPU / "ppo_item_logging.json.gz")))
    assert fig.axes[0].texts[0].get_text().startswith("no GPU events: there is nothing to replay")


def test_memory_growth_title_writes_the_cards_figure(monkeypatch):
    """The plot's growth per 1,000 steps is the card's (``format_number``, 4 significant digits): 1,035
    objects, not the 1,030 that rounding to 3 digits wrote beside a card saying 1,035."""
    monkeypatch.setattr(_FakeGrowth, "per_1000", 1035.2)
    monkeypatch.setattr(_FakeGrowth, "unit", "objects")
    (ax,) = plots.memory_growth(_FakeLeak(), series=("rss_bytes",)).axes
    assert ax.get_title().startswith("+1,035 ")
