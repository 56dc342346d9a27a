"""syncs: one count per sync point with its kind, blocked time, step, op and source line; exact on
synthetic traces, checked against the raw JSON of real traces, and the CLI."""
import argparse
import gzip
import json
from collections import Counter

import pytest

import perfkit.cli
from perfkit.analysis.stacks import is_library, parse_frame
from perfkit.analysis.sync_points.find import syncs
from perfkit.cli import sync_points as syncs_cli
from perfkit.trace import load_trace

from conftest import shared_trace
from tracebuilder import TraceBuilder

ALEXNET = "hta_critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
EVENT_SYNC = "hta_critical_path__cuda_event_sync__event_sync_trace.json.gz"
QWEN = "tracelens_h100_qwen05b_infer_bf16.json.gz"
CPU_ONLY = "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
DLRM = [f"param_v100_dlrm_rank{i}.pt.trace.json.gz" for i in range(8)]


def item(b, ts, dur=40, *, device=True):
    """aten::item -> _local_scalar_dense -> (DtoH pageable copy + stream sync when on the GPU)."""
    b.cpu_op("aten::item", ts, dur)
    b.cpu_op("aten::_local_scalar_dense", ts + 1, dur - 2)
    if device:
        b.memcpy("DtoH", "Pageable", ts + 2, 5, ts + 8, 1, 4)
        b.sync("cudaStreamSynchronize", ts + 8, dur - 12, gpu_kind="Stream Sync")


def synthetic(with_stack=True):
    b = TraceBuilder(with_stack=with_stack)
    b.step(0, 0, 1000)
    b.step(1, 1000, 1000)
    if with_stack:
        b.python("train.py(42): step", 0, 2000)
        b.python("torch/_tensor.py(1): item", 95, 50)
    item(b, 100)                                        # step 0, under train.py:42 (torch frame skipped)
    item(b, 1100)                                       # step 1, same line
    item(b, 300, 10, device=False)                      # a CPU-tensor item: listed, not confirmed
    b.cpu_op("aten::to", 400, 100)                      # .cpu(): one memcpy_dtoh, not copy + stream sync
    b.cpu_op("aten::_to_copy", 401, 98)
    b.cpu_op("aten::copy_", 402, 96)
    b.memcpy("DtoH", "Pageable", 403, 60, 410, 2, 1024)
    b.sync("cudaStreamSynchronize", 465, 20)
    b.cpu_op("aten::is_nonzero", 600, 50)               # `if tensor:`: one is_nonzero
    item(b, 601, 48)
    b.cpu_op("aten::nonzero", 700, 30)
    b.sync("cudaStreamSynchronize", 705, 20)
    b.cpu_op("aten::copy_", 800, 40)                    # blocking HtoD copy: stream_sync in aten::copy_
    b.memcpy("HtoD", "Pageable", 801, 10, 812, 5, 2048)
    b.sync("cudaStreamSynchronize", 812, 20)
    b.sync("cudaDeviceSynchronize", 900, 50, gpu_kind="Context Sync")
    wait = b.runtime("cudaStreamWaitEvent", 960, 2)      # a GPU-side wait: not a host sync
    b.gpu("cuda_sync", "Stream Wait Event", 962, 1, correlation=wait["args"]["correlation"],
          cuda_sync_kind="Stream Wait Event")
    return b


@pytest.fixture
def result(tmp_path):
    return syncs(load_trace(synthetic().write(tmp_path / "s.json"), use_cache=False))


def test_each_sync_point_counted_once_with_its_kind(result):
    ev = result.sync_points
    assert Counter(ev["kind"]) == {"item": 2, "memcpy_dtoh": 1, "is_nonzero": 1, "nonzero": 1,
                                   "memcpy_htod_pageable": 1, "device_sync": 1}
    by_name = ev.set_index("ts_us")
    base = by_name.index.min() - 100   # the first item starts at 100 us
    at = {round(ts - base): row for ts, row in by_name.iterrows()}
    assert at[100]["name"] == "aten::item" and at[100]["blocked_us"] == 40 and at[100]["gpu_confirmed"]
    assert at[100]["call"] == "cudaMemcpyAsync"
    assert (at[402]["kind"], at[402]["name"], at[402]["top_op"], at[402]["blocked_us"]) == (
        "memcpy_dtoh", "aten::copy_", "aten::to", 96)
    assert (at[600]["kind"], at[600]["blocked_us"]) == ("is_nonzero", 50)
    # The pageable HtoD copy and its stream sync are one entry on the copy op: the copy's 10 us launch
    # blocks too (the old count, one 20 us stream_sync, missed it).
    assert (at[800]["kind"], at[800]["op"], at[800]["blocked_us"], at[800]["call"]) == (
        "memcpy_htod_pageable", "aten::copy_", 40, "cudaMemcpyAsync")
    assert (at[900]["kind"], at[900]["op"], at[900]["call"]) == ("device_sync", "", "cudaDeviceSynchronize")


