"""An event the loader drops (here a ``dur`` of -50) is said once in every command's output, not only by
summary, diagnose, diff and ranks."""
from __future__ import annotations

import pytest

from perfkit.cli import main
from tracebuilder import TraceBuilder

SAID = "'dur' is missing, not finite or outside"


@pytest.fixture
def trace(tmp_path):
    b = TraceBuilder(gpu_name="NVIDIA H100 80GB HBM3")
    for s in range(3):
        b.step(s, s * 1000, 900)
        b.python("train.py(10): step", s * 1000 + 5, 800)
        b.cpu_op("aten::add", s * 1000 + 10, 50)
        b.launch("elementwise_kernel", s * 1000 + 20, 5, gpu_ts=s * 1000 + 100, gpu_dur=300)
    b.cpu_op("aten::broken", 2500, -50)
    # one allocation, so that perfkit memory has a timeline to print (without [memory] events it is an error)
    b.events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]", "pid": b.pid, "tid": b.tid,
                     "ts": 15, "args": {"Bytes": 256, "Total Allocated": 256, "Total Reserved": 0, "Addr": 1,
                                        "Device Type": 0, "Device Id": -1}})
    return b.write(tmp_path / "t.json")


@pytest.mark.parametrize("command", [
    ["kernels"], ["hotspots"], ["critical-path"], ["annotate", "-o", "{out}/a.json"], ["export", "--parquet", "{out}/ds"],
    ["summary"], ["diagnose"], ["sync-points"], ["sync-points", "--json"], ["memory"], ["memory", "--json"],
    ["gaps"], ["trace-diff", "{trace}"], ["sql", "SELECT count(*) FROM events WHERE cat = 'cpu_op'"],
    ["sql", "--csv", "SELECT 1"], ["sql", "--json", "SELECT 1"],
])
def test_every_command_says_what_was_dropped_once(trace, tmp_path, capsys, command):
    argv = [a.format(out=tmp_path, trace=trace) for a in command]
    if argv[0] == "sql":  # perfkit sql QUERY TRACE: it counted 11 of 12 kernels, one dropped, and said nothing
        argv = [argv[0], *argv[1:], str(trace)]
    else:
        argv = [argv[0], str(trace), *argv[1:]]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert (printed.out + printed.err).count(SAID) == 1, printed.out + printed.err


def test_diagnose_says_steps_overlap(tmp_path, capsys):
    b = TraceBuilder()
    for s in range(3):
        b.step(s, s * 1000, 2500)  # each window 2.5x the spacing
        b.cpu_op("aten::add", s * 1000 + 10, 50)
    assert main(["diagnose", str(b.write(tmp_path / "t.json"))]) == 0
    assert "2 ProfilerStep# window(s) overlap the next" in capsys.readouterr().out

