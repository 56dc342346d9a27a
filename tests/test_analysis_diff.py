"""diff: per-name deltas, new/vanished kernels and the step-time verdict, exact on synthetic A/B
traces and checked against the raw JSON of real pairs; and the CLI."""
import argparse
import gzip
import json

import numpy as np
import orjson
import pytest

from perfkit.analysis.trace_diff.diff import compare_steps, diff
from perfkit.cli import trace_diff as diff_cli
from perfkit.errors import ParameterError
from perfkit.trace import load_trace

from conftest import shared_trace
from rawcount import launch_owners
from tracebuilder import TraceBuilder

NW0 = "kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz"
NW4 = "kineto_v100_resnet50_dataloader_nw4.pt.trace.json.gz"
BERT = "tracelens_mi300x_bert_small_infer_bf16.json.gz"
COMPILED = "tracelens_mi300x_compile_triton_small.json.gz"
TRITON = "hta_triton_example__triton_example.json.gz"
CONTROL = "hta_trace_diff__control__control.json.gz"
TEST = "hta_trace_diff__test__test.json.gz"


def side(tmp_path, name, *, step_us, kernels, mm_calls, steps=3, gpu_name="NVIDIA Test GPU"):
    """``steps`` steps of ``step_us``; per step the given (kernel, dur) pairs and ``mm_calls`` aten::mm of 50 us."""
    b = TraceBuilder(gpu_name=gpu_name)
    for s in range(steps):
        t0 = s * step_us
        b.step(s, t0, step_us)
        for i in range(mm_calls):
            b.cpu_op("aten::mm", t0 + 10 + 60 * i, 50)
        for j, (kernel, dur) in enumerate(kernels):
            b.launch(kernel, t0 + 12 + 60 * j, 5, t0 + 300 + 50 * j, dur)
    return load_trace(b.write(tmp_path / f"{name}.json"), use_cache=False)


@pytest.fixture
def pair(tmp_path):
    a = side(tmp_path, "a", step_us=1000, kernels=[("k1", 10), ("k2", 20)], mm_calls=1)
    b = side(tmp_path, "b", step_us=1500, kernels=[("k1", 20), ("triton_poi_fused_add_0", 5)], mm_calls=2)
    return a, b


def test_kernel_and_op_deltas_per_step(pair):
    r = diff(*pair)
    k = r.kernels.set_index("name")
    assert (k.at["k1", "status"], k.at["k1", "per_step_us_a"], k.at["k1", "per_step_us_b"]) == ("common", 10, 20)
    assert k.at["k1", "delta_per_step_us"] == 10 and k.at["k1", "delta_pct"] == 100
    assert (k.at["k2", "status"], k.at["k2", "count_b"]) == ("vanished", 0)
    assert k.at["triton_poi_fused_add_0", "status"] == "new" and k.at["triton_poi_fused_add_0", "triton"]
    assert r.new_kernels["name"].tolist() == ["triton_poi_fused_add_0"]
    assert r.vanished_kernels["name"].tolist() == ["k2"]
    mm = r.ops.set_index("name").loc["aten::mm"]
    assert (mm["count_a"], mm["count_b"], mm["per_step_us_a"], mm["per_step_us_b"]) == (3, 6, 50, 100)


def test_step_time_verdict_and_metrics(pair):
    r = diff(*pair)
    s = r.step_change
    assert s["verdict"] == "slower" and s["ratio"] == 1.5 and s["low"] == s["high"] == 1.5
    m = r.to_frame().set_index("metric")
    assert (m.at["median step (us)", "a"], m.at["median step (us)", "b"]) == (1000, 1500)
    assert m.at["median step (us)", "delta_pct"] == 50
    assert (m.at["launches per step", "a"], m.at["launches per step", "b"]) == (2, 2)
    assert any(f.severity == "high" and "slower" in f.title for f in r.findings)
    assert any("Triton" in f.title and f.evidence["triton"] == 1 for f in r.findings)
    assert "slower" in repr(r)


def test_a_trace_against_itself_shows_no_change(pair):
    r = diff(pair[0], pair[0])
    assert r.step_change["verdict"] == "no detectable change" and r.step_change["ratio"] == 1
    assert r.new_kernels.empty and r.vanished_kernels.empty
    assert (r.kernels["delta_per_step_us"] == 0).all() and (r.to_frame()["delta"] == 0).all()
    assert not [f for f in r.findings if f.severity != "info"]


