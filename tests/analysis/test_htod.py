"""htod: copies by direction and memory kind, overlap, following syncs and source lines; exact on a
synthetic trace, and checked against the raw JSON of real traces."""
import gzip
import json
import re
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.htod import (SUMMARY_COLUMNS, _COPY_COLUMNS, _gbps, _severity, _top_site, htod,
                                  summarize_copies)
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


# --- every rule on small evidence (mutation score, issue 56) --------------------------------------

def _load(tmp_path, b):
    return load_trace(b.write(tmp_path / "t.json"), use_cache=False)


def _values(column):
    """A column's values with every missing value (None, NaN, NA) as None."""
    return [None if pd.isna(v) else v for v in column]


def test_findings_say_exactly_what_they_measured(result):
    """The fixture's two pageable copies (4 MB with a 20 us call and a 30 us sync after it; 1000 B with a 10 us
    call), its pinned 2 MB copy and its one synced copy, in a 1000 us step."""
    pageable, synced = (next(f for f in result.findings if key in f.title) for key in ("pageable", "host sync"))
    assert pageable.title == ("2 HtoD copies from pageable memory: host blocked 0.06 ms in their copy calls and the "
                              "syncs after them (GPU copy time 0.05 ms)")
    assert pageable.evidence == {"count": 2, "steps": 1, "per_step": 2.0, "all_steps_wall_us": 1000.0,
                                 "bytes": 4_001_000, "time_us": 50.0, "host_blocked_us": 60.0,
                                 "gb_per_s": pytest.approx(4_001_000 / 50e3), "pinned_gb_per_s": 20.0,
                                 "top_site": "train.py:10"}
    assert pageable.fix == ("Pin the host memory: DataLoader(pin_memory=True), or tensor.pin_memory() once for buffers "
                            "reused every step, and copy with non_blocking=True; pageable copies go through a staging "
                            "buffer and block the host.")
    assert pageable.threshold.startswith("any pageable HtoD copy; severity from the larger of host blocked and GPU")
    assert synced.title == "1 HtoD copies are each followed by a host sync (0.03 ms blocked)"
    assert synced.evidence == {"count": 1, "per_step": 1.0, "time_us": 40.0, "sync_us": 30.0,
                               "sync_calls": "cudaStreamSynchronize", "top_site": "train.py:10"}
    assert synced.fix == "Use tensor.to(device, non_blocking=True) from pinned memory so the host does not wait " \
                         "for each copy."
    assert synced.threshold == ("blocking call within 100 us after the copy's launch on the same thread; 'high' from "
                                "5%, 'medium' from 1% of step wall time (perfkit rule)")
    assert (pageable.severity, synced.severity) == ("high", "medium")   # 60 us and 30 us of 1000 us


def test_the_copy_table_and_its_totals(result):
    c = result.copies
    assert list(c.columns) == _COPY_COLUMNS and list(c.index) == [0, 1, 2, 3]
    assert (result.n_steps, result.wall_us) == (1, 1000.0)
    assert _values(c["op"]) == ["aten::copy_", "aten::copy_", "aten::copy_", None]
    assert _values(c["top_op"]) == ["aten::to", "aten::copy_", "aten::copy_", None]
    assert c["sync_us"].tolist() == [30.0, 0.0, 0.0, 0.0] and c["line"].dtype == "Int64"
    assert c["name"].tolist()[:2] == ["Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pinned -> Device)"]
    assert not isinstance(c["name"].dtype, pd.CategoricalDtype) and c["launch"].dtype == np.int64
    assert result.to_frame()["per_step"].tolist() == [1.0, 2.0, 1.0]   # DtoH pinned, HtoD pageable, HtoD pinned


def test_json_and_html_hold_every_part(result):
    j = result.to_json()
    assert set(j) == {"summary", "sites", "htod_overlap_pct", "findings", "warnings"}
    assert [r["count"] for r in j["summary"]] == [1, 2, 1] and len(j["sites"]) == 4
    assert j["htod_overlap_pct"] == pytest.approx(100 * 80 / 150) and len(j["findings"]) == 2
    html = result._repr_html_()
    assert "<h4>Host-device copies</h4>" in html
    for part in ("followed by a host sync", "effective_<wbr>gb", "top_<wbr>op"):   # findings, summary, sites
        assert part in html


def test_json_keeps_the_50_costliest_sites(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 10_000)
    for i in range(51):
        b.cpu_op(f"aten::op{i}", 100 * i, 50)
        b.memcpy("HtoD", "Pinned", 100 * i + 1, 5, gpu_ts=100 * i + 10, gpu_dur=1 + i, nbytes=10)
    r = htod(_load(tmp_path, b))
    sites = r.to_json()["sites"]
    assert len(r.sites) == 51 and len(sites) == 50 and sites[-1]["op"] == "aten::op1"


