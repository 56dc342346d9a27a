"""``SlowTrigger``: which recorded steps are written (``slow:1.5x``, one row each side of the line), the slowest
``keep`` kept and the fastest dropped, one median step's trace; and ``perfkit profile --trigger`` end to end."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfkit.cli import main
from perfkit.errors import ParameterError
from perfkit.profiling.trigger import SlowTrigger, parse_trigger


def _trigger(tmp_path, keep=2, min_steps=3):
    def export(prof, path):
        Path(path).write_bytes(b"trace")
        return Path(path)

    return SlowTrigger("slow:1.5x", keep, lambda kind, step: tmp_path / f"{kind}-{step}.gz", min_steps=min_steps,
                       export=export)


@pytest.mark.parametrize("seconds, slow", [(0.01499, False), (0.0150, True)])
def test_a_step_is_slow_from_factor_times_the_running_median(tmp_path, seconds, slow):
    t = _trigger(tmp_path)
    for step, s in enumerate([0.010, 0.010, 0.010]):
        t.offer(None, step, s)
    t.offer(None, 3, seconds)
    assert [kept[1] for kept in t.slow] == ([3] if slow else [])


def test_the_slowest_are_kept_and_a_faster_one_removed(tmp_path):
    t = _trigger(tmp_path, keep=2)
    for step, s in enumerate([0.010, 0.010, 0.010, 0.010, 0.020, 0.040, 0.030, None, 0.016]):
        t.offer(None, step, s)  # None: the step cut short at the end, never judged
    assert [(step, path.name) for _, step, path in t.slow] == [(5, "slow-5.gz"), (6, "slow-6.gz")]
    assert not (tmp_path / "slow-4.gz").exists() and not (tmp_path / "slow-8.gz").exists()
    assert t.median[1] == 3 and (tmp_path / "median-3.gz").is_file()  # the first step at the running median
    assert t.stats() == {"steps": 8, "min_ms": 10.0, "median_ms": pytest.approx(13.0), "max_ms": 40.0}


@pytest.mark.parametrize("spec", ["slow:1x", "slow:0.5x", "fast:2x", "slow:2", "1.5x"])
def test_a_trigger_that_is_not_slow_above_1_is_refused(spec):
    with pytest.raises(ParameterError, match="slow:FACTORx"):
        parse_trigger(spec)


SLOW_AT = """
import time, torch
model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(24):
    if step in (12, 19):
        time.sleep(0.3)
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""


@pytest.mark.slow
def test_profile_trigger_keeps_the_slow_steps_and_diffs_them_against_the_median(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SLOW_AT)
    code = main(["profile", "--json", "--wait", "2", "--trigger", "slow:1.5x", "--keep", "3", "--out",
                 str(tmp_path / "t"), str(script)])
    out = capsys.readouterr().out
    r = json.loads(out[out.index("{"):])
    assert code == 0, r["warnings"]
    kept = {s["step"] for s in r["trigger"]["slow"]}
    assert {12, 19} <= kept and r["trace"].endswith(f"-slow-step{r['trigger']['slow'][0]['step']}.pt.trace.json.gz")
    assert r["trigger"]["median"]["trace"] in r["more_traces"] and r["trigger"]["diff"]["a"]
    assert r["trigger"]["steps"] == 22 and r["diagnosis"]["verdict"]
