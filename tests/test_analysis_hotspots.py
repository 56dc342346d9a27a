"""hotspots: self/total/calls per Python function, exact on synthetic traces; on real traces with
stacks the self times partition each thread's covered time (checked against the raw JSON), and
per-address names collapse to one row; the CLI and folded stacks."""
import gzip
import json
import re

import numpy as np
import pytest

import perfkit.cli
from perfkit.analysis.frames import _thread_time_tie_order, normalize
from perfkit.analysis.step.hotspots import HOTSPOT_COLUMNS, hotspots
from perfkit.errors import ParameterError
from perfkit.trace import load_trace

from conftest import ROOT, shared_trace
from tracebuilder import TraceBuilder

STACKED = ["tracelens_b200_serving_eager_rank0.json.gz", "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz"]
WORKLOAD_TRACES = sorted((ROOT / "data" / "traces" / "cpu").glob("*.json.gz"))


def _frame(b, name, ts, dur, pid_, parent, tid=None):
    """A python_function event with explicit ids (the builder's own ids follow one time stack)."""
    return b._add("python_function", name, ts, dur, tid=tid, **{"Python id": pid_, "Python parent id": parent})


def synthetic(tmp_path):
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 500)
    b.step(1, 500, 500)
    _frame(b, "train.py(10): step", 0, 1000, 1, 0)
    _frame(b, "<built-in method to of Tensor object at 0x7ce2aaaa>", 100, 200, 2, 1)
    _frame(b, "<built-in method to of Tensor object at 0x7ce2bbbb>", 400, 100, 3, 1)
    _frame(b, "threading.py(320): wait", 600, 300, 4, 1)
    _frame(b, "<built-in method acquire of _thread.lock object at 0x7f00>", 610, 280, 5, 4)
    return load_trace(b.write(tmp_path / "t.json"))


def test_self_total_calls_and_per_step_are_exact(tmp_path):
    r = hotspots(synthetic(tmp_path))
    rows = r.table.set_index("function")
    assert set(rows.index) == {"step", "Tensor.to", "wait", "_thread.lock.acquire"}  # one row for both addresses
    assert rows.loc["Tensor.to", ["self_us", "total_us", "calls"]].tolist() == [300.0, 300.0, 2]
    assert rows.loc["step", ["self_us", "total_us", "file", "line"]].tolist() == [400.0, 1000.0, "train.py", 10]
    assert rows.loc["wait", "self_us"] == 20.0 and rows.loc["_thread.lock.acquire", "self_us"] == 280.0
    assert rows.loc["wait", "waiting"] and rows.loc["_thread.lock.acquire", "waiting"]
    assert not rows.loc["Tensor.to", "waiting"]
    assert rows.loc["step", "per_step_us"] == 500.0                      # 1000 us inside 2 steps
    assert rows.loc["Tensor.to", "self_per_step_us"] == 150.0
    assert r.threads.iloc[0][["covered_us", "self_us", "waiting_us"]].tolist() == [1000.0, 1000.0, 300.0]


def test_json_rows_have_the_documented_keys(tmp_path):
    d = hotspots(synthetic(tmp_path)).to_json()
    assert all(set(row) == set(HOTSPOT_COLUMNS) for row in d["rows"])
    to = next(row for row in d["rows"] if row["function"] == "Tensor.to")
    assert to["file"] is None and to["line"] is None and to["calls"] == 2


def test_folded_stacks_weigh_self_time(tmp_path):
    text = hotspots(synthetic(tmp_path)).collapsed()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines())
    assert lines["step (train.py:10)"] == "400"
    assert lines["step (train.py:10);Tensor.to"] == "300"
    assert lines["step (train.py:10);wait (threading.py:320);_thread.lock.acquire"] == "280"
    assert sum(int(v) for v in lines.values()) == 1000


def test_recursion_is_counted_once_in_total(tmp_path):
    b = TraceBuilder(with_stack=True)
    _frame(b, "lib.py(5): visit", 0, 100, 1, 0)
    _frame(b, "lib.py(5): visit", 10, 40, 2, 1)
    _frame(b, "lib.py(5): visit", 20, 10, 3, 2)
    row = hotspots(load_trace(b.write(tmp_path / "r.json"))).table.iloc[0]
    assert (row["total_us"], row["self_us"], row["calls"]) == (100.0, 100.0, 3)


def test_inconsistent_parent_ids_fall_back_to_time_and_clip(tmp_path):
    b = TraceBuilder(with_stack=True)
    _frame(b, "a.py(1): outer", 0, 100, 1, 0)
    _frame(b, "a.py(2): lost", 10, 20, 2, 999)          # parent id not in the trace: nested by time
    _frame(b, "a.py(3): liar", 40, 20, 3, 2)            # parent id names a frame that ended before it
    _frame(b, "a.py(4): spill", 80, 30, 4, 1)           # ends 10 us after its parent
    r = hotspots(load_trace(b.write(tmp_path / "i.json")))
    rows = r.table.set_index("function")
    assert rows.loc["outer", "self_us"] == 100 - 20 - 20 - 20
    assert rows.loc["spill", "self_us"] == 20.0          # clipped to the parent's end
    assert r.threads.iloc[0]["self_us"] == 100.0
    assert any("nested by time" in w for w in r.warnings)