@pytest.mark.parametrize("a, b, verdict", [
    ([100.0] * 5, [90.0] * 5, "faster"),
    ([100.0] * 5, [110.0] * 5, "slower"),
    ([100.0, 104.0, 96.0, 101.0, 99.0], [101.0, 95.0, 104.0, 99.0, 100.0], "no detectable change"),
    ([100.0, 100.0], [200.0, 200.0, 200.0], "not enough data"),
    ([], [1.0, 2.0, 3.0], "not enough data"),
])
def test_compare_steps_verdicts(a, b, verdict):
    out = compare_steps(a, b)
    assert out["verdict"] == verdict and out["reason"]
    if verdict == "not enough data":
        assert np.isnan(out["low"])
    else:
        assert out["low"] <= out["ratio"] <= out["high"]


def test_warnings_for_different_gpus_and_bad_arguments(tmp_path):
    a = side(tmp_path, "a", step_us=1000, kernels=[("k1", 10)], mm_calls=1, gpu_name="NVIDIA A100")
    b = side(tmp_path, "b", step_us=1000, kernels=[("k1", 10)], mm_calls=1, steps=2, gpu_name="NVIDIA H100")
    r = diff(a, b)
    assert any("different GPUs" in w and "A100" in w and "H100" in w for w in r.warnings)
    assert r.step_change["verdict"] == "not enough data"
    with pytest.raises(ParameterError, match="load_trace"):
        diff(a, "b.json")


def test_cli_text_and_json(tmp_path, pair, capsys):
    paths = []
    for name, step_us, kernels in (("a", 1000, [("k1", 10)]), ("b", 1500, [("k1", 20)])):
        side(tmp_path, name, step_us=step_us, kernels=kernels, mm_calls=1)
        paths.append(str(tmp_path / f"{name}.json"))
    parser = argparse.ArgumentParser()
    diff_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["diff", *paths])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "slower" in text and "median step (us)" in text and "k1" in text
    args = parser.parse_args(["diff", *paths, "--json", "--top", "1"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["step_change"]["verdict"] == "slower" and len(out["kernels"]) == 1


def test_cli_says_inconclusive_for_traces_recorded_under_different_load(tmp_path, capsys):
    paths = []
    for name, load, step_us in (("busy", 3.4, 370_000), ("quiet", 0.2, 49_000)):
        b = TraceBuilder()
        b.metadata["perfkit_profile"] = {"load_1min": load, "cpus": 2, "torch_threads": 2}
        for s in range(4):
            b.step(s, s * step_us, step_us)
            b.cpu_op("aten::convolution_backward", s * step_us + 10, step_us - 20)
        paths.append(str(b.write(tmp_path / f"{name}.json")))
    parser = argparse.ArgumentParser()
    diff_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["diff", *paths])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert ": inconclusive (A was recorded on a busy machine (load average 3.4 on 2 CPUs" in text
    assert "quiet machine" in text and "A and B ran under different load" in text
    assert "faster" not in text and "aten::convolution_backward -" not in text


# --- real pairs ----------------------------------------------------------------------------------

def raw(path):
    return [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]


def raw_loader_per_step(events):
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("ProfilerStep#")]
    total = sum(e["dur"] for e in events if e["name"].startswith("enumerate(DataLoader)")
                and any(s <= e["ts"] < t for s, t in steps))
    return total / len(steps)


def raw_triton_names(events):
    return {e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("triton_")}


@pytest.fixture(scope="module")
def resnet_diff():
    paths = [shared_trace(n) for n in (NW0, NW4)]
    return diff(*(load_trace(p, use_cache=False) for p in paths)), [raw(p) for p in paths]


