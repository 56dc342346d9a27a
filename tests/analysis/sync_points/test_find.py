"""Which copy launches block the host (``perfkit.analysis.sync_points.find``): a table of copy names as CUDA and
ROCm write them, and one synthetic ROCm trace through ``syncs`` (no ../shared)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.classify import copy_direction, copy_memory
from perfkit.analysis.sync_points.find import _blocking_copies, blocking_calls, in_windows, pageable_copy_calls, syncs
from perfkit.analysis.sync_points.result import EPISODE_COLUMNS
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


@pytest.mark.parametrize("copy, launch, kind", [
    pytest.param("Memcpy DtoH (Device -> Pageable)", "cudaMemcpyAsync", "memcpy_dtoh", id="dtoh-pageable"),
    pytest.param("Memcpy DtoH (Device -> Pinned)", "cudaMemcpyAsync", None, id="dtoh-pinned-async"),
    pytest.param("Memcpy DtoH (Device -> Pinned)", "cudaMemcpy", "memcpy_dtoh", id="dtoh-pinned-synchronous-launch"),
    # ROCm names the host side "Host" only: not known to be pinned, so it blocks like a pageable copy
    pytest.param("Memcpy DtoH (Device -> Host)", "hipMemcpyAsync", "memcpy_dtoh", id="dtoh-rocm-host"),
    pytest.param("Memcpy HtoD (Pageable -> Device)", "cudaMemcpyAsync", "memcpy_htod_pageable", id="htod-pageable"),
    pytest.param("Memcpy HtoD (Pinned -> Device)", "cudaMemcpyAsync", None, id="htod-pinned"),
    pytest.param("Memcpy HtoD (Host -> Device)", "hipMemcpyAsync", None, id="htod-rocm-host"),
    pytest.param("Memcpy DtoD (Device -> Device)", "cudaMemcpyAsync", None, id="dtod"),
])
def test_blocking_copy_table(copy, launch, kind):
    copies = pd.DataFrame({"direction": [copy_direction(copy)], "memory": [copy_memory(copy)],
                           "launch_name": [launch]}, index=[7])
    found = {k for k, labels in _blocking_copies(copies).items() if 7 in labels}
    assert found == ({kind} if kind else set())


def test_a_rocm_device_to_host_copy_is_a_sync_point(tmp_path):
    b = TraceBuilder(gpu_name="AMD Instinct MI300X")
    b.step(0, 0, 1_000)
    b.step(1, 1_000, 1_000)
    b.cpu_op("aten::copy_", 100, 300)
    b.memcpy("DtoH", "Host", 110, 250, 120, 200, 4096, launch_name="hipMemcpyAsync")  # Memcpy DtoH (Device -> Host)
    result = syncs(load_trace(b.write(tmp_path / "t.json")))
    points = result.sync_points
    assert points["kind"].tolist() == ["memcpy_dtoh"]


# -- one synthetic trace through ``syncs``: which entries, anchored where, counted how -----------------------------
def _steps(b, n=3, dur=1_000):
    for s in range(n):
        b.step(s, s * dur, dur)
        b.launch("k", s * dur + 5, 3, s * dur + 10, 50)


def _gpu_trace(tmp_path):
    b = TraceBuilder()
    _steps(b)
    # if tensor: -> aten::is_nonzero -> item -> _local_scalar_dense -> a stream sync: one is_nonzero
    b.cpu_op("aten::is_nonzero", 1_100, 300)
    b.cpu_op("aten::item", 1_110, 280)
    b.cpu_op("aten::_local_scalar_dense", 1_120, 260)
    b.sync("cudaStreamSynchronize", 1_130, 240, gpu_kind="Stream Sync")
    b.cpu_op("aten::item", 1_600, 30)  # a CPU tensor's item: nothing waits under it
    # .cpu(): aten::to -> copy_ -> a pageable device-to-host copy, then a stream sync: one memcpy_dtoh on copy_
    b.cpu_op("aten::to", 2_100, 300)
    b.cpu_op("aten::copy_", 2_110, 280)
    b.memcpy("DtoH", "Pageable", 2_120, 100, 2_130, 50, 4096)
    b.sync("cudaStreamSynchronize", 2_230, 100)
    b.cpu_op("aten::copy_", 2_500, 200)  # from pageable memory: blocks
    b.memcpy("HtoD", "Pageable", 2_510, 150, 2_520, 100, 4096)
    b.cpu_op("aten::copy_", 2_800, 100)  # from pinned memory: returns at once
    b.memcpy("HtoD", "Pinned", 2_810, 20, 2_820, 50, 4096)
    b.sync("cudaDeviceSynchronize", 3_100, 500)  # after the last step
    b.gpu("cuda_sync", "Stream Sync", 3_700, 5, cuda_sync_kind="Stream Sync")  # no host call
    b.gpu("cuda_sync", "Stream Wait Event", 3_800, 5, cuda_sync_kind="Stream Wait Event")  # GPU-side only
    return load_trace(b.write(tmp_path / "t.json"))


def test_each_python_level_call_is_one_entry_on_its_outermost_event(tmp_path):
    r = syncs(_gpu_trace(tmp_path))
    cols = ["kind", "name", "op", "top_op", "rank", "step", "blocked_us", "gpu_confirmed", "call", "in_steps"]
    assert r.events[cols].to_dict("records") == [
        dict(zip(cols, row)) for row in [
            ("is_nonzero", "aten::is_nonzero", "aten::is_nonzero", "aten::is_nonzero", 0, 1, 300.0, True,
             "cudaStreamSynchronize", True),
            ("item", "aten::item", "aten::item", "aten::item", 0, 1, 30.0, False, "", True),
            ("memcpy_dtoh", "aten::copy_", "aten::copy_", "aten::to", 0, 2, 280.0, True, "cudaMemcpyAsync", True),
            ("memcpy_htod_pageable", "aten::copy_", "aten::copy_", "aten::copy_", 0, 2, 200.0, True,
             "cudaMemcpyAsync", True),
            ("device_sync", "cudaDeviceSynchronize", "", "", 0, -1, 500.0, True, "cudaDeviceSynchronize", False)]]
    assert r.events["ts_us"].is_monotonic_increasing and list(r.events.columns[:-1]) == list(EPISODE_COLUMNS)


def test_the_trace_totals_split_the_steps_from_what_lies_outside_and_the_reads_from_the_syncs(tmp_path):
    r = syncs(_gpu_trace(tmp_path))
    assert (r.n_steps, r.wall_us, r.cpu_only) == (3, 3_000.0, False)
    assert r.total["in_steps"] == {"count": 3, "blocked_us": 780.0} and r.total["host_scalar_reads"] == 1
    assert [f.severity for f in r.findings] == ["high", "medium", "medium", "info"]  # 300 us of 3 ms: 10%


def test_the_gpu_side_waits_are_listed_with_their_host_calls_and_the_missing_ones_warned(tmp_path):
    r = syncs(_gpu_trace(tmp_path))
    assert r.gpu_side.to_dict("records") == [
        {"name": "Stream Sync", "count": 2, "gpu_us": 5.0, "host_blocking": 1, "host_other": 0, "unmatched": 1},
        {"name": "Stream Wait Event", "count": 1, "gpu_us": 5.0, "host_blocking": 0, "host_other": 0, "unmatched": 1}]
    assert r.warnings == (
        "no Python stacks: sync points have no source line; re-profile with with_stack=True",
        "1 cuda_sync events have no host call in the trace (not counted: the host side of the wait is missing; was "
        "the profiler's CPU activity on?)")


def test_blocking_calls_and_pageable_copies_by_label(tmp_path):
    trace = _gpu_trace(tmp_path)
    host = trace.events[trace.events["cat"].astype(str) == "cuda_runtime"]
    names = blocking_calls(trace, host)["name"].astype(str).tolist()
    assert sorted(names) == ["cudaDeviceSynchronize", "cudaMemcpyAsync", "cudaMemcpyAsync", "cudaStreamSynchronize",
                             "cudaStreamSynchronize"]
    pageable = pageable_copy_calls(trace)
    assert len(pageable) == 1 and trace.events.loc[pageable[0], "ts_us"] == trace.events["ts_us"].min() + 2_510


def test_on_a_cpu_only_trace_scalar_reads_are_possible_syncs_but_not_those_inside_other_ops(tmp_path):
    b = TraceBuilder()
    for s in range(2):
        b.step(s, s * 1_000, 1_000)
    b.cpu_op("aten::item", 100, 50)
    b.cpu_op("aten::_local_scalar_dense", 110, 30)
    b.cpu_op("aten::std", 1_100, 200)  # its CPU implementation reads a scalar
    b.cpu_op("aten::item", 1_150, 20)
    r = syncs(load_trace(b.write(tmp_path / "cpu.json")))
    assert r.cpu_only and r.events[["kind", "name", "blocked_us", "gpu_confirmed"]].to_dict("records") == [
        {"kind": "item", "name": "aten::item", "blocked_us": 50.0, "gpu_confirmed": False}]
    assert len(r.sync_points) == 1 and r.findings[0].title.startswith("possible item at aten::item: 1x")
    assert r.warnings == (
        "no CUDA runtime events: nothing here waited on a GPU; scalar reads such as aten::item are listed as possible "
        "sync points (they sync when their tensor is on the GPU), with their host time as blocked time; re-profile "
        "with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]",
        "no Python stacks: sync points have no source line; re-profile with with_stack=True",
        "1 aten::item calls inside other ops (aten::std 1x) were not counted: on this CPU-only trace they are those "
        "ops' CPU implementation, and their CUDA kernels do not read the value on the host; a trace with CUDA "
        "activity confirms any that do sync")


def test_a_trace_with_no_sync_is_one_whole_trace_step_with_empty_typed_tables(tmp_path):
    b = TraceBuilder()
    b.launch("k", 0, 5, 10, 50)
    b.cpu_op("aten::add", 100, 10)
    r = syncs(load_trace(b.write(tmp_path / "none.json")))
    assert r.events.empty and list(r.events.columns) == [*EPISODE_COLUMNS, "in_steps"] and r.findings == ()
    assert r.events["blocked_us"].dtype == float and r.events["gpu_confirmed"].dtype == bool
    assert r.n_steps == 1 and r.gpu_side.empty and list(r.gpu_side.columns) == [
        "name", "count", "gpu_us", "host_blocking", "host_other", "unmatched"]
    assert r.warnings == ("no Python stacks: sync points have no source line; re-profile with with_stack=True",)


def test_runtime_calls_with_no_gpu_event_cannot_name_copies(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.sync("cudaStreamSynchronize", 100, 50)
    r = syncs(load_trace(b.write(tmp_path / "nogpu.json")))
    assert r.warnings[0] == ("no GPU events: device-to-host copies cannot be identified; re-profile with "
                             "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    assert r.events["kind"].tolist() == ["stream_sync"] and not r.cpu_only


def test_entries_in_and_out_of_full_steps():
    windows = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 2, 1]})
    events = pd.DataFrame({"rank": [0, 1, 0, 1], "step": [1, 1, 3, 2]})
    assert in_windows(events, windows).tolist() == [True, True, False, False]
    assert in_windows(events.iloc[:0], windows).dtype == bool and len(in_windows(events.iloc[:0], windows)) == 0


def test_the_traces_first_event_can_be_the_entry_and_a_copy_launch_is_the_call_that_waited(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::item", 0, 100)  # the first event of the trace (label and position 0)
    b.cpu_op("aten::_local_scalar_dense", 10, 80)
    b.sync("cudaStreamSynchronize", 20, 60)
    b.cpu_op("aten::copy_", 200, 300)  # a sync call, then the copy it waited for: the copy launch is the call
    b.sync("cudaStreamSynchronize", 210, 50)
    b.memcpy("DtoH", "Pageable", 300, 100, 310, 50, 4096)
    b.cpu_op("aten::std", 600, 100)  # on a trace with GPU activity an item inside another op stays: a host read
    b.cpu_op("aten::item", 610, 20)
    b.launch("k", 800, 5, 810, 20)
    r = syncs(load_trace(b.write(tmp_path / "first.json")))
    assert r.events[["kind", "name", "call", "gpu_confirmed"]].to_dict("records") == [
        {"kind": "item", "name": "aten::item", "call": "cudaStreamSynchronize", "gpu_confirmed": True},
        {"kind": "memcpy_dtoh", "name": "aten::copy_", "call": "cudaMemcpyAsync", "gpu_confirmed": True},
        {"kind": "item", "name": "aten::item", "call": "", "gpu_confirmed": False}]
    assert r.events.index[0] == 0 and r.events["rank"].dtype == np.int64


def test_a_copy_op_that_is_the_traces_first_event_owns_its_copy(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::copy_", 0, 300)
    b.memcpy("DtoH", "Pageable", 10, 100, 20, 50, 4096)
    b.sync("cudaStreamSynchronize", 120, 100)
    r = syncs(load_trace(b.write(tmp_path / "copy.json")))
    assert r.events[["kind", "name", "blocked_us"]].to_dict("records") == [
        {"kind": "memcpy_dtoh", "name": "aten::copy_", "blocked_us": 300.0}]
