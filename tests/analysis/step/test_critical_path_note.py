"""``path_note``: a step's longest path kind beside its verdict, and why they differ where they do."""
from __future__ import annotations

import pytest

from perfkit.analysis.step.critical_path import path_note


@pytest.mark.parametrize("bound_by, verdict, says", [
    ("kernel", "GPU-bound", ""),
    ("host", "launch-bound", ""),
    ("sync_wait", "communication-bound", ""),
    ("kernel", "sync-bound", ""),
    ("anything", "warm-up", ""),
    ("host", "communication-bound", "wait for a slower peer"),
    ("host", "GPU-bound", "overlaps the GPU work the host queued ahead"),
    ("kernel", "launch-bound", "the GPU idles enough of the step"),
])
def test_path_note_table(bound_by, verdict, says):
    note = path_note(bound_by, verdict)
    assert (says in note) if says else note == ""


def test_critical_path_rows_carry_the_step_verdict(tmp_path, capsys):
    import json
    from pathlib import Path

    from perfkit.cli import main

    trace = Path(__file__).resolve().parents[3] / "data" / "traces" / "gpu" / "item_logging.pt.trace.json.gz"
    assert main(["critical-path", "--json", "--no-cache", str(trace)]) == 0
    rows = json.loads(capsys.readouterr().out)["steps"]
    assert [r["verdict"] for r in rows] == ["sync-bound"] * 3 and all(r["why"] == "" for r in rows)
