"""htod: copies by direction and memory kind, overlap, following syncs and source lines; exact on a
synthetic trace, and checked against the raw JSON of real traces."""
import gzip
import json
import re
from collections import defaultdict

import pytest

from perfkit.analysis.htod import htod
from perfkit.trace import load_trace

from conftest import shared_trace
from tracebuilder import TraceBuilder

ALEXNET = "hta_critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
DLRM = "param_v100_dlrm_rank0.pt.trace.json.gz"
RESNET = "param_rtx2080ti_resnet_train.json.gz"
AMD = "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
CPU_ONLY = "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
B200 = "tracelens_b200_serving_eager_rank0.json.gz"


def copies_builder(with_stack=True):
    b = TraceBuilder(with_stack=with_stack)
    b.step(0, 0, 1000)
    if with_stack:
        b.python("train.py(10): main", 0, 900)
        b.python("torch/nn/modules/module.py(1500): _call_impl", 50, 300)
    b.cpu_op("aten::to", 100, 100)
    b.cpu_op("aten::_to_copy", 102, 96)
    b.cpu_op("aten::copy_", 105, 90)
    b.memcpy("HtoD", "Pageable", 110, 20, gpu_ts=120, gpu_dur=40, nbytes=4_000_000)
    b.sync("cudaStreamSynchronize", 132, 30)                   # 2 us after the launch ends
    if with_stack:
        b.python("train.py(20): load", 400, 200)
    b.cpu_op("aten::copy_", 410, 50)
    b.memcpy("HtoD", "Pinned", 420, 5, gpu_ts=430, gpu_dur=100, nbytes=2_000_000, stream=9)
    b.kernel("compute", 450, 200, stream=7)                    # other stream: overlaps [450, 530)
    b.kernel("same_stream", 500, 100, stream=9)                # same stream as the copy: ignored
    b.cpu_op("aten::copy_", 700, 20)
    b.memcpy("HtoD", "Pageable", 702, 10, gpu_ts=710, gpu_dur=10, nbytes=1000)
    b.sync("cudaStreamSynchronize", 850, 10)                   # 138 us later: not "right after"
    b.memcpy("DtoH", "Pinned", 880, 5, gpu_ts=890, gpu_dur=4, nbytes=400)
    return b


@pytest.fixture
def result(tmp_path):
    return htod(load_trace(copies_builder().write(tmp_path / "c.json"), use_cache=False))


def test_summary_by_direction_and_memory(result):
    s = result.to_frame().set_index(["direction", "memory"])
    pageable, pinned = s.loc[("HtoD", "pageable")], s.loc[("HtoD", "pinned")]
    assert (pageable["count"], pageable["bytes"], pageable["time_us"]) == (2, 4_001_000, 50)
    assert pageable["gb_per_s"] == pytest.approx(4_001_000 / 50e3)
    assert pageable["followed_by_sync"] == 1 and pageable["overlap_pct"] == 0
    # effective: the longer of GPU time and host blocked (launch + sync) per copy: max(40, 20 + 30) + max(10, 10)
    assert pageable["host_blocked_us"] == 60 and pageable["effective_gb_per_s"] == pytest.approx(4_001_000 / 60e3)
    assert s.loc[("HtoD", "pinned"), "effective_gb_per_s"] == 20.0  # the 5 us launch hides under 100 us of copy
    assert (pinned["count"], pinned["bytes"], pinned["time_us"], pinned["gb_per_s"]) == (1, 2_000_000, 100, 20.0)
    assert pinned["overlap_pct"] == pytest.approx(80.0) and pinned["followed_by_sync"] == 0
    assert s.loc[("DtoH", "pinned"), "count"] == 1
    assert result.htod_overlap_pct == pytest.approx(100 * 80 / 150)