def test_html_shows_the_warnings(tmp_path):
    r = htod(load_trace(copies_builder(with_stack=False).write(tmp_path / "c.json"), use_cache=False))
    assert "with_stack=True" in r._repr_html_()


def _first_event_trace(first: str) -> TraceBuilder:
    """A trace whose first event (label 0) is a copy's launch call or the op around it."""
    b = TraceBuilder()
    if first == "op":
        b.cpu_op("aten::copy_", 0, 50)
    b.memcpy("HtoD", "Pinned", 0 if first == "launch" else 10, 5, gpu_ts=20, gpu_dur=5, nbytes=64)
    if first == "launch":
        b.cpu_op("aten::copy_", 0, 50)     # at the launch's time, written after it: the launch keeps label 0
    b.step(0, 60, 1000)
    b.gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 70, 5, stream=7)   # no launch call, size unknown
    b.memcpy("HtoD", "Pageable", 200, 8, gpu_ts=210, gpu_dur=4, nbytes=0)
    return b


@pytest.mark.parametrize("first", ["launch", "op"])
def test_labels_from_0_and_a_copy_without_launch(tmp_path, first):
    op = "aten::copy_"
    r = htod(_load(tmp_path, _first_event_trace(first)))
    c = r.copies
    assert c["launch"].tolist()[1] == -1 and c["launch"].dtype == np.int64
    assert (c["launch"].tolist()[0] == 0) == (first == "launch")
    assert _values(c["op"]) == [op, None, None] and _values(c["top_op"]) == [op, None, None]
    assert c["launch_name"].tolist()[0] == "cudaMemcpyAsync" and pd.isna(c["launch_us"].tolist()[1])
    assert r.warnings == ("1 copies have no launch call in the trace: no issuing op or sync check for them",
                          "no Python stacks: copies cannot be tied to source lines; re-profile with with_stack=True")
    pageable = next(f for f in r.findings if "pageable" in f.title)
    # the unlaunched copy's call is 0 us, not NaN; its unknown size (-1) and the 0-byte copy add 0 bytes
    assert (pageable.evidence["host_blocked_us"], pageable.evidence["bytes"]) == (8.0, 0)
    assert (pageable.evidence["gb_per_s"], pageable.evidence["pinned_gb_per_s"]) == (0.0, pytest.approx(64 / 5e3))


def test_a_copy_without_launch_alone_has_no_frame(tmp_path):
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 100)
    b.python("train.py(3): main", 0, 100)
    b.gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 50, 5, bytes=8)
    r = htod(_load(tmp_path, b))
    assert r.copies["frame"].tolist() == [None] and r.copies["line"].dtype == "Int64"
    assert r.copies["launch"].tolist() == [-1]


def test_a_launch_that_is_the_first_event_keeps_its_source_line(tmp_path):
    b = TraceBuilder(with_stack=True)
    b.memcpy("HtoD", "Pinned", 0, 5, gpu_ts=20, gpu_dur=5, nbytes=64)
    b.python("train.py(7): main", 0, 100)
    b.step(0, 1, 1000)
    r = htod(_load(tmp_path, b))
    assert r.copies["launch"].tolist() == [0] and (r.copies["file"][0], r.copies["line"][0]) == ("train.py", 7)
    assert not any("no launch call" in w for w in r.warnings)


def test_a_sync_is_found_on_a_process_and_thread_named_in_text(tmp_path):
    b = TraceBuilder(pid="host", tid="main")
    b.step(0, 0, 100)
    b.memcpy("HtoD", "Pinned", 0, 5, gpu_ts=20, gpu_dur=5, nbytes=64)
    b.sync("cudaStreamSynchronize", 6, 5)
    assert htod(_load(tmp_path, b)).copies["followed_by_sync"].tolist() == [True]