def test_cpu_tensor_scalar_read_is_a_host_read_not_a_sync_point(result):
    reads = result.host_reads
    assert len(reads) == 1 and reads.iloc[0]["kind"] == "item" and not reads.iloc[0]["gpu_confirmed"]
    assert reads.iloc[0]["blocked_us"] == 10 and reads.iloc[0]["call"] == ""
    assert result.total["host_scalar_reads"] == 1 and result.total["host_scalar_read_us"] == 10
    assert "1 host scalar reads, no GPU wait" in repr(result)
    assert "host scalar reads, no GPU wait" in result._repr_html_()
    assert len(result.events) == len(result.sync_points) + len(reads)


def test_totals_do_not_add_gpu_side_cuda_sync_time(result):
    total = result.total
    assert total["count"] == 7 and total["gpu_confirmed"] == 7
    assert total["blocked_us"] == 40 + 40 + 96 + 50 + 30 + 40 + 50
    side = result.gpu_side.set_index("name")
    assert side.at["Stream Sync", "host_blocking"] == 3   # one per GPU item (two, and is_nonzero's)
    assert side.at["Context Sync", "host_blocking"] == 1
    assert side.at["Stream Wait Event", "host_blocking"] == 0 and side.at["Stream Wait Event", "host_other"] == 1


def test_sites_per_step_and_source_line(result):
    sites = result.to_frame()
    items = sites[(sites["kind"] == "item") & (sites["line"] == 42)].set_index("inner_file")
    assert set(items["file"]) == {"train.py"} and set(items["func"]) == {"step"}
    # Same user function, two paths: one .item() through torch/_tensor.py(1): item (the innermost
    # library frame), one called directly.
    via = items.loc["torch/_tensor.py"]
    assert (via["inner_line"], via["inner_func"], via["count"], via["blocked_us"], via["gpu_confirmed"]) == (
        1, "item", 1, 40, 1)
    direct = items.loc[""]
    assert (direct["inner_line"], direct["count"], direct["per_step"]) == (-1, 1, 0.5)
    assert sites["blocked_us"].is_monotonic_decreasing
    reads = result.host_read_sites()
    assert reads[["kind", "count", "blocked_us"]].values.tolist() == [["item", 1, 10.0]]


def test_to_json_schema(result):
    d = result.to_json()
    json.dumps(d, allow_nan=False)
    assert d["total"]["count"] == 7 and d["total"]["blocked_us"] == 346
    assert d["total"]["host_scalar_reads"] == 1 and d["total"]["cpu_only"] is False
    assert d["by_kind"]["item"] == {"count": 2, "blocked_us": 80.0, "per_step": 1.0}
    assert set(d["by_kind"]) == {"item", "memcpy_dtoh", "is_nonzero", "nonzero", "memcpy_htod_pageable",
                                 "device_sync"}
    site = d["sites"][0]
    assert {"kind", "op", "file", "line", "func", "inner_file", "inner_line", "inner_func", "call", "count",
            "blocked_us"} <= set(site)
    assert isinstance(site["line"], int) and site["file"] == "train.py"
    reads = d["host_scalar_reads"]
    assert (reads["count"], reads["host_us"], reads["per_step"]) == (1, 10.0, 0.5)
    assert reads["sites"][0]["host_us"] == 10.0 and "blocked_us" not in reads["sites"][0]
    assert "where the enclosing function starts" in d["source_lines"] and "perfkit detect" in d["source_lines"]


def test_without_stacks_sites_have_null_lines_and_a_warning(tmp_path):
    r = syncs(load_trace(synthetic(with_stack=False).write(tmp_path / "s.json"), use_cache=False))
    d = r.to_json()
    assert all(s["file"] is None and s["line"] is None for s in d["sites"])
    assert any("with_stack=True" in w for w in r.warnings)
    assert d["total"]["count"] == 7


