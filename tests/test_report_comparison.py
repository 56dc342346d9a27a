"""compare_traces: the trace mode of compile_ab, amp_regression and memory_leak."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from perfkit.errors import ParameterError
from perfkit.report.trace_diff import compare_traces, diff_verdict


def test_two_shipped_traces_give_rows_verdict_and_subject():
    pairing = compare_traces("compile_ab", "trace", "cpu/mppi_float_tensor.json.gz", "cpu/mppi_from_numpy.json.gz")
    assert pairing.subject == f"{pairing.before.subject} -> {pairing.after.subject}"
    assert "mppi_float_tensor" in pairing.subject and "mppi_from_numpy" in pairing.subject
    assert pairing.diff.step_change["ratio"] < 1  # from_numpy builds one tensor per batch, not per sample
    assert pairing.verdict.startswith("after vs before: faster")
    assert {r["investigation"] for r in pairing.metrics} == {"compile_ab"}
    assert all(r["subject"] == pairing.subject and r["device"] == pairing.device for r in pairing.metrics)
    assert pairing.fix == ""  # nothing regressed


def test_a_missing_trace_is_a_parameter_error_naming_it():
    with pytest.raises(ParameterError, match="no_such_trace.json.gz"):
        compare_traces("amp_regression", "trace", "cpu/mppi_float_tensor.json.gz", "no_such_trace.json.gz")


def test_live_mode_is_refused():
    with pytest.raises(ParameterError):
        compare_traces("memory_leak", "sideways", "cpu/mppi_float_tensor.json.gz", "cpu/mppi_from_numpy.json.gz")


@pytest.mark.parametrize("verdict, says", [("inconclusive", "inconclusive (median step after/before 0.132x, CI "
                                                             "0.121-0.201): A was recorded on a busy machine"),
                                           ("faster", "faster (median step after/before 0.132x, CI 0.121-0.201)")])
def test_the_diff_verdict_line_says_why_it_is_inconclusive(verdict, says):
    s = {"verdict": verdict, "ratio": 0.1321, "low": 0.1208, "high": 0.2012,
         "unreliable": "A was recorded on a busy machine" if verdict == "inconclusive" else ""}
    assert diff_verdict(SimpleNamespace(step_change=s)) == f"after vs before: {says}"
