"""CPU threads (``analysis.step.intraop``): a CPU-only trace's intra-op threads competing with other processes
(a busy recording, DataLoader workers beside threads that take every core) get the A/B to run; the thread-count
advice is given only where the recorded count is off. One row each side of every threshold."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.step.cpu_bound import cpu_bound
from perfkit.analysis.step import findings as sf
from perfkit.analysis.step.intraop import (competition, cpu_fix_parts, threads_advice, threads_finding,
                                           workers_running)
from perfkit.trace import load_trace
from perfkit.trace.recorded import Machine

from tracebuilder import TraceBuilder

MULTI = pd.DataFrame({"name": ["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"]})
SINGLE = pd.DataFrame({"name": ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]})


@pytest.mark.parametrize("load, busy", [(2.0, False), (2.01, True)])
def test_a_busy_recording_is_competition(load, busy):
    assert bool(competition(Machine(load, 2, 2), SINGLE)) is busy


@pytest.mark.parametrize("threads, annotations, competes", [
    (1, MULTI, False),      # 1 thread + workers on 2 CPUs: room for both
    (2, MULTI, True),       # the threads take both CPUs
    (None, MULTI, True),    # unknown: torch's default takes every core
    (2, SINGLE, False),     # no workers
])
def test_dataloader_workers_beside_threads_that_take_every_core(threads, annotations, competes):
    assert bool(competition(Machine(0.1, 2, threads), annotations)) is competes


def test_the_finding_names_the_ab_and_only_for_cpu_only_traces():
    (f,) = threads_finding("CPU-only trace", Machine(3.4, 2, 2), MULTI)
    assert "load average 3.4 on 2 CPUs" in f.title and "DataLoader workers" in f.title
    assert "perfkit.compare(lambda: (torch.set_num_threads(2), step()), lambda: (torch.set_num_threads(1), step())" in f.fix
    assert threads_finding("GPU-bound", Machine(3.4, 2, 2), MULTI) == []
    assert threads_finding("CPU-only trace", Machine(0.1, 2, 1), SINGLE) == []


@pytest.mark.parametrize("machine, says", [
    (Machine(0.1, 2, 3), "set torch.set_num_threads to the 2 CPUs the process may use (it ran 3 threads)"),
    (Machine(0.1, 2, 2), "time torch.set_num_threads(1) against the default with perfkit.compare (torch ran 2 "
                         "threads on 2 CPUs; "),
    (Machine(0.1, 2, 1), "raise torch.set_num_threads toward the 2 CPUs"),
    (Machine(2.5, 2, 1), "time torch.set_num_threads(1) against the default"),   # busy: one thread may be right
    (Machine(0.1, 1, 1), "time torch.set_num_threads(1) against the default"),   # one CPU: nothing to raise
    (Machine(), "time torch.set_num_threads(1) against the default with perfkit.compare (on shared cores"),
])
def test_the_thread_count_is_set_only_where_it_is_off(machine, says):
    text = threads_advice(machine)
    assert text.startswith(says) and "physical cores" not in text


def test_workers_running_reads_the_iterator():
    assert workers_running(MULTI) and not workers_running(SINGLE) and not workers_running(None)


def test_a_recorded_cpu_trace_gets_the_finding_and_no_physical_cores_advice(tmp_path):
    b = TraceBuilder()
    b.device_properties([])
    b.metadata["perfkit_profile"] = {"load_1min": 3.4, "cpus": 2, "torch_threads": 2}
    for s in range(3):
        b.step(s, s * 1000, 1000)
        b.cpu_op("aten::conv2d", s * 1000 + 10, 900)
    r = cpu_bound(load_trace(b.write(tmp_path / "cpu.json"), use_cache=False))
    assert r.verdict == "CPU-only trace"
    assert any("compete for the cores" in f.title for f in r.findings)
    assert not any("physical cores" in f.fix for f in r.findings)


@pytest.mark.parametrize("machine, competing", [(Machine(2.01, 2, 2), True), (Machine(2.0, 2, 1), False)])
def test_the_cpu_only_fix_leads_with_competing_threads_or_lists_the_thread_advice(machine, competing):
    ops = pd.DataFrame({"name": ["aten::conv2d"], "cat": ["cpu_op"], "self_pct": [90.0], "count": [3]})
    ranges = pd.DataFrame({"name": [MULTI["name"][0]], "total_us": [4_500.0], "count": [3]})
    fix = sf._cpu_only_fix({"dataloader_share": 0.18}, ops, ranges, (), machine)
    lead, clause = cpu_fix_parts(machine, ranges)
    assert (lead in fix and clause == "") if competing else (lead == "" and clause in fix)
    assert ("compete for the cores" in fix) is competing and "physical cores" not in fix
    assert "its workers already running" in fix and "num_workers>0" not in fix  # workers run already