def test_main_thread_is_the_one_launching_gpu_work(tmp_path):
    b = TraceBuilder(with_stack=True)
    _frame(b, "busy.py(1): spin", 0, 5000, 1, 0, tid=1)                      # busiest Python thread
    _frame(b, "train.py(1): step", 0, 100, 2, 0, tid=2)
    b.launch("gemm", 10, 5, 20, 30, tid=2)
    r = hotspots(load_trace(b.write(tmp_path / "m.json")))
    assert r.threads["thread"].tolist() == ["2"]
    assert set(hotspots(load_trace(b.write(tmp_path / "m.json")), thread="all").threads["thread"]) == {"1", "2"}
    b2 = TraceBuilder(with_stack=True)
    _frame(b2, "busy.py(1): spin", 0, 5000, 1, 0, tid=1)
    _frame(b2, "train.py(1): step", 0, 100, 2, 0, tid=2)
    assert hotspots(load_trace(b2.write(tmp_path / "c.json"))).threads["thread"].tolist() == ["1"]


def test_unknown_thread_is_a_clear_error(tmp_path):
    with pytest.raises(ParameterError, match="thread '42' not found"):
        hotspots(synthetic(tmp_path), thread="42")


def test_without_stacks_rows_are_host_ops(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::linear", 0, 100)
    b.cpu_op("aten::addmm", 10, 80)
    r = hotspots(load_trace(b.write(tmp_path / "o.json")))
    assert r.table.set_index("function")["self_us"].to_dict() == {"aten::addmm": 80.0, "aten::linear": 20.0}
    assert any("with_stack=True" in w for w in r.warnings)


@pytest.mark.parametrize("name", [
    ("<built-in method to of Tensor object at 0x7ce2a1b2c3d4>", ("Tensor.to", "", -1)),
    ("<built-in method conv2d of type object at 0x7f01>", ("conv2d", "", -1)),
    ("<built-in function isinstance>", ("isinstance", "", -1)),
    ("torch/nn/modules/module.py(1779): _call_impl", ("_call_impl", "torch/nn/modules/module.py", 1779)),
    ("nn.Module: Linear_0", ("nn.Module: Linear_0", "", -1)),
    ("<built-in method  of pybind11_builtins.pybind11_detail_function_record_v1 object at 0x7fe1>", ("<unnamed>", "", -1)),
])
def test_normalize(name):
    assert normalize(name[0]) == name[1]


def _raw_python_union(path) -> dict:
    """Per tid: union length of all python_function intervals, straight from the JSON."""
    events = json.load(gzip.open(path))["traceEvents"]
    out = {}
    for tid in {e["tid"] for e in events if e.get("cat") == "python_function"}:
        iv = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "python_function" and e["tid"] == tid)
        total, end = 0.0, -np.inf
        for s, e in iv:
            if e > end:
                total += e - max(s, end)
                end = e
        out[str(tid)] = total
    return out


def _check_partition(path):
    r = hotspots(load_trace(path), thread="all")
    union = _raw_python_union(path)
    py = r.threads[r.threads["python"]]
    assert len(py), path
    for t in py.to_dict("records"):
        assert t["self_us"] == pytest.approx(union[t["thread"]], rel=0.01), (path, t)
        assert t["self_us"] == pytest.approx(t["covered_us"], rel=1e-9)
    assert not r.table["function"].str.contains(r" at 0x[0-9a-f]+", regex=True).any()
    return r


@pytest.mark.parametrize("name", STACKED)
def test_shared_stacked_traces_partition_and_collapse(name):
    path = shared_trace(name)
    r = _check_partition(path)
    raw = {e["name"] for e in json.load(gzip.open(path))["traceEvents"] if e.get("cat") == "python_function"}
    per_address = {n for n in raw if re.search(r" object at 0x", n)}
    assert per_address
    # Every per-address name has its row, and a function has one row per thread whatever its addresses.
    assert {normalize(n)[0] for n in per_address} <= set(r.table["function"])
    assert not r.table.duplicated(["function", "file", "line", "thread"]).any()


@pytest.mark.parametrize("path", WORKLOAD_TRACES, ids=lambda p: p.name)
def test_reference_workload_traces_partition(path):
    _check_partition(path)


def test_cli_table_json_and_collapsed(tmp_path, capsys):
    path = synthetic(tmp_path).files[0].path
    folded = tmp_path / "out.folded"
    assert perfkit.cli.main(["hotspots", path, "--collapsed", str(folded)]) == 0
    out = capsys.readouterr().out
    assert "Tensor.to" in out and "[waiting]" in out and "speedscope" in out
    assert folded.read_text().splitlines()[0].rsplit(" ", 1)[1].isdigit()
    assert perfkit.cli.main(["hotspots", path, "--json", "--thread", "all"]) == 0
    assert {r["function"] for r in json.loads(capsys.readouterr().out)["rows"]} >= {"step", "Tensor.to"}
    assert perfkit.cli.main(["hotspots", path, "--thread", "nope"]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(5))
def test_innermost_segments_order_is_the_lexsort_of_thread_time_and_tie(seed):
    """The segments' order comes from one sort of a packed key where it fits: the same order as
    np.lexsort of (thread, time, tie) on whole, quarter, nanosecond and epoch-scale times, ties,
    negative, huge and non-finite times (the last two fall back to the lexsort)."""
    rng = np.random.default_rng(seed)
    for _ in range(400):
        n = int(rng.integers(0, 200))
        base = rng.choice([0.0, 1.6e15, 1.4e12, -5.0, 123.456, 1e18])
        t = base + rng.choice([1.0, 0.25, 0.001, 1e-6, 1e9]) * rng.integers(0, 50, n)
        if n and rng.random() < 0.1:
            t[rng.integers(0, n)] = rng.choice([np.nan, np.inf, -0.0])
        thread = rng.integers(0, rng.choice([1, 4, 1000]), n)
        tie = rng.integers(0, rng.choice([1, 7, 300]), n)
        assert (_thread_time_tie_order(thread, t, tie) == np.lexsort((tie, t, thread))).all()
