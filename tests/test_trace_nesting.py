"""Nesting computed at load (parent, depth, step columns): ties at whole microseconds, zero-duration
chains, runtime calls, python_function frames, steps, the cache and multi-file labels; checked on
real traces against the profiler's own links (External ids)."""
import gzip
import json

import numpy as np
import pytest

from perfkit.trace.ancestry import nest
from perfkit.trace import load_trace
from perfkit.trace.schema import NESTING_COLUMNS, SCHEMA_VERSION

from conftest import shared_trace
from tracebuilder import TraceBuilder

DLRM = "param_v100_dlrm_rank0.pt.trace.json.gz"
MODERN = ["tracelens_h100_qwen05b_infer_bf16.json.gz", "tracelens_mi300x_xdit_sd35_compiled.json.gz"]


def load(b, tmp_path, name="t.json", **kw):
    return load_trace(b.write(tmp_path / name), use_cache=False, **kw)


def parents(trace) -> dict:
    """{event name: parent name} for events whose names are unique in the trace."""
    ev = trace.events
    names = ev["name"].astype(str)
    return {names[i]: (names[p] if p >= 0 else None) for i, p in ev["parent"].items()
            if (names == names[i]).sum() == 1 and ev.at[i, "depth"] >= 0}


def label(trace, name, nth=0):
    ev = trace.events
    return ev.index[ev["name"].astype(str) == name][nth]


