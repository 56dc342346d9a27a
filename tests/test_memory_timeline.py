"""perfkit.memory_timeline / perfkit memory: against raw [memory] events of the shared traces (counted
here with plain json), and a leak found inside one trace of the leaky trainer run as a plain script."""
from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import perfkit
from perfkit.cli import main

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces" / "public"
MEMORY_TRACES = ["sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz", "tracelens_h100_qwen05b_infer_bf16.json.gz",
                 "tracelens_mi300x_norm_layers_fwdbwd.json.gz"]
KINDS = {0: "cpu", 1: "cuda", 6: "hip"}


def _raw_peaks(path: Path) -> dict:
    """Peak of Total Allocated and count of [memory] events per device, from the raw JSON."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    peaks, counts = defaultdict(int), defaultdict(int)
    for e in events:
        if e.get("name") == "[memory]":
            a = e["args"]
            key = "cpu" if a["Device Type"] == 0 else f"{KINDS[a['Device Type']]}:{a['Device Id']}"
            peaks[key] = max(peaks[key], a["Total Allocated"])
            counts[key] += 1
    return dict(peaks), dict(counts)


@pytest.mark.parametrize("name", MEMORY_TRACES)
def test_peaks_match_raw_events(name):
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared trace {name} not present")
    timeline = perfkit.memory_timeline(perfkit.load_trace(path, use_cache=False))
    peaks, counts = _raw_peaks(path)
    assert {d["device"]: d["peak_bytes"] for d in timeline.devices} == peaks
    assert timeline.events.groupby("device").size().to_dict() == counts
    gpu = next(d for d in timeline.devices if d["device"] != "cpu")
    assert gpu["peak_op"] and gpu["top_ops"][0]["bytes"] > 0


def test_qwen_peak_is_1_9_gib_in_mul():
    path = SHARED / MEMORY_TRACES[1]
    if not path.exists():
        pytest.skip("shared qwen trace not present")
    d = perfkit.memory_timeline(perfkit.load_trace(path, use_cache=False)).device("cuda:0")
    assert d["peak_bytes"] == _raw_peaks(path)[0]["cuda:0"] and d["peak_reserved_bytes"] > d["peak_bytes"]
    assert d["peak_op"] == "aten::mul" and d["peak_function"].endswith("run_on_input")


def test_trace_without_memory_events_says_how_to_record(tmp_path):
    path = SHARED / "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    if not path.exists():
        pytest.skip("shared CPU-only trace not present")
    timeline = perfkit.memory_timeline(perfkit.load_trace(path, use_cache=False))
    assert timeline.devices == () and "profile_memory=True" in timeline.warnings[0]


LEAKY = """
import sys
from perfkit.workloads.registry import make_workload
w = make_workload("leaky", "cpu", variant=sys.argv[1])
for _ in range(10):
    w.step()