def test_findings_per_step_in_ms_with_every_sync_call_named(tmp_path):
    b = TraceBuilder()
    for step in (0, 1):
        b.step(step, 50_000 * step, 50_000)
        ts = 50_000 * step + 100
        b.memcpy("HtoD", "Pageable", ts, 20, gpu_ts=ts + 30, gpu_dur=5_000, nbytes=64)
        b.sync(("cudaStreamSynchronize", "cudaDeviceSynchronize")[step], ts + 25, 5_000)
    r = htod(_load(tmp_path, b))
    pageable, synced = (next(f for f in r.findings if key in f.title) for key in ("pageable", "host sync"))
    assert pageable.title == ("2 HtoD copies from pageable memory: host blocked 10.04 ms in their copy calls and the "
                              "syncs after them (GPU copy time 10.00 ms)")
    assert synced.title == "2 HtoD copies are each followed by a host sync (10.00 ms blocked)"
    assert (pageable.evidence["per_step"], synced.evidence["per_step"]) == (1.0, 1.0)
    assert synced.evidence["sync_calls"] == "cudaDeviceSynchronize, cudaStreamSynchronize"


@pytest.mark.parametrize("gap, synced", [(100, True), (101, False)])
def test_a_sync_counts_up_to_the_gap_after_the_launch_ends(tmp_path, gap, synced):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.memcpy("HtoD", "Pinned", 10, 50, gpu_ts=20, gpu_dur=5, nbytes=64)      # the call ends at 60
    b.sync("cudaDeviceSynchronize", 60 + gap, 7)
    b.runtime("cudaLaunchKernel", 900, 5, tid=2)                              # another thread after it
    c = htod(_load(tmp_path, b)).copies
    assert (bool(c["followed_by_sync"][0]), c["sync_name"][0], c["sync_us"][0]) == \
        ((True, "cudaDeviceSynchronize", 7.0) if synced else (False, None, 0.0))