def test_issuing_op_and_innermost_user_frame(result):
    c = result.copies.sort_values("ts_us")
    first = c.iloc[0]
    assert (first["op"], first["top_op"]) == ("aten::copy_", "aten::to")
    assert (first["file"], first["line"]) == ("train.py", 10)   # the torch frame inside it is skipped
    assert first["sync_name"] == "cudaStreamSynchronize"
    assert (c.iloc[1]["file"], c.iloc[1]["line"]) == ("train.py", 20)
    sites = result.sites
    assert len(sites) == 4 and sites["count"].sum() == 4
    top = sites.iloc[0]
    assert (top["direction"], top["memory"], top["file"], top["line"]) == ("HtoD", "pinned", "train.py", 20)


def test_findings_pin_memory_and_non_blocking(result):
    titles = {f.title: f for f in result.findings}
    pageable = next(f for t, f in titles.items() if "pageable" in t)
    synced = next(f for t, f in titles.items() if "followed by a host sync" in t)
    assert pageable.evidence["count"] == 2 and "pin_memory" in pageable.fix and pageable.threshold
    assert synced.evidence["count"] == 1 and "non_blocking=True" in synced.fix
    assert synced.evidence["top_site"] == "train.py:10"
    assert not result.warnings


def test_sync_gap_is_a_knob(tmp_path):
    trace = load_trace(copies_builder().write(tmp_path / "c.json"), use_cache=False)

    def late_copy_synced(result):   # its sync starts 138 us after the launch ends
        return result.copies.sort_values("ts_us").iloc[2]["followed_by_sync"]

    assert not late_copy_synced(htod(trace)) and late_copy_synced(htod(trace, sync_gap_us=200))


def test_without_stacks_the_line_is_missing_and_a_warning_says_why(tmp_path):
    r = htod(load_trace(copies_builder(with_stack=False).write(tmp_path / "c.json"), use_cache=False))
    assert r.copies["file"].isna().all()
    assert any("with_stack=True" in w for w in r.warnings)
    assert r.to_frame()["count"].sum() == 4


def test_rocm_copies_have_unknown_memory_kind(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.memcpy("HtoD", "Host", 10, 5, 20, 5, 512, launch_name="hipMemcpyWithStream")
    r = htod(load_trace(b.write(tmp_path / "rocm.json"), use_cache=False))
    row = r.to_frame().iloc[0]
    assert (row["memory"], row["followed_by_sync"]) == ("unknown", 1)   # hipMemcpyWithStream is synchronous
    assert any("ROCm" in w for w in r.warnings)
    assert not any("pageable" in f.title for f in r.findings)


def test_html_and_repr(result):
    assert "Host-device copies" in result._repr_html_()
    assert "2 pageable" in repr(result) and "1 followed by a sync" in repr(result)
    json.dumps(result.to_json(), allow_nan=False)


# --- real traces ---------------------------------------------------------------------------------

_NAME = re.compile(r"Memcpy (\w+) \((\w+) -> (\w+)\)")


def raw_copies(path, gap_us=100.0):
    """(direction, memory, bytes, followed_by_sync) per GPU copy, from the raw JSON."""
    events = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "Runtime", "cuda_driver")]
    by_corr = {e["args"]["correlation"]: e for e in runtime if "correlation" in e.get("args", {})}
    thread = defaultdict(list)
    for e in runtime:
        thread[(e["pid"], e["tid"])].append(e)
    for calls in thread.values():
        calls.sort(key=lambda e: e["ts"])
    out = []
    for e in events:
        m = _NAME.match(e["name"]) if e.get("cat") in ("gpu_memcpy", "Memcpy") else None
        if m is None:
            continue
        ends = {m.group(2), m.group(3)}
        memory = "pageable" if "Pageable" in ends else "pinned" if "Pinned" in ends else \
            "device" if ends == {"Device"} else "unknown"
        launch = by_corr.get(e["args"].get("correlation"))
        followed = False
        if launch is not None:
            calls = thread[(launch["pid"], launch["tid"])]
            i = calls.index(launch)
            nxt = calls[i + 1] if i + 1 < len(calls) else None
            followed = launch["name"] in ("cudaMemcpy", "hipMemcpy", "hipMemcpyWithStream") or bool(
                nxt and nxt["name"] in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                                        "hipStreamSynchronize", "hipDeviceSynchronize")
                and nxt["ts"] - launch["ts"] - launch["dur"] <= gap_us)
        nbytes = e["args"].get("bytes")
        if nbytes is None and launch is not None:   # ROCm writes the size only on the runtime call
            nbytes = int(launch["args"].get("size", 0))   # written as a string
        out.append((m.group(1), memory, nbytes or 0, followed))
    return out