"""


@pytest.mark.parametrize("variant, leaks", [("accumulating_callback", True), ("clean", False)])
def test_leak_growth_found_in_one_trace(tmp_path, capsys, variant, leaks):
    script = tmp_path / "leaky_train.py"
    script.write_text(LEAKY)
    out = tmp_path / "traces"
    assert main(["profile", "--json", "--memory", "--wait", "2", "--warmup", "1", "--active", "5",
                 "--out", str(out), str(script), "--", variant]) == 0
    trace = json.loads(capsys.readouterr().out)["trace"]
    assert main(["memory", "--json", trace]) == 0
    cpu = json.loads(capsys.readouterr().out)["devices"][0]
    assert cpu["device"] == "cpu" and len(cpu["end_of_step_bytes"]) == 5
    if leaks:  # 2 x 64 x (1 + 64) float32 clones (16,640 B) kept per step by the callback
        assert cpu["growth_per_step_bytes"] == pytest.approx(16_640, rel=0.02)
        assert cpu["growth_ci"][0] > 0
        held = cpu["held_by"][0]  # what holds it: the callback's clone, in every recorded step, never freed
        assert held["function"].startswith("perfkit/workloads/leaky.py(") and "<dictcomp>" in held["function"]
        assert held["steps"] == 5 and held["bytes"] == pytest.approx(5 * 16_640, rel=0.02)
    else:
        assert cpu["growth_per_step_bytes"] == 0 and cpu["growth_ci"][1] <= 0 + 1e-9


@pytest.fixture(scope="module")
def leaky_trace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("leaky")
    w = perfkit.make_workload("leaky", "cpu", variant="accumulating_callback")
    with perfkit.profile(steps=3, wait=1, warmup=1, memory=True, out=folder, name="leaky") as p:
        for _ in range(6):
            w.step()
    return p.result.trace


def _rewrite(src: Path, dst: Path, change) -> list[dict]:
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    memory = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    change(doc, memory)
    with gzip.open(dst, "wt") as f:
        json.dump(doc, f)
    return [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]


def test_malformed_memory_events_shift_nothing(leaky_trace, tmp_path):
    def corrupt(doc, memory):
        memory[0]["ts"] = "not a time"  # the loader drops it
        memory[2]["args"]["Total Allocated"] = "n/a"  # kept, with no usable total
        memory[4]["args"] = None  # kept: Bytes 0, no totals

    raw = _rewrite(leaky_trace, tmp_path / "bad.json.gz", corrupt)
    timeline = perfkit.memory_timeline(perfkit.load_trace(tmp_path / "bad.json.gz", use_cache=False))
    expected = sorted((float(e["ts"]), (e["args"] or {}).get("Bytes", 0),
                       a if isinstance(a := (e["args"] or {}).get("Total Allocated"), int) else -1)
                      for e in raw[1:])
    got = sorted(zip(timeline.events["ts_us"], timeline.events["bytes"], timeline.events["allocated"]))
    assert got == expected  # every event keeps its own totals (by position, all after the first would shift)
    usable = [e["args"]["Total Allocated"] for e in raw[1:]
              if e["args"] and isinstance(e["args"]["Total Allocated"], int)]
    assert timeline.device("cpu")["peak_bytes"] == max(usable)
    assert any(w.startswith("2 [memory] event(s) carry no usable Total Allocated") for w in timeline.warnings)


def test_a_file_changed_since_loading_raises_naming_it(leaky_trace, tmp_path):
    path = tmp_path / "changed.json.gz"
    _rewrite(leaky_trace, path, lambda doc, memory: None)
    trace = perfkit.load_trace(path, use_cache=False)
    _rewrite(leaky_trace, path, lambda doc, memory: doc["traceEvents"].remove(memory[3]))
    with pytest.raises(perfkit.TraceError, match="changed since it was loaded") as info:
        perfkit.memory_timeline(trace)
    assert str(path) in str(info.value) and "1 of its" in str(info.value)


def test_memory_of_a_trace_without_memory_events_is_an_error(capsys):
    shipped = Path(__file__).resolve().parents[1] / "data" / "traces" / "cpu" / "leaky_clean.json.gz"
    assert main(["memory", str(shipped)]) == 2
    err = capsys.readouterr().err
    assert "holds no [memory] events" in err and "perfkit profile --memory" in err


def test_profile_with_memory_says_whether_memory_grows(tmp_path, capsys):
    script = tmp_path / "leaky_train.py"
    script.write_text(LEAKY)
    assert main(["profile", "--memory", "--wait", "2", "--warmup", "1", "--active", "4", "--out", str(tmp_path),
                 str(script), "--", "accumulating_callback"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("memory "))
    assert "cpu: peak" in line and "grows 16.2 KiB/step" in line and "a leak, held by perfkit/workloads/leaky.py(" in line


def test_timeline_table_shows_the_growth_ci_as_text_not_a_tuple(leaky_trace):
    html = perfkit.memory_timeline(perfkit.load_trace(leaky_trace, use_cache=False))._repr_html_()
    assert "(16640.0" not in html and " to " in html and "Held at the trace" in html


@pytest.mark.parametrize("change, problem", [
    (lambda doc, memory: None, None),  # every [memory] event usable: the timeline
    (lambda doc, memory: [e["args"].update({"Total Allocated": "n/a"}) for e in memory],
     "has [memory] events but none with a usable Total Allocated"),
    (lambda doc, memory: [doc["traceEvents"].remove(e) for e in memory], "holds no [memory] events"),
])
def test_recorded_memory_refuses_a_trace_without_a_timeline(leaky_trace, tmp_path, change, problem):
    from perfkit.analysis.memory import recorded_memory

    path = tmp_path / "t.json.gz"
    _rewrite(leaky_trace, path, change)
    trace = perfkit.load_trace(path, use_cache=False)
    if problem is None:
        assert recorded_memory(trace, top=3).devices == perfkit.memory_timeline(trace, top=3).devices != ()
        return
    with pytest.raises(perfkit.TraceError, match=re.escape(problem)) as info:
        recorded_memory(trace)
    assert str(path) in str(info.value) and "perfkit profile --memory" in str(info.value)
