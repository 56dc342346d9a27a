"""``perfkit gaps`` prints the verdict beside its idle classes, and how to read them where they seem to disagree."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfkit.cli import main
from perfkit.cli.gaps import reading_note

REPLAY = Path(__file__).resolve().parents[2] / "data" / "traces" / "gpu" / "replay_host_normalize.json.gz"


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


def test_gaps_prints_the_verdict_and_its_reading(capsys):
    assert main(["gaps", "--no-cache", str(REPLAY)]) == 0
    out = capsys.readouterr().out
    assert "verdict  launch-bound" in out and "reading  host_python holds all the Python" in out
    assert main(["gaps", "--json", "--no-cache", str(REPLAY)]) == 0
    assert json.loads(capsys.readouterr().out)["diagnosis"]["verdict"] == "launch-bound"
