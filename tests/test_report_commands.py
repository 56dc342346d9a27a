"""Every command a report prints runs as printed from the workbook root: step_anatomy's
`perfkit annotate <shipped trace> -o ...`, and the trace commands take a shipped trace by name."""
from __future__ import annotations

import gzip
import json
import shlex

import pytest

from perfkit.cli import main
from perfkit.report import step_anatomy as lookat
from perfkit.workbook import find_trace
from perfkit.trace import load_trace

SHIPPED = "cpu/mppi_float_tensor.json.gz"


@pytest.fixture
def workbook(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PERFKIT_HOME", raising=False)
    monkeypatch.delenv("PERFKIT_NOTEBOOK_DIR", raising=False)
    assert main(["init", str(tmp_path / "wb")]) == 0
    monkeypatch.chdir(tmp_path / "wb")
    capsys.readouterr()
    return tmp_path / "wb"


def test_step_anatomy_annotate_command_runs_as_printed(workbook, capsys):
    pointer = lookat.annotated_pointer(load_trace(find_trace(SHIPPED)), "trace")
    assert pointer.commands == (f"perfkit annotate {SHIPPED} -o mppi_float_tensor.annotated.json.gz",)
    argv = shlex.split(pointer.commands[0])
    assert main(argv[1:]) == 0, capsys.readouterr().err
    with gzip.open(workbook / "mppi_float_tensor.annotated.json.gz", "rt") as f:
        events = json.load(f)["traceEvents"]
    with gzip.open(find_trace(SHIPPED), "rt") as f:
        original = json.load(f)["traceEvents"]
    assert len(events) > len(original)


@pytest.mark.parametrize("command", ["summary", "syncs", "gaps", "hotspots", "critical-path"])
def test_trace_commands_take_a_shipped_trace_by_name(workbook, capsys, command):
    assert main([command, SHIPPED, "--no-cache"]) == 0
    assert capsys.readouterr().out.strip()


def test_a_trace_found_nowhere_keeps_the_loaders_error(workbook, capsys):
    assert main(["syncs", "no_such_trace.json.gz"]) == 2
    assert capsys.readouterr().err.strip() == "perfkit syncs: error: no_such_trace.json.gz: no such file or directory"
