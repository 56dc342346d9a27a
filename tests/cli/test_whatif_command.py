"""``perfkit whatif``: its JSON is the library's (``whatif(trace).to_json()`` plus the diagnosis's verdict and
prediction), its text lists every fix with what it assumed, and ``--combine`` replays fixes together or says
which names it takes."""
import json

import pytest

from perfkit.analysis.step.whatif import combine, whatif
from perfkit.cli import main
from perfkit.trace import load_trace

from conftest import ROOT

TRACE = ROOT / "data" / "traces" / "gpu" / "dataloader_workers0.pt.trace.json.gz"


def test_the_json_is_the_librarys_with_the_diagnosiss_verdict(capsys):
    assert main(["whatif", "--json", "--combine", "dataloader_workers,pin_copies", str(TRACE)]) == 0
    out = json.loads(capsys.readouterr().out)
    trace = load_trace(TRACE)
    lib = whatif(trace).to_json()
    assert [f["fix"] for f in out["fixes"]] == [f["fix"] for f in lib["fixes"]]
    assert out["step_us"] == pytest.approx(lib["step_us"]) and out["verdict"] == "input-bound"
    assert out["decided_by"] == "replay" and out["prediction"]["fix"] == "dataloader_workers"
    both = combine(trace, ("dataloader_workers", "pin_copies"))
    assert out["combined"]["fix"] == "pin_copies+dataloader_workers"
    assert out["combined"]["predicted_step_us"] == pytest.approx(both.predicted_step_us)


def test_the_text_ranks_the_fixes_and_says_why_the_others_do_not_apply(capsys):
    assert main(["whatif", str(TRACE), "--combine", "pin_copies,dataloader_workers"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("step       26.") and "replay error median 0.0%" in lines[0]
    assert lines[2].startswith("dataloader_workers") and "does not apply: no collective" in text
    assert any(line.startswith("together") and "pin_copies+dataloader_workers" in line for line in lines)
    assert "Predicted: median step 26.60 -> 5.82 ms (4.57x) with the DataLoader's work off the main thread" in text


@pytest.mark.parametrize("names", ["foo", "host_compute", ","])
def test_an_unknown_fix_to_combine_is_one_line_naming_the_choices(capsys, names):
    assert main(["whatif", str(TRACE), "--combine", names]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--combine {names}" in err[0] and "choose from skip_warmup" in err[0]
