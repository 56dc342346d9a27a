"""annotate: the trace plus perfkit's tracks re-loads with the same events plus the added ones; the
added events follow the trace-event format; counter events survive loading; errors; the CLI."""
import gzip
import json
from pathlib import Path

import pytest

import perfkit.cli
from perfkit.errors import ParameterError
from perfkit.export.annotate import annotate, write_annotated
from perfkit.trace import load_trace

from conftest import shared_trace
from tracebuilder import TraceBuilder

SIDNB = "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz"


def _events(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def test_reloads_with_the_same_events_plus_the_added_tracks(tmp_path):
    src = shared_trace(SIDNB)
    out = tmp_path / "annotated.json.gz"
    result = annotate(src, out)
    before, after = load_trace(src), load_trace(out)
    added = after.events[after.events["cat"] == "perfkit"]
    kept = result.added.get("X", 0) + result.added.get("i", 0) + result.added.get("C", 0)
    assert len(after.events) == len(before.events) + kept and len(added) == kept
    original = after.events[after.events["cat"] != "perfkit"]
    assert original["name"].astype(str).value_counts().equals(before.events["name"].astype(str).value_counts())
    assert set(added["ph"].astype(str)) == {"X", "i", "C"}
    assert {"kernel", "launch", "host"} & set(added["name"].astype(str))          # the critical path track
    assert {"host_python", "tail"} & set(added["name"].astype(str))               # the gap track
    assert after.steps["step"].tolist() == before.steps["step"].tolist()           # analyses are unaffected


def test_added_events_follow_the_trace_event_format(tmp_path):
    out = tmp_path / "annotated.json"
    annotate(shared_trace(SIDNB), out)
    mine = [e for e in _events(out) if e.get("cat") == "perfkit" or e.get("ph") == "M" and e["args"].get("name") in
            ("perfkit", "critical path", "findings")]
    names = {e["args"]["name"] for e in mine if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert {"perfkit", "critical path", "findings"} <= names
    pids = {e["pid"] for e in mine}
    assert len(pids) == 1 and all(isinstance(p, int) for p in pids)
    for e in mine:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["ts"], float)
        if e["ph"] == "i":
            assert e["s"] == "t"
        if e["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
    by_track = {}
    for e in (e for e in mine if e["ph"] == "X"):
        by_track.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():          # slices on one track never partly overlap
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))


def test_counter_events_are_kept_by_the_loader(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 10)
    b.events.append({"ph": "C", "name": "GPU busy %", "pid": 1, "ts": 5, "args": {"GPU 0": 50.0}})
    trace = load_trace(b.write(tmp_path / "c.json"))
    counters = trace.events[trace.events["ph"] == "C"]
    assert len(counters) == 1 and counters["dur_us"].tolist() == [0.0]


def test_refuses_to_overwrite_its_input_or_take_a_directory(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::mm", 0, 10)
    path = b.write(tmp_path / "in.json")
    with pytest.raises(ParameterError, match="the output is the input trace of this command"):
        annotate(path, path)
    b.write(tmp_path / "second.json")
    with pytest.raises(ParameterError, match="one trace file at a time"):
        annotate(tmp_path, tmp_path / "out.json")


def test_cli(tmp_path, capsys):
    out = tmp_path / "o.json.gz"
    assert perfkit.cli.main(["annotate", str(shared_trace(SIDNB)), "-o", str(out)]) == 0
    assert "ui.perfetto.dev" in capsys.readouterr().out and out.exists()
    assert perfkit.cli.main(["annotate", str(tmp_path / "missing.json"), "-o", str(out)]) == 2


def test_write_annotated_writes_the_notebooks_annotated_path_or_refuses(tmp_path):
    ranks = Path(__file__).resolve().parents[1] / "data" / "traces" / "ranks" / "ddp4_slow_dataloader"
    trace = load_trace(ranks / "rank0.pt.trace.json.gz")
    assert write_annotated(trace, "trace") is None  # no path: nothing written
    written = write_annotated(trace, "trace", tmp_path / "a.json.gz")
    assert written == tmp_path / "a.json.gz" and len(load_trace(written).events) > len(trace.events)
    with pytest.raises(ParameterError, match="live run"):
        write_annotated(trace, "live", tmp_path / "b.json.gz")
    with pytest.raises(ParameterError, match="has 4"):
        write_annotated(load_trace(ranks), "trace", tmp_path / "x.json.gz")
