"""perfkit.validate: reference workloads through the harnesses, against what they must show."""
import json
import math

import pytest

from perfkit.bench.htod import HtoDResult
from perfkit.cli import main
from perfkit.errors import ParameterError
from perfkit.validation import checks
from perfkit.validation.checks import PRESETS, Check
from perfkit.validation.suite import validate

QUICK = PRESETS["quick"]
# Checks whose outcome on a CPU does not depend on timing noise.
DETERMINISTIC = ("runtime_syncs_ppo", "compile_ab_mlp", "amp_bf16_step", "leak_slope")


@pytest.fixture(scope="module")
def cpu_report():
    return validate("cpu")  # preset "auto" is "quick" on a CPU


@pytest.mark.slow
def test_quick_cpu_run_checks_every_claim_it_can(cpu_report):
    status = {c.name: c.status for c in cpu_report.checks}
    assert list(status) == list(checks.CHECKS) and cpu_report.preset == "quick"
    assert [n for n in DETERMINISTIC if status[n] != "pass"] == []
    # GPU-only figures say why they are skipped instead of failing.
    for name in ("htod_pinned_vs_pageable", "trace_syncs_ppo", "gradscaler_syncs"):
        assert status[name] == "skipped"
    assert "no GPU" in cpu_report.checks[0].measured
    assert status["replay_device_normalize"] == "measured"  # no expectation on a CPU
    assert status["mppi_from_numpy"] in ("pass", "inconclusive")  # timed: noisy on a loaded machine
    assert not [c for c in cpu_report.checks if c.status == "error"]


@pytest.mark.slow
def test_runtime_sync_figures_are_counted_step_by_step(cpu_report):
    check = next(c for c in cpu_report.checks if c.name == "runtime_syncs_ppo")
    steps, every = check.values["item_logging_per_step"], check.values["metrics_every"]
    assert len(steps) == QUICK.detect_steps and min(steps) >= 1
    # The fix reads its metrics once every `metrics_every` steps: a sync there and nowhere else.
    assert sum(n > 0 for n in check.values["batched_metrics_per_step"]) == QUICK.detect_steps // every
    assert "detector mode cpu-as-device" in check.measured


@pytest.mark.slow
def test_markdown_has_machine_counts_and_commands(cpu_report):
    text = cpu_report.to_markdown()
    assert "# perfkit validation on no GPU (CPU only)" in text
    assert "| no GPU (CPU only) | n/a | n/a |" in text
    assert f"{cpu_report.counts()['skipped']} skipped" in text
    assert "`perfkit.hunt_leak(make_workload('leaky', 'cpu', variant=VARIANT).step" in text
    assert len([line for line in text.splitlines() if line.startswith("| ")]) == 3 + len(checks.CHECKS)  # machine, header, checks


@pytest.mark.slow
def test_json_is_valid_with_non_finite_values(cpu_report):
    payload = json.loads(json.dumps(cpu_report.to_json(), allow_nan=False))
    compile_values = next(c for c in payload["checks"] if c["check"] == "compile_ab_mlp")["values"]
    assert "break_even_steps" in compile_values  # inf (no saving) becomes null, not Infinity


def _fake_sweep(pageable_s: float, pinned_s: float):
    size = QUICK.htod_bytes
    samples = ((size, "pageable", (pageable_s,) * 3), (size, "pinned", (pinned_s,) * 3),
               (size, "pinned_non_blocking", (pinned_s,) * 3))
    return lambda **kw: HtoDResult("cuda", True, "", samples, (), 3)


@pytest.mark.parametrize("pageable_s, pinned_s, status", [(0.02, 0.01, "pass"), (0.02, 0.019, "fail")])
def test_htod_check_compares_pinned_with_pageable_bandwidth(monkeypatch, pageable_s, pinned_s, status):
    monkeypatch.setattr("perfkit.bench.htod.htod_sweep", _fake_sweep(pageable_s, pinned_s))
    check = checks.htod_pinned("cuda", QUICK)
    assert check.status == status
    assert check.values["pinned_gain"] == pytest.approx(pageable_s / pinned_s)
    assert check.values["pageable_gbps"] == pytest.approx(QUICK.htod_bytes / pageable_s / 1e9)


@pytest.mark.parametrize("found, status", [
    ({"item_logging": [2, 2, 2, 2], "batched_metrics": [0, 0, 0, 1]}, "pass"),
    ({"item_logging": [2, 2, 2, 2], "batched_metrics": [0, 0, 0, 0]}, "pass"),
    ({"item_logging": [2, 2, 2, 2], "batched_metrics": [1, 0, 0, 1]}, "fail"),  # more than 1 in metrics_every
    ({"item_logging": [2, 0, 2, 2], "batched_metrics": [0, 0, 0, 0]}, "fail"),  # a step without its sync
])
def test_trace_sync_check_on_a_gpu_needs_a_sync_each_step_before_and_only_metrics_steps_after(
        monkeypatch, found, status):
    monkeypatch.setattr(checks, "confirmed_syncs_by_step", lambda device, variant, steps: (found[variant], 4))
    check = checks.trace_syncs("cuda", QUICK)
    assert check.status == status
    assert check.values["item_logging_per_step"] == found["item_logging"]