@pytest.mark.parametrize("name", [ALEXNET, DLRM, RESNET, AMD])
def test_counts_bytes_and_syncs_match_raw_json(name):
    path = shared_trace(name)
    expected = defaultdict(lambda: [0, 0, 0])
    for direction, memory, nbytes, followed in raw_copies(path):
        row = expected[(direction, memory)]
        row[0], row[1], row[2] = row[0] + 1, row[1] + nbytes, row[2] + followed
    got = htod(load_trace(path, use_cache=False)).to_frame()
    got = {(r["direction"], r["memory"]): [r["count"], r["bytes"], r["followed_by_sync"]]
           for r in got.to_dict("records")}
    assert got == dict(expected)


def test_alexnet_pageable_copies_are_each_followed_by_a_stream_sync():
    r = htod(load_trace(shared_trace(ALEXNET), use_cache=False))
    h = r.copies[r.copies["direction"] == "HtoD"]
    assert len(h) == 16 and (h["memory"] == "pageable").all()
    assert h["followed_by_sync"].all() and set(h["sync_name"]) == {"cudaStreamSynchronize"}
    assert {"aten::to"} == set(h["top_op"])
    assert any("pageable" in f.title for f in r.findings)


def test_resnet_has_61_pageable_copies_followed_by_a_sync():
    r = htod(load_trace(shared_trace(RESNET), use_cache=False))
    h = r.copies[(r.copies["direction"] == "HtoD") & (r.copies["memory"] == "pageable")]
    assert int(h["followed_by_sync"].sum()) == 61


def test_stack_trace_names_a_user_line_for_its_copies():
    path = shared_trace(B200)
    frames = {e["name"] for e in json.load(gzip.open(path))["traceEvents"] if e.get("cat") == "python_function"}
    r = htod(load_trace(path, use_cache=False))
    h = r.copies[r.copies["direction"] == "HtoD"]
    assert h["file"].notna().all()
    assert not h["file"].str.startswith(("torch/", "<")).any()
    assert set(h["frame"]) <= frames


def test_cpu_only_trace_warns():
    r = htod(load_trace(shared_trace(CPU_ONLY), use_cache=False))
    assert r.to_frame().empty and not r.findings
    assert any("ProfilerActivity.CUDA" in w for w in r.warnings)


def test_pageable_finding_counts_the_host_blocked_in_the_copy_calls():
    """DLRM rank 0: the pageable copies take microseconds on the GPU but their cudaMemcpyAsync calls
    block the host for over a millisecond; the finding must say so (hand count from the raw JSON)."""
    path = shared_trace("param_v100_dlrm_rank0.pt.trace.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    pageable = {e["args"]["correlation"] for e in events
                if e.get("cat") == "gpu_memcpy" and "HtoD (Pageable" in e.get("name", "")}
    runtime = sorted((e for e in events if e.get("cat") == "cuda_runtime"), key=lambda e: (e["tid"], e["ts"]))
    calls_us = 0
    for call, nxt in zip(runtime, runtime[1:] + [None]):
        if call.get("args", {}).get("correlation") in pageable:
            calls_us += call["dur"]
            if nxt and nxt["tid"] == call["tid"] and nxt["name"] == "cudaStreamSynchronize" \
                    and nxt["ts"] - call["ts"] - call["dur"] <= 100:
                calls_us += nxt["dur"]
    finding = next(f for f in htod(load_trace(path)).findings if "pageable memory" in f.title)
    assert finding.evidence["host_blocked_us"] == pytest.approx(calls_us)
    assert calls_us > 50 * finding.evidence["time_us"]
    assert f"host blocked {calls_us / 1e3:.2f} ms" in finding.title
