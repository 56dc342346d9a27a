"""The regression rule of ``perfkit.report.perflog.judge`` on measurements built in the test: every verdict, one row
each side of MIN_EFFECT, of the noise band and of MIN_HISTORY; the noise and change arithmetic; the baselines kept."""
from __future__ import annotations

import math

import pytest

from perfkit.report.perflog import judge as jm
from perfkit.report.perflog.judge import Baselines, Measurement, judge

NAN = math.nan


def exact(value, run="r") -> Measurement:
    return Measurement(run, value, value, value)


def ci(value, half, run="r") -> Measurement:
    return Measurement(run, value, value - half, value + half)


@pytest.mark.parametrize("current, base, history, higher, verdict", [
    (exact(100.0), None, [], False, "no baseline"),
    (exact(100.0), exact(100.0, "b"), [], False, "unchanged"),
    (Measurement("a", 5.0), Measurement("b", 5.0), [], False, "unchanged"),             # no CI on either: same figures
    (Measurement("a", 110.0, quality="load 3.1 > 2 cores"), exact(100.0, "b"), [], False, "not enough data"),
    (exact(110.0), Measurement("b", 100.0, 100.0, 100.0, "load"), [], False, "not enough data"),
    (Measurement("a", 110.0), Measurement("b", 100.0), [], False, "not enough data"),   # no CI, no history
    # exact figures have no noise: MIN_EFFECT decides (10% of the baseline, inclusive)
    (exact(1_100.0), exact(1_000.0, "b"), [], False, "regressed"),
    (exact(1_100.0), exact(1_000.0, "b"), [], True, "improved"),
    (exact(900.0), exact(1_000.0, "b"), [], False, "improved"),
    (exact(1_099.0), exact(1_000.0, "b"), [], False, "within noise"),
    (exact(1.0), exact(0.0, "b"), [], False, "regressed"),                               # from a baseline of 0
    # CIs of +-2% and the assumed 10% run-to-run spread: a band of Z * 0.142 = 0.43 in log
    (ci(160.0, 3.2), ci(100.0, 2.0, "b"), [], False, "regressed"),                        # log 1.6 = 0.47
    (ci(150.0, 3.0), ci(100.0, 2.0, "b"), [], False, "within noise"),                     # log 1.5 = 0.41
    # three runs of history with no spread: only the CIs (0.0144 in log) remain
    (ci(111.0, 2.22), ci(100.0, 2.0, "b"), [exact(100.0, x) for x in "xyz"], False, "regressed"),
    (ci(111.0, 2.22), ci(100.0, 2.0, "b"), [exact(100.0, x) for x in "xy"], False, "within noise"),  # under MIN_HISTORY
    # no CI: judged by the history band alone
    (Measurement("a", 111.0), Measurement("b", 100.0), [exact(100.0, x) for x in "xyz"], False, "regressed"),
    (Measurement("a", 111.0), Measurement("b", 100.0), [exact(100.0, x) for x in "xy"], False, "not enough data"),
    (Measurement("a", 111.0), exact(100.0, "b"), [], False, "not enough data"),           # one side without a CI
])
def test_every_verdict(current, base, history, higher, verdict):
    assert judge(current, base, history, higher_is_better=higher) == verdict


def test_the_threshold_is_the_bonferroni_z_of_twenty_metrics():
    assert jm.Z == pytest.approx(3.023, abs=1e-3) and jm._z(0.05) == pytest.approx(1.96, abs=1e-3)


@pytest.mark.parametrize("value, base, change", [
    (110.0, 100.0, math.log(1.1)), (-5.0, -10.0, 0.5), (5.0, -10.0, 1.5), (0.0, 0.0, 0.0), (1.0, 0.0, math.inf),
    (-1.0, 0.0, math.inf), (0.0, 10.0, -1.0),
])
def test_the_relative_change(value, base, change):
    assert jm.relative_change(value, base) == pytest.approx(change)


def test_the_noise_of_two_measurements():
    assert jm.noise(exact(1.0), exact(2.0), []) == 0.0
    own = 4.0 / (2 * jm._Z95) / 100.0  # a CI 4 wide on 100
    assert jm.noise(ci(100.0, 2.0), ci(100.0, 2.0), []) == pytest.approx(math.sqrt(2 * own ** 2 + 2 * 0.1 ** 2))
    hist = [exact(v, x) for v, x in ((100.0, "x"), (110.0, "y"), (121.0, "z"))]
    run = math.log(1.1)  # the logs are evenly 0.0953 apart: their standard deviation is that step
    assert jm.noise(Measurement("a", 1.0), Measurement("b", 1.0), hist) == pytest.approx(run * math.sqrt(2))
    assert jm.noise(ci(100.0, 2.0), ci(100.0, 2.0), hist) == pytest.approx(math.sqrt(2 * own ** 2 + 2 * run ** 2))


