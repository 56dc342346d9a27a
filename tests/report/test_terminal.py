"""The text perfkit's commands print (``perfkit.report.terminal``): diff's numbers, headers and warnings
said once for A and B (issue 23, item 9); how ``perfkit gaps`` reads its idle classes beside the verdict."""
from __future__ import annotations

import pytest

from perfkit.report.terminal.trace_diff import _merged_warnings, _num, format_diff
from perfkit.report.terminal.gaps import reading_note


@pytest.mark.parametrize("value, text", [(12230.4, "12,230"), (100298.0, "100,298"), (4625, "4,625"),
                                         (55.29, "55.29"), (0.0, "0"), (0.1234, "0.1234"), (None, "-"),
                                         (float("nan"), "-"), (3.2e-06, "3.20e-06")])
def test_diff_numbers_have_no_exponent_above_one(value, text):
    assert _num(value) == text


def test_diff_warnings_of_both_traces_are_said_once():
    merged = _merged_warnings(["A: no GPU events", "A: only in A", "B: no GPU events", "steps differ"])
    assert merged == ["A and B: no GPU events", "A: only in A", "steps differ"]


def test_diff_table_header_lines_up_with_its_rows():
    row = {"name": "aten::" + "x" * 80, "per_step_us_a": 12109.0, "per_step_us_b": 21551.0, "status": "common"}
    d = {"a": "a", "b": "b", "step_change": {"ratio": 1.0, "low": 0.9, "high": 1.1, "verdict": "no detectable change",
                                             "reason": "r"}, "metrics": [], "waits": [], "ops": [row], "kernels": [],
         "annotations": [], "op_speedups": [], "new_kernels": [], "vanished_kernels": [], "findings": [], "warnings": []}
    lines = format_diff(d).splitlines()
    header, first = lines[lines.index("ops by change in time per step (us):") + 1:][:2]
    assert header.index("status") == first.index("common")
    assert header.index("B") + 1 == first.index("21,551") + len("21,551")
    assert "\u2026" in first and len(first.split("  ")[1]) == 60


@pytest.mark.parametrize("largest, verdict, says", [
    ("host_python", "launch-bound", "issues launches"),
    ("launch", "launch-bound", ""),
    ("input", "input-bound", ""),
    ("tail", "launch-bound", "the largest idle class is tail"),
    ("host_python", "GPU-bound", ""),  # a verdict with no idle class of its own
])
def test_reading_note_table(largest, verdict, says):
    note = reading_note(largest, verdict)
    assert (says in note) if says else note == ""