def test_findings_rank_confirmed_sites_with_fixes(result):
    assert result.findings
    kinds = [f.title.split(" ")[0] for f in result.findings]
    assert "memcpy_dtoh" in kinds and "memcpy_htod_pageable" in kinds
    first = result.findings[0]
    assert first.fix and first.threshold and first.evidence["blocked_us"] > 0
    pageable = next(f for f in result.findings if f.title.startswith("memcpy_htod_pageable"))
    assert "pin" in pageable.fix and "non_blocking=True" in pageable.fix and "cudaMemcpyAsync" in pageable.fix
    assert any("function starting at train.py:42 (step)" in f.title for f in result.findings)


def test_cli_table_and_json(tmp_path, capsys):
    path = synthetic().write(tmp_path / "s.json.gz")
    parser = argparse.ArgumentParser()
    syncs_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["syncs", str(path)])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "7 sync points" in text and "function starting at train.py:42 (step)" in text and "memcpy_dtoh" in text
    assert "1 host scalar reads, no GPU wait" in text and "perfkit detect SCRIPT" in text
    head, reads = text.split("host scalar reads, no GPU wait (not counted above):")
    assert "memcpy_htod_pageable" in head and " item " in reads.splitlines()[1]
    args = parser.parse_args(["syncs", str(path), "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["total"]["count"] == 7


def test_main_cli_turns_a_missing_trace_into_exit_code_2(tmp_path, capsys):
    assert perfkit.cli.main(["syncs", str(tmp_path / "missing.json")]) == 2  # the old name, an alias
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("name, parsed", [
    ("train.py(42): step", ("train.py", 42, "step")),
    ("my pkg/model.py(7): <lambda>", ("my pkg/model.py", 7, "<lambda>")),
    ("<built-in method item of Tensor object at 0x7f>", None),
    ("nn.Module: Linear_0", None),
])
def test_parse_frame(name, parsed):
    assert parse_frame(name) == parsed


@pytest.mark.parametrize("path, library", [
    ("torch/nn/modules/module.py", True), ("contextlib.py", True), ("logging/__init__.py", True),
    ("/usr/lib/python3/site-packages/foo/bar.py", True), ("transformers/models/x.py", True),
    ("/usr/lib/python3.10/contextlib.py", True),
    ("train.py", False), ("rl/ppo.py", False), ("/home/me/torchy/run.py", False),
])
def test_library_frames(path, library):
    assert is_library(path) is library


# --- a trace recorded here by torch.profiler ------------------------------------------------------

def _train_step(x):
    y = (x * 2).sum()
    for _ in range(3):
        y.item()
    return x.double()


@pytest.mark.filterwarnings("ignore:.*Profiler clears events:UserWarning")
def test_trace_recorded_by_torch_profiler_names_the_function_and_count_per_step(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    out = tmp_path / "recorded.json"
    x = torch.randn(16, 16)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(out))) as prof:
        for _ in range(4):
            _train_step(x)
            prof.step()
    r = syncs(load_trace(out, use_cache=False))
    site = r.to_json()["sites"][0]
    assert (site["kind"], site["op"], site["count"], site["per_step"]) == ("item", "aten::item", 9, 3.0)
    assert site["func"] == "_train_step" and site["line"] == _train_step.__code__.co_firstlineno
    assert site["file"].endswith("test_analysis_syncs.py")
    assert any("ProfilerActivity.CUDA" in w for w in r.warnings)   # CPU-only recording: possible syncs


# --- real traces ---------------------------------------------------------------------------------

def raw(path):
    return [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]


def _innermost_op(events, call):
    """The innermost cpu_op on the call's thread whose [ts, ts + dur] holds the call (raw JSON)."""
    around = [e for e in events if e["cat"] == "cpu_op" and e["tid"] == call["tid"] and e["ts"] <= call["ts"]
              and call["ts"] + call["dur"] <= e["ts"] + e["dur"]]
    return max(around, key=lambda e: (e["ts"], -e["dur"]))


def test_alexnet_pageable_copies_count_their_blocking_launch():
    """AlexNet's 16 input copies are pageable HtoD cudaMemcpyAsync calls blocking 57 ms in all, each
    followed by a short stream sync in the same aten::copy_: 16 sync points on the copy ops (counted by
    hand from the raw JSON), not 16 stream syncs of 0.56 ms."""
    path = shared_trace(ALEXNET)
    events = raw(path)
    pageable = {e["args"]["correlation"] for e in events if e["name"] == "Memcpy HtoD (Pageable -> Device)"}
    launches = [e for e in events if e["cat"] == "cuda_runtime" and e["args"].get("correlation") in pageable]
    copy_ops = {id(op): op for op in (_innermost_op(events, e) for e in launches)}.values()
    stream = [e for e in events if e["name"] == "cudaStreamSynchronize"]
    device = [e["dur"] for e in events if e["name"] == "cudaDeviceSynchronize"]
    assert all(any(op["ts"] <= s["ts"] <= op["ts"] + op["dur"] for op in copy_ops) for s in stream)
    r = syncs(load_trace(path, use_cache=False))
    kinds = r.by_kind.set_index("kind")
    assert set(kinds.index) == {"memcpy_htod_pageable", "device_sync"}
    assert kinds.at["memcpy_htod_pageable", "count"] == len(copy_ops) == 16
    assert kinds.at["memcpy_htod_pageable", "blocked_us"] == sum(op["dur"] for op in copy_ops)
    assert kinds.at["device_sync", "count"] == len(device) and kinds.at["device_sync", "blocked_us"] == sum(device)
    assert r.total["blocked_us"] >= sum(e["dur"] for e in launches + stream) > 50_000
    cuda_sync = Counter(e["name"] for e in events if e["cat"] == "cuda_sync")
    side = r.gpu_side.set_index("name")
    assert side["count"].to_dict() == dict(cuda_sync)
    assert side.at["Stream Wait Event", "host_blocking"] == 0


def test_event_sync_trace_nests_the_stream_sync_in_is_nonzero():
    path = shared_trace(EVENT_SYNC)
    events = raw(path)
    outer = next(e for e in events if e["name"] == "aten::is_nonzero")
    inner = next(e for e in events if e["name"] == "cudaStreamSynchronize")
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    r = syncs(load_trace(path, use_cache=False))
    assert dict(Counter(r.events["kind"])) == {"is_nonzero": 1, "event_sync": 1, "device_sync": 1}
    assert r.events.set_index("kind").at["is_nonzero", "blocked_us"] == outer["dur"]
    assert r.gpu_side.set_index("name").at["Event Sync", "host_other"] == 1   # cudaEventQuery


@pytest.mark.parametrize("name", DLRM)
def test_dlrm_lists_each_item_call_once(name):
    """57 .item() calls, 18 of them 0 us long with a 0 us _local_scalar_dense at the same microsecond:
    each call is one entry, a sync point if a blocking runtime call lies inside it (counted here from
    the raw JSON by time containment on the thread), else a host scalar read; never 100."""
    path = shared_trace(name)
    events = raw(path)
    items = [e for e in events if e["name"] == "aten::item"]
    waits = [e for e in events if e["cat"] == "cuda_runtime" and e["name"] in (
        "cudaStreamSynchronize", "cudaMemcpyAsync", "cudaMemcpy")]
    waited = sum(any(w["tid"] == i["tid"] and i["ts"] <= w["ts"] and w["ts"] + w["dur"] <= i["ts"] + i["dur"]
                     for w in waits) for i in items)
    r = syncs(load_trace(path, use_cache=False))
    assert (r.events["name"] == "aten::item").sum() == len(items) == 57
    assert (r.sync_points["name"] == "aten::item").sum() == waited
    assert (r.host_reads["name"] == "aten::item").sum() == len(items) - waited
    assert r.total["host_scalar_reads"] == len(items) - waited
    assert not (r.events["name"] == "aten::_local_scalar_dense").any()
    assert r.to_json()["by_kind"].get("item", {"count": 0})["count"] == waited


def test_python_line_of_a_real_sync_encloses_it():
    path = shared_trace(QWEN)
    events = raw(path)
    r = syncs(load_trace(path, use_cache=False))
    row = r.events[r.events["kind"] == "is_nonzero"].iloc[0]
    op = next(e for e in events if e["name"] == "aten::is_nonzero")
    frames = [e for e in events if e["cat"] == "python_function" and e["tid"] == op["tid"]
              and e["ts"] <= op["ts"] and op["ts"] + op["dur"] <= e["ts"] + e["dur"]]
    chosen = next(f for f in frames if f["name"] == row["frame"])
    inner = [f for f in frames if f["ts"] > chosen["ts"]]
    assert not row["file"].startswith("torch/")
    assert all(f["name"].startswith(("torch/", "<", "nn.Module", "transformers/")) for f in inner)
    assert f"{row['file']}({row['line']}): {row['func']}" == row["frame"]


def test_cpu_only_trace_warns_instead_of_failing():
    r = syncs(load_trace(shared_trace(CPU_ONLY), use_cache=False))
    assert r.total["count"] == 0 and r.total["cpu_only"]
    assert any("re-profile" in w for w in r.warnings)
    assert "0 possible sync points (CPU-only trace)" in repr(r)


def _internal_items(tmp_path, *, cuda: bool):
    """A user's .item(), and aten::std / aten::multinomial whose implementations call aten::item."""
    b = TraceBuilder(with_stack=False)
    b.step(0, 0, 1000)
    item(b, 100, device=cuda)                            # the user's own .item(): outermost op
    b.cpu_op("aten::std", 200, 60)
    item(b, 210, 30, device=cuda)
    b.cpu_op("aten::multinomial", 300, 80)
    b.cpu_op("aten::_assert_async", 310, 40)
    item(b, 312, 30, device=False)                       # CUDA's _assert_async never reads on the host
    b.cpu_op("aten::nonzero", 500, 30)                   # a sync op: kept, on CPU too
    item(b, 502, 20, device=False)
    if cuda:
        b.launch("gemm", 600, 5, gpu_ts=610, gpu_dur=10)
    return syncs(load_trace(b.write(tmp_path / "t.json"), use_cache=False))


def test_cpu_trace_drops_items_issued_inside_other_ops(tmp_path):
    result = _internal_items(tmp_path, cuda=False)
    assert sorted(zip(result.events["kind"], result.events["top_op"])) == [("item", "aten::item"),
                                                                         ("nonzero", "aten::nonzero")]
    assert any("2 aten::item calls inside other ops (aten::std 1x, aten::multinomial 1x)" in w
               for w in result.warnings)


def test_gpu_trace_keeps_internal_items_for_confirmation(tmp_path):
    result = _internal_items(tmp_path, cuda=True)
    ev = result.events.set_index("top_op")
    assert bool(ev.at["aten::std", "gpu_confirmed"]) and not bool(ev.at["aten::multinomial", "gpu_confirmed"])
    assert len(result.events) == 4 and not any("inside other ops" in w for w in result.warnings)
    # Only GPU-confirmed item sites become findings: the unconfirmed multinomial one does not.
    assert not [f for f in result.findings if "multinomial" in f.title]


def test_all_dlrm_ranks_in_one_trace_keep_each_item_once_per_rank():
    paths = [shared_trace(name) for name in DLRM]
    r = syncs(load_trace(paths, use_cache=False))
    items = r.events[r.events["name"] == "aten::item"]
    assert items.groupby("rank").size().to_dict() == {rank: 57 for rank in range(8)}
    assert not (r.events["name"] == "aten::_local_scalar_dense").any()


def test_a_partial_step_at_the_window_edge_is_left_out_of_per_step_figures():
    """MI250 minitoy: ProfilerStep#2 lasts 49 us beside a 4.7 ms step (the profiler stopped). Per
    step means per full step: 3 syncs over 1 step, not 1.5 over 2; the other per-step analyses agree."""
    from perfkit.analysis.step.anatomy import step_anatomy
    from perfkit.analysis.step.cpu_bound import cpu_bound
    from perfkit.analysis.step.critical_path import critical_path
    from perfkit.analysis.step.gaps import gpu_gaps
    from perfkit.analysis.step.hotspots import hotspots
    from perfkit.analysis.htod import htod

    path = shared_trace("hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    with gzip.open(path, "rt") as f:
        steps = sorted(e["dur"] for e in json.load(f)["traceEvents"] if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    assert len(steps) == 2 and steps[0] < 0.1 * steps[1]
    trace = load_trace(path, use_cache=False)
    total = syncs(trace).to_json()["total"]
    # hipDeviceSynchronize runs after ProfilerStep#1 ends, in no step: counted, but outside the per-step figures.
    assert total["steps"] == 1 and total["count"] == 3 and total["per_step"] == 2
    assert total["outside_steps"]["count"] == 1 and total["outside_steps"]["blocked_us"] == pytest.approx(67.818, abs=1e-3)
    for result in (syncs(trace), htod(trace), hotspots(trace)):
        assert any("dropped 1 partial step(s)" in w and "step 2 (49 us)" in w for w in result.warnings), result.warnings
    assert htod(trace).n_steps == 1
    anatomy = step_anatomy(trace)
    assert anatomy.steps == 1 and anatomy.wall_us == pytest.approx(steps[1], abs=1)  # not the mean with the stub
    assert len(critical_path(trace).steps) == 1 and len(gpu_gaps(trace).steps) == 1
    assert any("step 2 (49 us)" in w for w in gpu_gaps(trace).warnings + critical_path(trace).warnings)
    cpu = cpu_bound(trace)  # one row per step; the cut-short one gets no verdict of its own
    assert cpu.steps["verdict"].tolist()[1] == "partial step" and cpu.steps["verdict"].tolist()[0] != "partial step"
    assert any("step 2 (49 us): cut short" in w for w in cpu.warnings)
