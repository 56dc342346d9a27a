"""The machine load ``perfkit profile`` writes into a trace (``perfkit.trace.recorded``): read back, judged busy
by ``perfkit.cpus.busy`` (one row each side), and a value of the wrong type taken as absent."""
from __future__ import annotations

import pytest

from perfkit.trace import load_trace
from perfkit.trace.recorded import Machine, recorded_machine

from tracebuilder import TraceBuilder


def _trace(tmp_path, meta):
    b = TraceBuilder()
    if meta is not None:
        b.metadata["perfkit_profile"] = meta
    b.step(0, 0, 100)
    return load_trace(b.write(tmp_path / "t.json"), use_cache=False)


def test_the_recorded_load_is_read_back(tmp_path):
    m = recorded_machine(_trace(tmp_path, {"script": "x.py", "load_1min": 3.5, "cpus": 2, "torch_threads": 2}))
    assert m == Machine(3.5, 2, 2) and m.busy and m.text() == "load average 3.5 on 2 CPUs, 2 torch threads"


@pytest.mark.parametrize("meta", [None, {"script": "x.py"}, {"load_1min": "high", "cpus": 2.5, "torch_threads": True}])
def test_absent_or_malformed_values_are_unknown(tmp_path, meta):
    m = recorded_machine(_trace(tmp_path, meta))
    assert m == Machine() and not m.known and not m.busy and m.text() == ""


@pytest.mark.parametrize("load, busy", [(4.0, False), (4.01, True)])
def test_busy_is_a_load_above_the_cpus(load, busy):
    assert Machine(load, 4).busy is busy
