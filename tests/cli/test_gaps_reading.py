"""``perfkit gaps`` prints the verdict beside its idle classes, and how to read them where they seem to disagree
(the reading rule's table: tests/report/test_terminal.py)."""
from __future__ import annotations

import json
from pathlib import Path

from perfkit.cli import main

REPLAY = Path(__file__).resolve().parents[2] / "data" / "traces" / "gpu" / "replay_host_normalize.json.gz"


def test_gaps_prints_the_verdict_and_its_reading(capsys):
    assert main(["gaps", "--no-cache", str(REPLAY)]) == 0
    out = capsys.readouterr().out
    assert "verdict  launch-bound" in out and "reading  host_python holds all the Python" in out
    assert main(["gaps", "--json", "--no-cache", str(REPLAY)]) == 0
    assert json.loads(capsys.readouterr().out)["diagnosis"]["verdict"] == "launch-bound"
