"""gpu_gaps: each class on a synthetic trace with the function behind it; the ResNet-50 DataLoader
traces (input-bound with num_workers=0, not with 4), the AlexNet pageable copies, CPU-only traces;
gaps plus busy time tile each step; the CLI."""
import json

import pytest

import perfkit.cli
from perfkit.analysis.step.gaps import CLASSES, gpu_gaps
from perfkit.trace import load_trace

from conftest import shared_trace
from tracebuilder import TraceBuilder

NW0 = "kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz"
NW4 = "kineto_v100_resnet50_dataloader_nw4.pt.trace.json.gz"
ALEXNET = "hta_critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
CPU_ONLY = "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def synthetic(tmp_path):
    """One 2000 us step; each stretch of GPU idleness has one cause."""
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 2000)
    b.python("train.py(5): loop", 0, 2000)
    b.python("torch/utils/data/dataloader.py(700): __next__", 0, 200)          # 0-200 input
    b.launch("k_a", 205, 5, 210, 40)                                           # GPU 210-250
    b.python("train.py(20): compute_reward", 250, 300)                         # 250-560 host_python
    b.launch("k_b", 555, 5, 560, 40)                                           # GPU 560-600
    b.python("torch/_dynamo/convert_frame.py(1000): _compile", 600, 400)       # 600-1010 compile
    b.launch("k_c", 1005, 5, 1010, 40)                                         # GPU 1010-1050
    b.memcpy("HtoD", "Pageable", 1050, 300, 1300, 50, 1 << 20)                 # 1050-1300 sync_wait (staging)
    b.kernel("k_side", 1350, 100, stream=9)                                    # 1350-1450 other_stream
    b.launch("k_d", 1445, 4, 1450, 50)                                         # GPU 1450-1500
    return load_trace(b.write(tmp_path / "g.json"))                            # 1500-2000 tail


def test_each_class_with_its_function(tmp_path):
    r = gpu_gaps(synthetic(tmp_path))
    got = [(g["class"], g["start_us"] - r.steps.iloc[0]["start_us"], g["dur_us"], g["function"])
           for g in r.gaps.to_dict("records")]
    assert got == [("input", 0.0, 210.0, "loop"), ("host_python", 250.0, 310.0, "compute_reward"),
                   ("compile", 600.0, 410.0, "loop"), ("sync_wait", 1050.0, 250.0, "loop"),
                   ("other_stream", 1350.0, 100.0, "loop"), ("tail", 1500.0, 500.0, "loop")]
    assert r.gaps.loc[1, ["file", "line"]].tolist() == ["train.py", 20]
    assert r.totals["input"] == {"count": 1, "dur_us": 210.0, "share": pytest.approx(210 / 1780)}
    row = r.steps.iloc[0]
    assert row["gpu_busy_us"] == 40 * 3 + 50 + 100 + 50 and row["wall_us"] == 2000.0


def test_json_rows_and_totals(tmp_path):
    d = gpu_gaps(synthetic(tmp_path)).to_json()
    assert set(d["totals"]) == set(CLASSES)
    assert set(d["rows"][0]) >= {"step", "start_us", "dur_us", "class", "function", "file", "line"}
    assert d["top"][0]["class"] == "tail" and d["has_gpu"] is True


def _tiles(r):
    """Per step: gaps of the busiest stream + its busy time cover the step exactly (one stream here)."""
    per_step = r.gaps.groupby("step")["dur_us"].sum()
    steps = r.steps.set_index("step")
    assert (per_step + steps["gpu_busy_us"] - steps["wall_us"]).abs().max() < 1e-6


def test_resnet50_without_workers_is_input_bound():
    r = gpu_gaps(load_trace(shared_trace(NW0)))
    assert r.totals["input"]["share"] > 0.5
    assert max(r.totals.items(), key=lambda kv: kv[1]["dur_us"])[0] == "input"
    assert r.findings[0].title.startswith("GPU idle for input")
    _tiles(r)


def test_resnet50_with_four_workers_is_not():
    r = gpu_gaps(load_trace(shared_trace(NW4)))
    assert r.totals["input"]["share"] < 0.05
    _tiles(r)


def test_alexnet_pageable_copies_show_their_sync_waits():
    r = gpu_gaps(load_trace(shared_trace(ALEXNET)))
    waits = r.gaps[r.gaps["class"] == "sync_wait"]
    # The gaps before three pageable HtoD copies: the host stages each copy for ~250 us.
    staged = waits[(waits["function"] == "aten::to") & (waits["sync_us"] > 200)]
    assert len(staged) >= 3


def test_cpu_only_trace_has_no_gpu_timeline(capsys):
    path = shared_trace(CPU_ONLY)
    r = gpu_gaps(load_trace(path))
    assert not r.has_gpu and r.gaps.empty and "no GPU timeline" in r.warnings[0]
    assert perfkit.cli.main(["gaps", str(path)]) == 0
    assert "no GPU timeline" in capsys.readouterr().out
    assert perfkit.cli.main(["gaps", str(path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["has_gpu"] is False and d["rows"] == []


def test_cli_lists_classes_and_top_gaps(capsys):
    assert perfkit.cli.main(["gaps", str(shared_trace(NW0)), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "input" in out and "enumerate(DataLoader)" in out and "fix:" in out
