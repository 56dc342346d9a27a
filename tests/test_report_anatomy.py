"""The step_anatomy notebook's helpers: the icicle layout and figures (plots.anatomy), the tables
that say where to look (lookat), its perf-log rows and the card's fix, on exact inputs and on the
shipped traces (a CPU one with Python stacks; rank 0 of the synthetic GPU job)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from perfkit.report import step_anatomy
import perfkit
from perfkit.errors import ParameterError
from perfkit.report import step_anatomy as lookat, tables
from perfkit.report.plots import anatomy as plots

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "data" / "traces" / "cpu" / "mppi_float_tensor.json.gz"
GPU = ROOT / "data" / "traces" / "ranks" / "ddp4_slow_dataloader" / "rank0.pt.trace.json.gz"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


@pytest.fixture(scope="module")
def cpu():
    trace = perfkit.load_trace(CPU)
    return trace, perfkit.hotspots(trace), perfkit.critical_path(trace), perfkit.gpu_gaps(trace)


@pytest.fixture(scope="module")
def gpu():
    trace = perfkit.load_trace(GPU)
    return trace, perfkit.critical_path(trace), perfkit.gpu_gaps(trace)


def _texts(fig) -> str:
    return " | ".join(t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")))


# -- icicle -----------------------------------------------------------------------------------------

def test_icicle_layout_nests_callees_under_callers_and_merges_the_trunk():
    dispatch = "_call_impl (torch/nn/modules/module.py:1779)"  # hidden: its time goes to aten::mm
    stacks = pd.DataFrame({"stack": [f"main (t.py:1);step (t.py:5);{dispatch};aten::mm", "main (t.py:1);step (t.py:5);sleep",
                                     "main (t.py:1);log (t.py:9)", "main (t.py:1);tiny (t.py:12)"],
                           "self_us": [10.0, 5.0, 3.0, 0.001]})
    layout, total = plots.icicle_layout(stacks, min_share=0.01)
    assert total == pytest.approx(18.001)
    got = layout.set_index("label")
    assert list(layout["label"]) == ["main", "step (t.py:5)", "aten::mm", "sleep", "log (t.py:9)"]  # tiny: too narrow
    assert got.loc["main", "kind"] == "trunk" and got.loc["main", "width_us"] == pytest.approx(total)
    assert (got.loc["step (t.py:5)", ["depth", "start_us", "width_us"]].tolist() == [1, 0.0, 15.0])
    assert (got.loc["log (t.py:9)", ["depth", "start_us", "width_us"]].tolist() == [1, 15.0, 3.0])
    assert (got.loc["sleep", ["depth", "start_us", "width_us", "kind"]].tolist() == [2, 10.0, 5.0, "waiting"])
    assert got.loc["aten::mm", "kind"] == "op" and got.loc["log (t.py:9)", "kind"] == "user"
    assert plots.icicle_layout(stacks, max_depth=2)[0]["depth"].max() == 1
    assert dispatch in plots.icicle_layout(stacks, hide=())[0]["label"].tolist()
    assert plots.frame_kind("nn.Module: Linear_0") == "module"
    assert plots.frame_kind("forward (torch/nn/modules/linear.py:130)") == "library"


def test_icicle_of_a_real_trace_spans_the_threads_covered_time(cpu):
    trace, spots, _, _ = cpu
    fig = plots.icicle(spots)
    ax = fig.axes[0]
    covered_ms = spots.threads["covered_us"].sum() / 1e3  # self times partition the covered time
    assert ax.get_xlim()[1] == pytest.approx(covered_ms)
    layout, _ = plots.icicle_layout(spots.stacks)
    assert layout.iloc[0]["kind"] == "trunk" and "record_trace" in layout.iloc[0]["label"]
    assert {"user", "library", "op"} <= set(layout["kind"])
    assert "linear" in _texts(fig) and "host time (ms)" in ax.get_xlabel()


# -- critical path and GPU time -----------------------------------------------------------------

def test_critical_path_bars_stack_each_kind_to_the_path(gpu):
    _, path, _ = gpu
    fig = plots.critical_path_bars(path)
    ax = fig.axes[0]
    widths = {}
    for container in ax.containers:
        widths[container.get_label()] = [p.get_width() for p in container.patches]
    total = [sum(w[i] for w in widths.values()) for i in range(len(path.steps))]
    assert total == pytest.approx((path.steps["path_us"] / 1e3).tolist())
    assert widths["kernel"] == pytest.approx((path.steps["kernel_us"] / 1e3).tolist())
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"step {s}" for s in path.steps["step"]]


def test_gpu_time_bars_split_each_step_into_busy_and_idle_classes(gpu, cpu):
    _, _, gaps = gpu
    ax = plots.gpu_time_bars(gaps).axes[0]
    labels = [c.get_label() for c in ax.containers]
    assert labels[0] == "compute stream busy" and {"idle: input", "idle: other_stream"} <= set(labels)
    ends = [max(p.get_x() + p.get_width() for c in ax.containers for p in [c.patches[i]])
            for i in range(len(gaps.steps))]
    assert ends == pytest.approx((gaps.steps["wall_us"] / 1e3).tolist())  # busy + idle = the step
    assert "no GPU" in _texts(plots.gpu_time_bars(cpu[3]))


# -- where to look --------------------------------------------------------------------------------

def test_times_are_offsets_from_the_files_first_event(gpu):
    trace, _, gaps = gpu
    raw = json.loads(gzip.decompress(GPU.read_bytes()))["traceEvents"]
    first = min(e["ts"] for e in raw if e.get("ph") in ("X", "i", "I", "C"))
    top = lookat.top_gaps(gaps, trace, 3)
    longest = gaps.top(1).iloc[0]
    assert top.loc[0, "raw ts (us)"] == f"{longest['start_us']:.0f}"
    assert top.loc[0, "from (ms)"] == pytest.approx((longest["start_us"] - first) / 1e3, abs=1e-3)
    assert top.loc[0, "to (ms)"] - top.loc[0, "from (ms)"] == pytest.approx(top.loc[0, "idle (ms)"], abs=2e-3)
    # The DataLoader's nearest caller in user code (gaps: Python frames name the user function).
    assert (top.loc[0, "class"], top.loc[0, "function"], top.loc[0, "where"]) == ("input", "train_step", "train.py:44")


def test_gap_classes_total_the_idle_time(gpu, cpu):
    _, _, gaps = gpu
    table = lookat.gap_classes(gaps)
    assert table["idle (ms)"].sum() == pytest.approx(gaps.gaps["dur_us"].sum() / 1e3, abs=1e-2)
    assert table.iloc[0]["class"] == "input" and table["% of idle"].sum() == pytest.approx(100, abs=0.2)
    assert lookat.gap_classes(cpu[3]).empty and "No GPU timeline" in lookat.gap_note(cpu[3])


def test_path_stretches_name_what_the_host_ran(gpu):
    trace, path, _ = gpu
    table = lookat.path_stretches(path, trace, 6)
    # On this job the longest host stretch of each step is the DataLoader (3 ms per step).
    assert (table["kind"] == "host").all() and (table["through"] == LOADER).all()
    assert sorted(table["step"]) == sorted(path.steps["step"])


def test_findings_say_which_range_to_look_at(gpu):
    trace, _, gaps = gpu
    table = lookat.findings_table(gaps.findings, trace)
    f = gaps.findings[0]
    start = (f.evidence["longest_start_us"] - min(lookat.origins(trace).values())) / 1e3
    assert table.loc[0, "look at"].startswith(f"{start:,.3f}-{start + f.evidence['longest_us'] / 1e3:,.3f} ms")
    assert "raw ts" in table.loc[0, "look at"]


def test_annotated_pointer_names_the_file_written_or_gives_the_command(gpu, tmp_path):
    trace = gpu[0]
    pointer = lookat.annotated_pointer(trace, "trace")
    assert pointer.path is None and pointer.commands == (  # paths relative to the workbook (this clone)
        "perfkit annotate data/traces/ranks/ddp4_slow_dataloader/rank0.pt.trace.json.gz "
        "-o rank0.pt.trace.annotated.json.gz",)
    assert "<code>perfkit annotate" in pointer._repr_html_()
    written = lookat.annotated_pointer(trace, "trace", tmp_path / "a.json.gz")
    assert written.path == tmp_path / "a.json.gz" and not written.commands and "Wrote" in written.text
    assert lookat.annotated_pointer(trace, "live").commands[0].startswith("perfkit annotate run.json.gz")
    assert len(lookat.annotated_pointer(perfkit.load_trace(GPU.parent), "trace").commands) == 4


def test_hotspot_table_reads_back_the_result(cpu):
    _, spots, _, _ = cpu
    table = lookat.hotspot_table(spots, 5)
    top = spots.top(5)
    assert table["function"].tolist() == top["function"].tolist()
    assert table["self (ms)"].tolist() == pytest.approx((top["self_us"] / 1e3).round(3).tolist())
    # a perfkit function's "where" is the line its def starts on in the shipped source
    ours = table[table["where"].str.startswith("perfkit/workloads/mppi.py:")]
    assert len(ours)
    source = (Path(perfkit.__file__).parent / "workloads" / "mppi.py").read_text().splitlines()
    for func, where in zip(ours["function"], ours["where"]):
        assert source[int(where.rsplit(":", 1)[1]) - 1].lstrip().startswith(f"def {func}(")


def test_in_ms_converts_durations_and_keeps_timestamps():
    frame = pd.DataFrame({"step": [1], "start_us": [5e6], "wall_us": [1500.0], "name": ["x"]})
    out = tables.in_ms(frame)
    assert list(out.columns) == ["step", "start_us", "wall (ms)", "name"] and out.loc[0, "wall (ms)"] == 1.5


# -- rows and the card ------------------------------------------------------------------------------

def test_step_anatomy_rows_with_a_gpu(gpu):
    trace, path, gaps = gpu
    out = {r["metric"]: r for r in step_anatomy.step_anatomy_rows(path, gaps, "trace r0", "A100")}
    assert list(out)[:3] == ["mean_step_ms", "gpu_busy_ms_per_step", "gpu_idle_ms_per_step"]
    assert out["mean_step_ms"]["value"] == pytest.approx(perfkit.step_anatomy(trace).wall_us / 1e3)
    assert out["idle_input_ms_per_step"]["value"] == pytest.approx(gaps.steps["input_us"].mean() / 1e3)
    assert "idle_compile_ms_per_step" not in out  # no compile gaps: not logged
    assert all(r["ci_low"] <= r["value"] <= r["ci_high"] for r in out.values())


def test_step_anatomy_rows_and_fix_without_a_gpu(cpu):
    trace, _, path, gaps = cpu
    out = step_anatomy.step_anatomy_rows(path, gaps, "trace mppi", "cpu")
    assert [r["metric"] for r in out] == ["mean_step_ms"]
    anatomy = perfkit.step_anatomy(trace)
    # one diagnosis: the card's fix is perfkit diagnose's, and on a CPU-only trace it says what to record
    assert anatomy.verdict == "CPU-only trace" and anatomy.fix == perfkit.diagnose(trace).fix
    assert anatomy.fix.startswith("No GPU activity was recorded") and "ProfilerActivity.CUDA" in anatomy.fix


def test_anatomy_verdict_and_fix_are_the_diagnosis(gpu):
    trace, _, gaps = gpu
    anatomy, diagnosis = perfkit.step_anatomy(trace), perfkit.diagnose(trace)
    assert (anatomy.verdict, anatomy.fix) == (diagnosis.verdict, diagnosis.fix)
    assert anatomy.sentence.startswith(f"{diagnosis.verdict}; step ")