@pytest.mark.parametrize("m, sigma", [
    (ci(100.0, 1.96), 0.01), (Measurement("a", 0.0, 0.0, 0.0), 0.0), (Measurement("a", 0.0, -1.0, 1.0), math.inf),
    (Measurement("a", -100.0, -101.96, -98.04), 0.01),
])
def test_the_relative_sigma_from_a_ci(m, sigma):
    assert jm._relative_sigma(m) == pytest.approx(sigma, rel=1e-4)  # 1.96 for 1.959964


def test_no_ci_no_sigma():
    assert math.isnan(Measurement("a", 1.0).sigma) and math.isnan(Measurement("a", 1.0, 0.5).sigma)
    assert math.isnan(jm._relative_sigma(Measurement("a", 1.0, NAN, 2.0)))


@pytest.mark.parametrize("values, spread", [
    ([1.0, math.e, math.e ** 2], 1.0),                    # logs 0, 1, 2
    ([-1.0, 1.0, 3.0], 2.0),                              # a value not positive: stdev 2 over |mean| 1
    ([-1.0, 0.0, 1.0], NAN),                              # mean 0: no scale
])
def test_the_run_to_run_spread(values, spread):
    got = jm._relative_spread(values)
    assert (math.isnan(got) if math.isnan(spread) else got == pytest.approx(spread))


def test_the_sample_standard_deviation():
    assert jm._stdev([1.0, 2.0, 3.0]) == 1.0 and jm._stdev([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) == pytest.approx(
        math.sqrt(32 / 7))


@pytest.mark.parametrize("metric, unit, higher", [
    ("h2d", "GB/s", True), ("rate", "samples/sec", True), ("x", "tokens/second", True), ("loader throughput", "", True),
    ("speedup", "x", True), ("gpu util", "%", True), ("samples_per_sec", "", True), ("mfu", "%", True),
    ("step time", "ms", False), ("syncs", "syncs/step", False), ("peak memory", "bytes", False),
    ("x", " GB/S ", True),
])
def test_which_way_is_better(metric, unit, higher):
    assert jm.infer_higher_is_better(metric, unit) is higher


def test_isnan_is_a_float_nan_only():
    assert (jm.isnan(NAN), jm.isnan(None), jm.isnan("nan"), jm.isnan(1.0)) == (True, False, False, False)


def test_exact_and_same_figures():
    assert exact(2.0).exact and not ci(2.0, 0.1).exact and not Measurement("a", 2.0).exact
    assert ci(2.0, 0.1).same_figures(ci(2.0, 0.1, "other")) and not ci(2.0, 0.1).same_figures(ci(2.0, 0.2))
    assert not Measurement("a", 2.0).same_figures(Measurement("b", 3.0))
    assert not Measurement("a", 2.0).same_figures(exact(2.0))


# -- the baselines ----------------------------------------------------------------------------------------------
def row(run, value, metric="step_ms", **kw) -> dict:
    return {"investigation": "cpu_bound", "subject": "t.json", "metric": metric, "device": "cpu", "run_id": run,
            "value": value, "ci_low": kw.get("ci_low", NAN), "ci_high": kw.get("ci_high", NAN), **kw}


KEY = ("cpu_bound", "t.json", "step_ms", "cpu")


def test_the_baseline_is_the_last_other_run_and_a_run_logged_twice_counts_once():
    b = Baselines([row("r1", 1.0), row("r2", 2.0), row("r2", 2.5), row("r3", 3.0, quality="load")])
    base, history = b.previous(KEY, "r3")
    assert (base.run_id, base.value) == ("r2", 2.5) and [m.value for m in history] == [1.0, 2.5]
    last, _ = b.previous(KEY, "")
    assert (last.run_id, last.quality) == ("r3", "load")  # no run id: every run is earlier
    assert b.previous(("x",) * 4, "r1") == (None, [])


def test_rows_without_a_run_id_are_each_their_own_run():
    b = Baselines([row("", 1.0), row("", 2.0)])
    assert [m.value for m in b.previous(KEY, "new")[1]] == [1.0, 2.0]


def test_the_history_holds_the_last_ten_runs():
    b = Baselines([row(f"r{i:02}", float(i)) for i in range(12)])
    base, history = b.previous(KEY, "now")
    assert base.value == 11.0 and [m.value for m in history] == [float(i) for i in range(2, 12)]


def test_recent_reads_newest_first_only_until_each_key_has_its_runs():
    newest_first = [row(f"r{i:02}", float(i)) for i in range(20, 0, -1)]
    read = []

    def rows():
        for r in newest_first:
            read.append(r["run_id"])
            yield r
    b = Baselines.recent(rows(), {KEY}, {"r20"})
    base, history = b.previous(KEY, "r20")
    assert base.value == 19.0 and len(history) == jm.HISTORY
    assert len(read) == jm.HISTORY + 2  # the current run, then HISTORY + 1 others
    other = Baselines.recent(iter([row("a", 1.0, metric="other"), row("b", 2.0)]), {KEY}, set())
    assert [m.value for m in other.previous(KEY, "")[1]] == [2.0]  # keys not asked for are not kept