def test_zero_length_item_keeps_its_child_at_the_same_microsecond(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    item = b.cpu_op("aten::item", 10, 0)
    b.cpu_op("aten::_local_scalar_dense", 10, 0, external_id=item["args"]["External id"] + 1)
    got = parents(load(b, tmp_path))
    assert got["aten::_local_scalar_dense"] == "aten::item"
    assert got["aten::item"] == "ProfilerStep#0"


def test_chain_of_zero_length_items_nests_children_and_keeps_siblings(tmp_path):
    """item1 {lsd1}, item2 {lsd2}, item3 {lsd3}: all at one microsecond, 0 us, consecutive External ids."""
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.cpu_op("outer", 5, 10, external_id=100)
    for k in range(3):
        b.cpu_op("aten::item", 10, 0, external_id=101 + 2 * k)
        b.cpu_op("aten::_local_scalar_dense", 10, 0, external_id=102 + 2 * k)
    t = load(b, tmp_path)
    ev = t.events
    outer = label(t, "outer")
    for k in range(3):
        item, lsd = label(t, "aten::item", k), label(t, "aten::_local_scalar_dense", k)
        assert ev.at[item, "parent"] == outer and ev.at[item, "depth"] == 2
        assert ev.at[lsd, "parent"] == item and ev.at[lsd, "depth"] == 3


def test_zero_length_event_at_a_parents_last_microsecond(tmp_path):
    """slice [0, 3] calls as_strided at 3 (0 us): a child, because slice -> as_strided is seen elsewhere
    with no doubt; select [10, 12] then item at 12 (0 us): a sibling (select never calls item)."""
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.cpu_op("aten::slice", 30, 4)
    b.cpu_op("aten::as_strided", 31, 1)      # unambiguous: starts before slice ends
    b.cpu_op("aten::slice", 40, 3)
    b.cpu_op("aten::as_strided", 43, 0)      # tie at slice's end
    b.cpu_op("aten::select", 50, 2)
    b.cpu_op("aten::item", 52, 0)            # tie at select's end: no select -> item pair anywhere
    t = load(b, tmp_path)
    ev = t.events
    assert ev.at[label(t, "aten::as_strided", 1), "parent"] == label(t, "aten::slice", 1)
    assert ev.at[label(t, "aten::item"), "parent"] == label(t, "ProfilerStep#0")


def test_same_start_different_length_follows_external_id_order(tmp_path):
    """A 0 us op and a 1 us op starting in one microsecond: the 0 us one started first (lower External
    id), so it is the sibling before, not a child of the longer one."""
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.cpu_op("aten::empty", 20, 0, external_id=50)
    b.cpu_op("aten::zero_", 20, 1, external_id=51)
    got = parents(load(b, tmp_path))
    assert got["aten::empty"] == got["aten::zero_"] == "ProfilerStep#0"


def test_runtime_call_follows_its_ops_external_id_at_a_tie(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    a = b.cpu_op("opA", 10, 0, external_id=70)
    b.cpu_op("opB", 10, 0, external_id=71)
    b.runtime("cudaGetDevice", 10, 0, **{"External id": a["args"]["External id"]})
    b.runtime("cudaLaunchKernel", 10, 0, **{"External id": 71})
    t = load(b, tmp_path)
    ev = t.events
    assert ev.at[label(t, "cudaGetDevice"), "parent"] == label(t, "opA")
    assert ev.at[label(t, "cudaLaunchKernel"), "parent"] == label(t, "opB")


def test_runtime_call_never_contains_an_op(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.cpu_op("aten::copy_", 10, 30)
    b.runtime("cudaMemcpyAsync", 12, 10)
    b.cpu_op("aten::empty", 15, 1)           # overlaps the runtime call in time, yet is not its child
    got = parents(load(b, tmp_path))
    assert got["cudaMemcpyAsync"] == got["aten::empty"] == "aten::copy_"


def test_python_frames_nest_by_python_parent_id_and_everything_gets_a_step(tmp_path):
    b = TraceBuilder(with_stack=True)
    b.step(3, 0, 100)
    b.step(4, 100, 100)
    b.python("train.py(1): main", 0, 200)
    b.python("train.py(9): step", 110, 50)
    b.cpu_op("aten::add", 120, 5)
    b.kernel("k", 130, 5)
    b.cpu_op("aten::mul", 250, 5)            # after the last step
    t = load(b, tmp_path)
    ev = t.events
    step, main = label(t, "train.py(9): step"), label(t, "train.py(1): main")
    assert ev.at[step, "parent"] == main and (ev.at[main, "depth"], ev.at[step, "depth"]) == (0, 1)
    assert ev.at[label(t, "aten::add"), "parent"] == label(t, "ProfilerStep#4")   # host tree only
    steps = {n: ev.at[label(t, n), "step"] for n in ("train.py(1): main", "train.py(9): step", "aten::add",
                                                     "aten::mul", "k", "ProfilerStep#3")}
    assert steps == {"train.py(1): main": 3, "train.py(9): step": 4, "aten::add": 4, "aten::mul": -1,
                     "k": -1, "ProfilerStep#3": 3}
    k = label(t, "k")
    assert (ev.at[k, "parent"], ev.at[k, "depth"]) == (-1, -1)


def test_columns_are_cached_and_labels_shift_across_files(tmp_path, monkeypatch):
    def one(rank):
        b = TraceBuilder(rank=rank)
        b.step(0, 0, 100)
        item = b.cpu_op("aten::item", 10, 0)
        b.cpu_op("aten::_local_scalar_dense", 10, 0, external_id=item["args"]["External id"] + 1)
        return b.write(tmp_path / f"r{rank}.json")

    paths = [one(0), one(1)]
    first = load_trace(paths)
    again = load_trace(paths)                # from the cache
    for t in (first, again):
        ev = t.events
        assert set(NESTING_COLUMNS) <= set(ev.columns)
        lsd = ev.index[ev["name"].astype(str) == "aten::_local_scalar_dense"]
        item = ev.index[ev["name"].astype(str) == "aten::item"]
        assert ev.loc[lsd, "parent"].tolist() == item.tolist() and ev.loc[lsd, "rank"].tolist() == [0, 1]
    assert first.events[list(NESTING_COLUMNS)].equals(again.events[list(NESTING_COLUMNS)])
    assert SCHEMA_VERSION >= 2


def test_nest_derives_op_top_and_self_time_from_the_columns(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.annotation("## fwd ##", 1, 90)
    b.cpu_op("aten::linear", 10, 40)
    b.cpu_op("aten::addmm", 12, 30)
    b.runtime("cudaLaunchKernel", 14, 5)
    t = load(b, tmp_path)
    host = t.events[t.events["depth"] >= 0]
    n = nest(host)
    launch, addmm, linear = (label(t, x) for x in ("cudaLaunchKernel", "aten::addmm", "aten::linear"))
    assert (n.at[launch, "op"], n.at[launch, "top"], n.at[launch, "depth"]) == (addmm, linear, 4)
    assert n.at[addmm, "self_us"] == 25 and n.at[linear, "self_us"] == 10
    assert n.at[label(t, "## fwd ##"), "top"] == -1


def test_nest_refuses_events_without_the_columns(tmp_path):
    from perfkit.errors import ParameterError

    b = TraceBuilder()
    b.cpu_op("x", 0, 1)
    ev = load(b, tmp_path).events.drop(columns=["parent"])
    with pytest.raises(ParameterError, match="parent"):
        nest(ev)


# --- real traces ---------------------------------------------------------------------------------

def test_dlrm_every_local_scalar_dense_is_the_child_of_its_item():
    """Raw JSON: each aten::_local_scalar_dense has the External id of an aten::item + 1 (18 of the 57
    pairs are both 0 us at one microsecond); the loaded nesting agrees, and no item sits in an item."""
    path = shared_trace(DLRM)
    raw = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]
    item_ext = {e["args"]["External id"] for e in raw if e["name"] == "aten::item"}
    lsd_ext = [e["args"]["External id"] for e in raw if e["name"] == "aten::_local_scalar_dense"]
    assert len(lsd_ext) == 57 and all(x - 1 in item_ext for x in lsd_ext)
    ev = load_trace(path, use_cache=False).events
    names = ev["name"].astype(str)
    lsd = ev[names == "aten::_local_scalar_dense"]
    par = lsd["parent"].to_numpy()
    assert (names[par].to_numpy() == "aten::item").all()
    assert (lsd["external_id"].to_numpy() - ev["external_id"][par].to_numpy() == 1).all()
    items = ev.index[names == "aten::item"]
    for i in items:
        p = ev.at[i, "parent"]
        while p >= 0:
            assert names[p] != "aten::item"
            p = ev.at[p, "parent"]


@pytest.mark.parametrize("name", MODERN)
def test_runtime_calls_nest_under_the_op_their_external_id_names(name):
    """Modern Kineto links each runtime call to its op by External id: the loaded parent (found from
    timestamps only) is that op for every runtime call whose op is in the trace."""
    ev = load_trace(shared_trace(name), use_cache=False).events
    calls = ev[(ev["cat"] == "cuda_runtime") & (ev["external_id"] >= 0) & (ev["parent"] >= 0)]
    ops = ev[ev["cat"].isin(["cpu_op", "user_annotation"])]
    linked = calls[calls["external_id"].isin(ops["external_id"])]
    assert len(linked) > 1000
    assert (ev["external_id"].to_numpy()[linked["parent"].to_numpy()] == linked["external_id"].to_numpy()).all()
    assert np.all(ev["depth"].to_numpy()[linked["parent"].to_numpy()] + 1 == linked["depth"].to_numpy())


def test_pointer_jumping_sweep_equals_an_explicit_stack():
    """The vectorized sweep against the stack it replaces, on random threads of ops and runtime
    calls with ties, zero durations and partial overlaps (the stack handles the threads where an op
    starts inside a running runtime call; both paths are exercised)."""
    from perfkit.trace import nesting

    rng = np.random.default_rng(7)
    fast = 0
    for _ in range(3000):
        n = int(rng.integers(1, 80))
        start = np.sort(rng.integers(0, 60, n))
        end = start + rng.integers(0, 25, n) * rng.integers(0, 2, n)
        thread, launch = rng.integers(0, 3, n), rng.random(n) < rng.random()
        order = np.lexsort((np.arange(n), start - end, launch, start, thread))
        got = nesting._sweep(order, start, end, thread, launch)
        assert (got == nesting._sweep_stack(order, start, end, thread, launch)).all()
        fast += not nesting._op_starts_in_a_call(start[order], end[order], thread[order], launch[order])
    assert fast > 500  # most cases took the vectorized path


def test_a_real_trace_nests_the_same_by_stack_and_by_pointer_jumping(monkeypatch):
    from perfkit.trace import nesting

    path = shared_trace("hta_trace_diff__control__control.json.gz")
    fast = load_trace(path, use_cache=False).events["parent"].to_numpy()
    monkeypatch.setattr(nesting, "_sweep", nesting._sweep_stack)
    assert (load_trace(path, use_cache=False).events["parent"].to_numpy() == fast).all()


def test_op_starting_inside_a_running_call_is_found_as_a_plain_scan_finds_it():
    """The check that sends a trace to the stack sweep (each runtime call against the first op after
    it) against a scan of every (earlier call, op) pair of a thread, on random sorted threads."""
    from perfkit.trace import nesting

    rng = np.random.default_rng(11)
    seen = set()
    for _ in range(2000):
        n = int(rng.integers(1, 40))
        thread = np.sort(rng.integers(0, 3, n))
        start = np.concatenate([np.sort(rng.integers(0, 30, (thread == t).sum())) for t in range(3)])
        end = start + rng.integers(0, 8, n) * rng.integers(0, 2, n)
        launch = rng.random(n) < rng.random()
        expected = any(launch[c] and not launch[j] and thread[c] == thread[j] and end[c] > start[j]
                       for j in range(n) for c in range(j))
        assert nesting._op_starts_in_a_call(start, end, thread, launch) == expected
        seen.add(expected)
    assert seen == {True, False}