def test_num_workers_4_is_faster_and_spends_less_time_in_the_dataloader(resnet_diff):
    r, (raw0, raw4) = resnet_diff
    assert r.step_change["verdict"] == "faster" and r.step_change["high"] < 1
    m = r.to_frame().set_index("metric")
    assert m.at["DataLoader per step (us)", "a"] == pytest.approx(raw_loader_per_step(raw0))
    assert m.at["DataLoader per step (us)", "b"] == pytest.approx(raw_loader_per_step(raw4))
    assert m.at["DataLoader per step (us)", "a"] > 10 * m.at["DataLoader per step (us)", "b"]
    ops = r.ops.set_index("name")
    assert ops.at["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "status"] == "vanished"
    assert ops.at["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "status"] == "new"
    assert m.at["GPU idle (%)", "delta"] < 0


def test_compiled_trace_brings_new_triton_kernels():
    a, b = (shared_trace(n) for n in (BERT, COMPILED))
    r = diff(load_trace(a, use_cache=False), load_trace(b, use_cache=False))
    expected = raw_triton_names(raw(b)) - raw_triton_names(raw(a))
    assert len(expected) == 4
    new = r.new_kernels
    assert set(new.loc[new["triton"], "name"]) == expected
    json.dumps(r.to_json(), allow_nan=False)


def test_triton_example_against_itself():
    path = shared_trace(TRITON)
    trace = load_trace(path, use_cache=False)
    r = diff(trace, trace)
    assert int(r.kernels["triton"].sum()) == len(raw_triton_names(raw(path))) == 1
    assert r.new_kernels.empty and r.step_change["verdict"] == "not enough data"


def test_hta_control_vs_test_is_slower_on_different_hardware():
    a, b = (load_trace(shared_trace(n), use_cache=False) for n in (CONTROL, TEST))
    r = diff(a, b)
    assert r.step_change["verdict"] == "slower"
    assert any("different GPUs" in w for w in r.warnings)
    kinds = r.sync_kinds.set_index("kind")
    assert kinds.at["item", "blocked_us_b"] > kinds.at["item", "blocked_us_a"]


# --- pageable -> pinned, stub steps, moved waits, annotations ------------------------------------

def copy_trace(tmp_path, name, *, pinned):
    """One full step and an 18 us stub step, like the issue's pageable/pinned pair (whole-us
    timestamps, ties). Pageable: aten::to 462 us whose cudaMemcpyAsync blocks 440 us for a 417 us
    HtoD copy, then a 5 us event sync. Pinned: aten::to 27 us, an 8 us launch, a 183 us copy, and
    the wait moves into a 174 us cudaEventSynchronize."""
    b = TraceBuilder()
    step = 1_800 if pinned else 2_000
    b.step(0, 0, step)
    b.step(1, step, 18)                                           # the stub: starts where step 0 ends
    to_us, call_us, copy_us, sync_us = (27, 8, 183, 174) if pinned else (462, 440, 417, 5)
    b.cpu_op("aten::to", 10, to_us)
    b.cpu_op("aten::_to_copy", 10, to_us)                         # tie with its parent
    b.cpu_op("aten::copy_", 11, to_us - 1)
    memory = "Pinned" if pinned else "Pageable"
    b.memcpy("HtoD", memory, 12, call_us, 12 + 5, copy_us, 20 * 2**20)
    b.launch("void at::native::elementwise_kernel", 12 + to_us, 5, 30 + to_us + copy_us, 500)
    b.sync("cudaEventSynchronize", 40 + to_us, sync_us)
    b.cpu_op("aten::empty", step + 2, 0)                          # zero-length op in the stub
    return load_trace(b.write(tmp_path / f"{name}.json"), use_cache=False)


@pytest.fixture
def pinned_pair(tmp_path):
    return copy_trace(tmp_path, "pageable", pinned=False), copy_trace(tmp_path, "pinned", pinned=True)


def test_stub_steps_are_dropped_with_a_warning(pinned_pair):
    r = diff(*pinned_pair)
    m = r.to_frame().set_index("metric")
    assert (m.at["steps", "a"], m.at["steps", "b"]) == (1, 1)
    assert (m.at["median step (us)", "a"], m.at["median step (us)", "b"]) == (2000, 1800)
    stub = [w for w in r.warnings if "partial step" in w]
    assert len(stub) == 2 and "A: dropped 1 partial step(s)" in stub[0] and "step 1 (18 us)" in stub[0]
    ops = r.ops.set_index("name")
    assert "aten::empty" not in ops.index  # its only call is in the stub


def test_pinning_reports_the_copy_improvement_and_no_regression(pinned_pair):
    r = diff(*pinned_pair)
    m = r.to_frame().set_index("metric")
    assert (m.at["HtoD time per step (us)", "a"], m.at["HtoD time per step (us)", "b"]) == (417, 183)
    titles = [f.title for f in r.findings]
    assert "HtoD copy time per step fell by 0.234 ms (417 us -> 183 us)" in titles
    assert "op aten::to -0.435 ms/step (common): 462 us -> 27 us per step" in titles
    # aten::_to_copy and aten::copy_ are inside aten::to: one finding for the call the user made
    assert not any("aten::_to_copy" in t or "aten::copy_" in t for t in titles)
    assert not [f for f in r.findings if f.severity in ("critical", "high", "medium", "low")], titles
    # syncs counts the pageable copy's block as a sync point (in aten::to), so its total falls too
    assert m.at["sync blocked per step (us)", "delta"] < 0
    waits = r.waits.set_index("name")
    assert (waits.at["HtoD copy call", "per_step_us_a"], waits.at["HtoD copy call", "per_step_us_b"]) == (440, 8)
    assert (waits.at["event_sync", "per_step_us_a"], waits.at["event_sync", "per_step_us_b"]) == (5, 174)
    fell = next(f for f in r.findings if f.title.startswith("host waits on the GPU fell"))
    assert "by 0.263 ms/step (445 us -> 182 us)" in fell.title and "event_sync 5 us -> 174 us" in fell.title


def test_a_wait_that_only_moved_is_reported_as_moved(tmp_path):
    def trace(name, copy_call, event_sync):
        b = TraceBuilder()
        for s in range(3):
            t = s * 1000
            b.step(s, t, 1000)
            b.memcpy("HtoD", "Pinned", t + 10, copy_call, t + 15, 100, 4096)
            b.sync("cudaEventSynchronize", t + 20 + copy_call, event_sync)
        return load_trace(b.write(tmp_path / f"{name}.json"), use_cache=False)

    r = diff(trace("a", 300, 10), trace("b", 10, 300))
    moved = [f for f in r.findings if f.title.startswith("host wait moved between kinds")]
    assert len(moved) == 1 and moved[0].severity == "info" and "Not a regression" in moved[0].fix
    assert not [f for f in r.findings if "rose" in f.title]


def test_a_wait_that_grew_is_a_regression(tmp_path):
    def trace(name, event_sync):
        b = TraceBuilder()
        for s in range(3):
            b.step(s, s * 1000, 1000)
            b.sync("cudaEventSynchronize", s * 1000 + 20, event_sync)
        return load_trace(b.write(tmp_path / f"{name}.json"), use_cache=False)

    r = diff(trace("a", 10), trace("b", 300))
    rose = next(f for f in r.findings if f.title.startswith("host waits on the GPU rose"))
    assert rose.severity == "medium" and "event_sync 10 us -> 300 us" in rose.title


def test_record_function_ranges_are_compared_by_name(tmp_path):
    """Dreamer's seed: ``## train/sample ##`` takes 529 ms per step before, 358 ms after."""
    def trace(name, sample_ms):
        b = TraceBuilder()
        for s in range(3):
            t = s * 1_000_000
            b.step(s, t, 1_000_000)
            b.annotation("## train/sample ##", t + 1000, sample_ms * 1000)
            b.annotation("## train/update ##", t + 600_000, 300_000)
        return load_trace(b.write(tmp_path / f"{name}.json"), use_cache=False)

    r = diff(trace("a", 529), trace("b", 358))
    ann = r.annotations.set_index("name")
    assert (ann.at["## train/sample ##", "per_step_us_a"], ann.at["## train/sample ##", "per_step_us_b"]) == (
        529_000, 358_000)
    assert ann.at["## train/update ##", "delta_per_step_us"] == 0
    assert "record_function ## train/sample ## -171.000 ms/step (common): 529.000 ms -> 358.000 ms per step" in [
        f.title for f in r.findings]
    assert "ProfilerStep#0" not in ann.index
    assert r.to_json()["annotations"][0]["name"] == "## train/sample ##"


def test_cli_prints_waits_and_annotations(tmp_path, pinned_pair, capsys):
    from perfkit.cli import main
    a, b = (t.files[0].path for t in pinned_pair)
    assert main(["diff", "--no-cache", a, b]) == 0
    text = capsys.readouterr().out
    assert "host waits by kind" in text and "HtoD copy call" in text
    assert "info     HtoD copy time per step fell by 0.234 ms" in text
    assert "dropped 1 partial step(s)" in text


@pytest.mark.parametrize("durations, stubs", [
    ([26_000_000, 245_000, 245_000], [False, False, False]),   # a compile step beside real ones
    ([245_000, 245_000, 26_000_000], [False, False, False]),
    ([5_000, 5_100, 18], [False, False, True]),                # the profiler cut the last step short
    ([18, 5_000, 5_100], [True, False, False]),
    ([5_000, 18], [False, True]),
])
def test_a_stub_is_short_against_every_other_step_not_their_median(durations, stubs):
    import pandas as pd

    from perfkit.trace.steps import stub_steps

    starts = np.concatenate(([0.0], np.cumsum(durations)[:-1]))
    windows = pd.DataFrame({"rank": 0, "step": range(len(durations)), "start_us": starts,
                            "end_us": starts + durations, "dur_us": np.asarray(durations, dtype=float)})
    assert stub_steps(windows).tolist() == stubs


def test_top_ops_count_each_user_call_once(pinned_pair):
    """aten::to -> _to_copy -> copy_ is one call: top_ops (and the movers chart) hold aten::to only."""
    r = diff(*pinned_pair)
    assert {"aten::_to_copy", "aten::copy_"} <= set(r.ops["name"])
    assert "aten::to" in set(r.top_ops["name"])
    assert not {"aten::_to_copy", "aten::copy_"} & set(r.top_ops["name"])
    assert [row["name"] for row in r.to_json()["top_ops"]] == r.top_ops["name"].head(20).tolist()


def _per_call(path, op: str, dims: list) -> tuple[int, float]:
    """(calls, GPU us per call) of ``op`` on input ``dims``, by hand: the GPU events each such op launched."""
    events = orjson.loads(gzip.decompress(open(path, "rb").read()))["traceEvents"]
    owners = launch_owners(events)
    times: dict = {}
    for e in events:
        o = owners.get(id(e))
        if o is not None and o["name"] == op and (o.get("args") or {}).get("Input Dims") == dims:
            times[id(o)] = times.get(id(o), 0.0) + e["dur"]
    return len(times), sum(times.values()) / len(times)


def test_per_op_speedups_match_a_count_by_hand():
    """TimeSformer on an H100 (A) and an MI300X (B), TraceLens's trace-diff pair: the attention softmax on
    [8, 12, 3137, 3137] runs 5.72 ms a call on the H100 and 3.48 ms on the MI300X."""
    a, b = (shared_trace(f"tracelens_{g}_timesformer_infer_bf16.json.gz") for g in ("h100", "mi300x"))
    dims = [[8, 12, 3137, 3137], [], []]
    (calls_a, us_a), (calls_b, us_b) = _per_call(a, "aten::_softmax", dims), _per_call(b, "aten::_softmax", dims)
    table = diff(load_trace(a), load_trace(b)).op_speedups
    row = table[(table["op"] == "aten::_softmax") & (table["shape"] == "[[8, 12, 3137, 3137], [], []]")].iloc[0]
    assert (row["calls_a"], row["calls_b"]) == (calls_a, calls_b) == (12, 12)
    assert row["us_per_call_a"] == pytest.approx(us_a) and row["us_per_call_b"] == pytest.approx(us_b)
    assert row["speedup"] == pytest.approx(us_a / us_b) and round(row["speedup"], 2) == 1.65
    assert row["saved_us"] == pytest.approx((us_a - us_b) * calls_b)


def test_per_op_speedups_say_so_when_a_traces_file_is_gone(tmp_path):
    """Shapes are read from the file on demand; a live case study's traces are deleted after loading."""
    traces = []
    for side in "ab":
        b = TraceBuilder()
        for s in range(3):
            b.step(s, 1000 * s, 1000)
            op = b.cpu_op("aten::mm", 1000 * s + 10, 100)
            op["args"].update({"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]})
            b.launch("gemm", 1000 * s + 20, 5, gpu_ts=1000 * s + 40, gpu_dur=50 if side == "a" else 25)
        path = b.write(tmp_path / f"{side}.json")
        traces.append(load_trace(path, use_cache=False))
    row = diff(*traces).op_speedups.iloc[0]
    assert (row["op"], row["shape"], row["speedup"]) == ("aten::mm", "[[64, 64], [64, 64]]", 2.0)
    (tmp_path / "b.json").unlink()
    gone = diff(*traces)
    assert gone.op_speedups.empty and any(w.startswith("no per-op speedups: ") and "b.json" in w for w in gone.warnings)
