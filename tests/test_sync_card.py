"""A sync_points card that counts possible sync points names their fix: on a CPU-only trace, how to
confirm each on a GPU and the fix if it is confirmed (issue 23: "No fix needed" beside a count)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import perfkit
from perfkit.analysis.sync_points.result import CONFIRM, FIXES
from perfkit.report.card import verdict_card
from perfkit.report import sync_points

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "cpu" / "ppo_sync_checks.json.gz"


def _is_nonzero_in_steps() -> int:
    with gzip.open(TRACE, "rt") as f:
        events = json.load(f)["traceEvents"]
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    return sum(1 for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::is_nonzero"
               and any(s["ts"] <= e["ts"] <= s["ts"] + s["dur"] for s in steps))


def test_cpu_only_possible_sync_points_get_a_confirm_then_fix():
    result = perfkit.syncs(perfkit.load_trace(TRACE, use_cache=False))
    assert result.cpu_only and result.total["count"] > 0
    nonzero = [f for f in result.findings if f.title.startswith("possible is_nonzero")]
    assert nonzero and all(f.severity == "low" for f in nonzero)
    assert sum(f.evidence["count"] for f in nonzero) == _is_nonzero_in_steps() == 375
    for f in nonzero:
        assert f.fix == f"{CONFIRM} If it waits: {FIXES['is_nonzero']}"
    card = verdict_card("sync_points", result, None, subject="trace", device="cpu", verdict=sync_points.sync_verdict(result))
    assert card.verdict.startswith("125 possible sync points per step")
    assert card.fix.startswith("Confirm it on a GPU") and "No fix needed" not in card._repr_html_()
