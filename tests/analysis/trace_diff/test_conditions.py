"""When ``diff`` withholds its step verdict (``conditions``): a busy machine recorded in the trace, step times
the A/B harness would call noise, a CI too wide; and what it says without withholding (different load, CPUs or
threads; a change outside every op). One row each side of every threshold."""
from __future__ import annotations

import numpy as np
import pytest

from perfkit.analysis.trace_diff.conditions import (LOAD_GAP, OUTSIDE_SHARE, WIDE_CI, condition_warnings, judged,
                                                     outside_ops_us, unreliable_reasons)
from perfkit.analysis.trace_diff.diff import compare_steps, diff
from perfkit.trace import load_trace
from perfkit.trace.recorded import Machine
from perfkit.trace.steps import step_windows

from tracebuilder import TraceBuilder

QUIET = Machine(0.5, 2, 2)
STEADY = [100.0, 101.0, 99.0, 100.0, 102.0]


def _change(low, high, n=5):
    return {"low": low, "high": high, "n_a": n, "n_b": n, "median_a_us": 100.0, "median_b_us": 100.0,
            "verdict": "faster"}


@pytest.mark.parametrize("load, expected", [(2.0, False), (2.01, True)])
def test_a_busy_recording_withholds_the_verdict(load, expected):
    reasons = unreliable_reasons(_change(0.9, 0.95), (STEADY, STEADY), (QUIET, Machine(load, 2, 2)))
    assert bool(reasons) is expected
    assert not expected or "B was recorded on a busy machine (load average 2.0 on 2 CPUs" in reasons[0]


@pytest.mark.parametrize("spread, expected", [(0.3, False), (0.4, True)])
def test_step_times_past_the_harness_cv_are_noise(spread, expected):
    noisy = [100.0 * (1 + spread * d) for d in (-1, -1, 0, 1, 1)]  # robust CV = 1.4826 * spread
    reasons = unreliable_reasons(_change(0.9, 0.95), (STEADY, noisy), (Machine(), Machine()))
    assert bool(reasons) is expected
    assert not expected or "step times vary too much" in reasons[0]


@pytest.mark.parametrize("high, expected", [(WIDE_CI * 0.5, False), (WIDE_CI * 0.5 + 0.01, True)])
def test_a_ci_over_wide_ci_withholds_the_verdict(high, expected):
    reasons = unreliable_reasons(_change(0.5, high), (STEADY, STEADY), (Machine(), Machine()))
    assert bool(reasons) is expected


def test_judged_says_inconclusive_with_what_to_do_and_keeps_not_enough_data():
    out = judged(compare_steps([100.0] * 5, [50.0] * 5), ["A was recorded on a busy machine"])
    assert out["verdict"] == "inconclusive" and "quiet machine" in out["reason"] and "--active" in out["reason"]
    few = judged(compare_steps([1.0], [2.0]), ["A was recorded on a busy machine"])
    assert few["verdict"] == "not enough data" and few["unreliable"]
    assert judged(compare_steps([100.0] * 5, [50.0] * 5), [])["verdict"] == "faster"


@pytest.mark.parametrize("load_b, expected", [(0.5 + 2 * LOAD_GAP - 0.02, False), (0.5 + 2 * LOAD_GAP, True)])
def test_differently_loaded_machines_are_said(load_b, expected):
    out = condition_warnings((QUIET, Machine(load_b, 2, 2)), _change(0.9, 0.95), ([0.0], [0.0]))
    assert any("different load" in w for w in out) is expected


def test_different_cpus_and_threads_are_said():
    out = condition_warnings((Machine(0.1, 2, 2), Machine(0.1, 4, 1)), _change(0.9, 0.95), ([0.0], [0.0]))
    assert any("2 CPUs and B on 4" in w for w in out) and any("2 torch threads and B 1" in w for w in out)


@pytest.mark.parametrize("moved, expected", [(OUTSIDE_SHARE * 100 - 1, False), (OUTSIDE_SHARE * 100, True)])
def test_a_step_change_outside_every_op_is_said(moved, expected):
    change = dict(_change(0.4, 0.6), median_b_us=200.0)  # +100 us
    out = condition_warnings((Machine(), Machine()), change, (np.array([10.0]), np.array([10.0 + moved])))
    assert any("outside every op" in w for w in out) is expected


def test_outside_ops_counts_every_thread_of_the_process(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1000)
    b.cpu_op("aten::mm", 0, 300)
    b.cpu_op("aten::add", 200, 300, tid=2000)  # another thread: 0-500 covered
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    assert outside_ops_us(trace, step_windows(trace)).tolist() == [500.0]


def _recorded(tmp_path, name, load, step_us):
    b = TraceBuilder()
    b.metadata["perfkit_profile"] = {"script": "train.py", "load_1min": load, "cpus": 2, "torch_threads": 2}
    for s in range(5):
        b.step(s, s * step_us, step_us)
        b.cpu_op("aten::mm", s * step_us + 10, step_us - 20)
    return load_trace(b.write(tmp_path / f"{name}.json"), use_cache=False)


def test_diff_of_traces_recorded_under_different_load_is_inconclusive(tmp_path):
    r = diff(_recorded(tmp_path, "a", 3.4, 370_000), _recorded(tmp_path, "b", 0.2, 49_000))
    s = r.step_change
    assert s["verdict"] == "inconclusive" and "A was recorded on a busy machine (load average 3.4 on 2 CPUs" in s["reason"]
    assert any("different load" in w for w in r.warnings)
    assert [f.severity for f in r.findings] == ["medium"] and "cannot be compared" in r.findings[0].title
    assert not any(word in f.title for f in r.findings for word in ("faster", "slower", "aten::mm"))


def test_diff_of_quiet_recordings_keeps_its_verdict(tmp_path):
    r = diff(_recorded(tmp_path, "a", 0.3, 370_000), _recorded(tmp_path, "b", 0.2, 49_000))
    assert r.step_change["verdict"] == "faster" and not r.step_change["unreliable"]


@pytest.mark.parametrize("machines, verdict, says", [
    ((QUIET, QUIET), "faster", None),
    ((QUIET, Machine()), "faster", "B records no machine load"),
    ((Machine(), Machine()), "slower", "A and B record no machine load"),
    ((Machine(), Machine()), "no detectable change", None),   # no claim to doubt
])
def test_a_claim_over_a_trace_without_recorded_load_says_so(machines, verdict, says):
    out = condition_warnings(machines, dict(_change(0.9, 0.95), verdict=verdict), ([0.0], [0.0]))
    found = [w for w in out if "no machine load" in w]
    assert (says in found[0]) if says else not found