def test_trace_sync_counting_ignores_unconfirmed_cpu_item_calls():
    # A CPU trace has aten::item calls but no CUDA runtime call under them: nothing is confirmed,
    # and every profiled step gets a count.
    counts, every = checks.confirmed_syncs_by_step("cpu", "item_logging", 2)
    assert counts == [0, 0] and every == 4


def _ab(verdict: str, low: float, high: float):
    from types import SimpleNamespace

    return SimpleNamespace(verdict=verdict, speedup_ci=(low, high))


@pytest.mark.parametrize("ab, also, status", [
    (_ab("faster", 1.1, 1.3), True, "pass"),
    (_ab("faster", 1.1, 1.3), False, "fail"),          # faster, but the losses diverged
    (_ab("slower", 0.7, 0.9), True, "fail"),
    (_ab("no change", 0.98, 1.02), True, "fail"),      # measured precisely: no gain
    (_ab("no change", 0.63, 2.72), True, "inconclusive"),  # timing noise (a busy 2-core machine)
    (_ab("insufficient data", math.nan, math.nan), True, "inconclusive"),
])
def test_timed_status_separates_a_measured_no_gain_from_noise(ab, also, status):
    assert checks.timed_status(ab, also=also) == status


class _FakeAMP:
    def __init__(self, syncs):
        self.syncs_per_step = syncs

    def summary(self):
        return {}


@pytest.mark.parametrize("syncs, status", [({"fp32": 0.0, "amp": 2.0}, "pass"), ({"fp32": 0.0, "amp": 0.0}, "fail"),
                                           ({"fp32": 1.0, "amp": 2.0}, "fail")])
def test_gradscaler_check_on_a_gpu(monkeypatch, syncs, status):
    monkeypatch.setattr(checks, "_amp", lambda device, sizes, dtype: _FakeAMP(syncs))
    assert checks.gradscaler_syncs("cuda", QUICK).status == status


def test_a_raising_check_is_an_error_row_and_the_others_still_run(monkeypatch):
    def broken(device, sizes):
        raise RuntimeError("CUDA error: an illegal memory access\nsecond line")

    monkeypatch.setitem(checks.CHECKS, "trace_syncs_ppo", broken)
    report = validate("cpu", preset="quick", only=["trace_syncs_ppo", "gradscaler_syncs"])
    assert [c.status for c in report.checks] == ["error", "skipped"]
    assert report.checks[0].measured == "RuntimeError: CUDA error: an illegal memory access"
    assert report.failed == (report.checks[0],)


def test_bad_arguments_name_the_valid_ones():
    with pytest.raises(ParameterError, match="valid checks are htod_pinned_vs_pageable"):
        validate("cpu", only=["nope"])
    with pytest.raises(ParameterError, match="use one of auto, full, quick"):
        validate("cpu", preset="huge")


def test_markdown_escapes_table_breaking_text():
    report = validate.__globals__["ValidationReport"](
        "cpu", "quick", (Check("x", "a|b", "1 | 2\nthree", "e", "pass", "cmd"),),
        {"gpu": "g", "driver": "d", "cuda": "c", "torch": "t", "python": "p"}, "2026-11-22", 1.0)
    assert "| x | pass | 1 \\| 2 three | e |" in report.to_markdown()


def test_cli_writes_the_table_and_exits_nonzero_on_failure(tmp_path, monkeypatch, capsys):
    out = tmp_path / "docs" / "validation.md"
    assert main(["validate", "--device", "cpu", "--preset", "quick", "--only", "gradscaler_syncs",
                 "--out", str(out)]) == 0
    assert "| gradscaler_syncs | skipped |" in out.read_text()
    assert out.read_text() == capsys.readouterr().out
    monkeypatch.setitem(checks.CHECKS, "gradscaler_syncs",
                        lambda device, sizes: Check("gradscaler_syncs", "c", "m", "e", "fail", "cmd"))
    assert main(["validate", "--device", "cpu", "--preset", "quick", "--only", "gradscaler_syncs", "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["checks"][0]["status"] == "fail"


@pytest.mark.slow
def test_validation_rows_flag_passes_and_skip_checks_without_expectation(cpu_report):
    from perfkit.report.validation import validation_rows

    rows = validation_rows(cpu_report)
    logged = {r["metric"]: r["value"] for r in rows}
    assert logged["runtime_syncs_ppo_pass"] == 1.0 and logged["leak_slope_pass"] == 1.0
    assert "gradscaler_syncs_pass" not in logged and "replay_device_normalize_pass" not in logged
    assert {(r["device"], r["unit"], r["higher_is_better"]) for r in rows} == {("cpu", "flag", True)}
    assert all(r["ci_low"] == r["ci_high"] == r["value"] for r in rows)  # exact: logged once while unchanged
