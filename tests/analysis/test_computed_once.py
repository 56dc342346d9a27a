"""Analyses that several surfaces ask for are computed once per Trace (``Trace.derived``), keyed by
their arguments, and ``workbook.trace_source`` reuses the Trace of its previous call while the file
is unchanged: a notebook reads and analyses its trace once however many sections show it."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import perfkit
from perfkit import workbook
from perfkit.analysis.step.lanes import rank_timelines
from perfkit.trace import load_trace

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def test_each_analysis_is_built_once_per_trace_and_arguments():
    trace = load_trace(TRACES / "gpu" / "item_logging.pt.trace.json.gz")
    for analysis in (perfkit.cpu_bound, perfkit.syncs, perfkit.diagnose, perfkit.step_anatomy, perfkit.gpu_gaps,
                     perfkit.critical_path, rank_timelines, perfkit.replay, perfkit.whatif):
        assert analysis(trace) is analysis(trace), analysis.__name__
    strict = perfkit.cpu_bound(trace, sync_share=0.99)
    assert strict is not perfkit.cpu_bound(trace) and strict is perfkit.cpu_bound(trace, sync_share=0.99)
    # the threshold moves the share rules' verdict; the replay decides this trace's (the syncs save 32%)
    assert perfkit.cpu_bound(trace).verdict == "sync-bound" == strict.verdict
    assert perfkit.cpu_bound(trace).evidence["share_verdict"] == "sync-bound" != strict.evidence["share_verdict"]
    named = perfkit.diagnose(trace, path="mine.json")
    assert named is not perfkit.diagnose(trace) and "mine.json" in named.command
    assert perfkit.diagnose(trace, kernel_fix=False) is not perfkit.diagnose(trace)


def test_a_new_trace_is_analysed_afresh():
    path = TRACES / "cpu" / "mppi_float_tensor.json.gz"
    a, b = load_trace(path), load_trace(path)
    assert perfkit.diagnose(a) is not perfkit.diagnose(b)
    assert perfkit.diagnose(a).verdict == perfkit.diagnose(b).verdict


def test_trace_source_reuses_the_trace_until_its_file_changes(tmp_path):
    path = tmp_path / "t.json.gz"
    shutil.copy(TRACES / "cpu" / "mppi_float_tensor.json.gz", path)
    first = workbook.trace_source(path).trace
    assert workbook.trace_source(path).trace is first
    os.utime(path, ns=(0, path.stat().st_mtime_ns + 1_000_000_000))  # rewritten: a new modification time
    second = workbook.trace_source(path).trace
    assert second is not first and workbook.trace_source(path).trace is second
    other = tmp_path / "u.json.gz"
    shutil.copy(path, other)
    assert workbook.trace_source(other).trace is not second