def test_the_last_call_of_a_thread_is_followed_only_on_its_thread(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.runtime("cudaLaunchKernel", 0, 5)
    b.memcpy("HtoD", "Pinned", 10, 5, gpu_ts=20, gpu_dur=5, nbytes=64)       # the thread's last call
    b.runtime("cudaLaunchKernel", 300, 5, tid=2)
    b.sync("cudaStreamSynchronize", 310, 5, tid=2)                           # two rows after the copy's call
    c = htod(_load(tmp_path, b)).copies
    assert not c["followed_by_sync"][0]


def test_a_synchronous_copy_is_its_own_sync(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.memcpy("HtoD", "Pageable", 10, 50, gpu_ts=20, gpu_dur=5, nbytes=64, launch_name="cudaMemcpy")
    c = htod(_load(tmp_path, b)).copies
    assert (bool(c["followed_by_sync"][0]), c["sync_name"][0], c["sync_us"][0]) == (True, "cudaMemcpy", 0.0)


def test_overlap_counts_kernels_of_other_streams_of_the_same_device(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.memcpy("HtoD", "Pinned", 10, 5, gpu_ts=100, gpu_dur=100, nbytes=64, stream=7)   # 100-200
    b.memcpy("HtoD", "Pinned", 20, 5, gpu_ts=300, gpu_dur=100, nbytes=64, stream=9)   # 300-400
    b.kernel("on_7", 150, 200, stream=7)        # 150-350: the copy on 9 for 50 us, not its own stream's
    b.kernel("on_9", 180, 10, stream=9)         # 180-190: the copy on 7 for 10 us
    b.kernel("other_gpu", 100, 300, stream=5, device=1)
    c = htod(_load(tmp_path, b)).copies.sort_values("ts_us")
    assert c["overlap_us"].tolist() == [10.0, 50.0]


@pytest.mark.parametrize("time_us, wall_us, severity", [
    (50, 1000, "high"), (49.9, 1000, "medium"), (10, 1000, "medium"), (9.9, 1000, "low"),
    (5, 0, "high"),            # no step wall time: the share is taken as whole
    (0.005, 1.0, "low"),       # a 1 us wall is a wall
])
def test_severity_by_share_of_step_wall_time(time_us, wall_us, severity):
    assert _severity(time_us, wall_us) == severity


def _frame(**columns):
    return pd.DataFrame(columns)


@pytest.mark.parametrize("nbytes, dur_us, gbps", [
    ([1000, 0], [10, 10], 1000 / 20e3),   # a 0-byte copy of known size counts its time
    ([1000, -1], [10, 30], 1000 / 10e3),  # an unknown size (-1) does not
    ([1000], [0.5], 1000 / 0.5e3),
    ([1000], [0.0], float("nan")),
    ([-1], [10], float("nan")),
])
def test_gb_per_s_of_copies_of_known_size(nbytes, dur_us, gbps):
    got = _gbps(_frame(bytes=nbytes, dur_us=dur_us))
    assert got == pytest.approx(gbps, nan_ok=True)


def _copy_rows(*rows):
    """Copies with (direction, memory, bytes, dur_us, launch_us, sync_us, overlap_us, followed_by_sync)."""
    cols = ["direction", "memory", "bytes", "dur_us", "launch_us", "sync_us", "overlap_us", "followed_by_sync"]
    return pd.DataFrame(rows, columns=cols).astype({"bytes": np.int64, "dur_us": float, "launch_us": float,
                                                      "sync_us": float, "overlap_us": float})


def test_summary_rates_skip_unknown_sizes_and_empty_times():
    nan = float("nan")
    s = summarize_copies(_copy_rows(
        ("HtoD", "pinned", 1000, 10.0, nan, nan, 5.0, False),
        ("HtoD", "pinned", 0, 10.0, 2.0, 3.0, 0.0, True),       # known size 0: its time counts
        ("HtoD", "pinned", -1, 40.0, 50.0, 0.0, 0.0, False),     # unknown size: time and bytes left out of rates
        ("DtoH", "pinned", 100, 0.5, 0.0, 0.0, 0.0, False),      # under 1 us of copy time is still a rate
        ("DtoD", "device", 100, 0.0, 0.0, 0.0, 0.0, False),      # no time at all: no rate
    ), n_steps=2)
    s = s.set_index(["direction", "memory"])
    h, d, dd = s.loc[("HtoD", "pinned")], s.loc[("DtoH", "pinned")], s.loc[("DtoD", "device")]
    assert (h["bytes"], h["time_us"], h["host_blocked_us"], h["followed_by_sync"]) == (1000, 60.0, 55.0, 1)
    assert h["gb_per_s"] == pytest.approx(1000 / 20e3) and h["effective_gb_per_s"] == pytest.approx(1000 / 20e3)
    assert h["overlap_pct"] == pytest.approx(100 * 5 / 60) and h["per_step"] == 1.5
    assert d["gb_per_s"] == pytest.approx(100 / 0.5e3) and d["effective_gb_per_s"] == pytest.approx(100 / 0.5e3)
    assert d["overlap_pct"] == 0.0
    assert np.isnan(dd["gb_per_s"]) and np.isnan(dd["effective_gb_per_s"]) and np.isnan(dd["overlap_pct"])
    assert pd.api.types.is_integer_dtype(s["bytes"])
    assert (s[["gb_per_s", "effective_gb_per_s", "overlap_pct", "per_step"]].dtypes == np.float64).all()


def test_summary_rows_sorted_by_direction_and_memory_and_empty_columns():
    s = summarize_copies(_copy_rows(("HtoD", "pinned", 1, 1.0, 0.0, 0.0, 0.0, False),
                                    ("DtoH", "pinned", 1, 1.0, 0.0, 0.0, 0.0, False)), n_steps=1)
    assert s["direction"].tolist() == ["DtoH", "HtoD"]
    assert list(summarize_copies(_copy_rows(), n_steps=1).columns) == SUMMARY_COLUMNS


@pytest.mark.parametrize("file, line, op, site", [
    ("train.py", 3, "aten::to", "train.py:3"),
    ("train.py", None, "aten::to", "aten::to"),   # a file without a line is no site
    (None, None, "aten::to", "aten::to"),
    (None, None, None, "?"),
    (None, None, float("nan"), "?"),   # a missing op in a column of op names (str dtype) is NaN, not None
])
def test_top_site_is_the_source_line_else_the_op(file, line, op, site):
    frame = pd.DataFrame({"file": [file, "b.py"], "line": pd.array([line, 1], dtype="Int64"), "top_op": [op, "x"],
                          "dur_us": [1.0, 0.5]})
    assert _top_site(frame) == site


def test_warnings_without_gpu_events_or_without_copies(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.cpu_op("aten::add", 10, 5)
    assert htod(_load(tmp_path, b)).warnings == (
        "no GPU events: copies cannot be seen; re-profile with activities=[ProfilerActivity.CPU, "
        "ProfilerActivity.CUDA]",)
    b.launch("k", 20, 5, 30, 5)
    assert htod(_load(tmp_path, b)).warnings == ("no memcpy events in the trace",)


def test_unknown_memory_warning_counts_the_unlabelled_copies(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.memcpy("HtoD", "Host", 10, 5, 20, 5, 512, launch_name="hipMemcpyWithStream")
    b.memcpy("HtoD", "Pinned", 40, 5, 50, 5, 512)
    b.memcpy("HtoD", "Pinned", 60, 5, 70, 5, 512)
    r = htod(_load(tmp_path, b))
    assert r.warnings[0] == "1 copies have no pageable/pinned label (ROCm writes only 'Host'): memory kind unknown"
    assert _values(r.copies["sync_name"]) == ["hipMemcpyWithStream", None, None]
