"""``analysis.per_step.range_change``: a record_function range before and after a fix, its verdict
withheld under the conditions ``perfkit trace-diff`` withholds its own (issue 53)."""
from types import SimpleNamespace

import pandas as pd
import pytest

from perfkit.analysis.per_step import range_change, range_text

RANGE = "## train/sample ##"


def _trace(step_us, load=None, cpus=None):
    """A trace whose range ``RANGE`` takes ``step_us[i]`` us in step i; ``load``/``cpus``: what perfkit profile
    recorded of the machine (None: nothing recorded)."""
    events = pd.DataFrame({"cat": "user_annotation", "name": RANGE, "step": range(len(step_us)),
                           "dur_us": [float(us) for us in step_us]})
    recorder = {"load_1min": load, "cpus": cpus} if load is not None else {}
    return SimpleNamespace(events=events, steps=pd.DataFrame({"step": range(len(step_us))}),
                           files=[SimpleNamespace(recorder=recorder)])


STEADY_A = [1000, 1010, 990, 1005, 995, 1002, 998, 1001, 999, 1003]
HALVED = [us / 2 for us in STEADY_A]


@pytest.mark.parametrize("a, b, verdict, why", [
    (_trace(STEADY_A), _trace(HALVED), "faster", ""),
    (_trace(STEADY_A, 0.5, 2), _trace(HALVED, 1.9, 2), "faster", ""),              # 0.95 a CPU: not busy
    (_trace(STEADY_A, 0.5, 2), _trace(HALVED, 2.5, 2), "inconclusive", "B was recorded on a busy machine"),
    (_trace(STEADY_A), _trace([500, 1500] * 5), "inconclusive", "step times vary too much"),
    (_trace([5000, 600, 580]), _trace([510, 430, 480]), "inconclusive", "spans more than 2x"),
])
def test_a_range_change_is_judged_as_trace_diff_judges_a_step_change(a, b, verdict, why):
    change = range_change(a, b, RANGE)
    assert change["verdict"] == verdict and (why in change["unreliable"] if why else change["unreliable"] == "")
    text = range_text(change)
    assert text.startswith(f"{RANGE} 1 -> 0.5 ms per step: faster") if not why else (
        f": {verdict} (ratio " in text and why in text and "re-record both on a quiet machine" in text)
