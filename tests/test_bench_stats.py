import math

import numpy as np
import pytest

from perfkit import stats
from perfkit.errors import ParameterError


def _lognormal(n, scale, seed, sigma=0.05):
    return scale * np.random.default_rng(seed).lognormal(0.0, sigma, n)


def test_identical_distributions_are_no_change():
    result = stats.ratio_test(_lognormal(60, 1e-3, 1), _lognormal(60, 1e-3, 2))
    assert result.verdict == "no change"
    assert result.low < 1.0 < result.high
    assert result.n_a == result.n_b == 60


@pytest.mark.parametrize("scale, verdict", [(1.2, "slower"), (1 / 1.2, "faster")])
def test_twenty_percent_shift_is_detected(scale, verdict):
    result = stats.ratio_test(_lognormal(40, 1e-3, 3), _lognormal(40, 1e-3 * scale, 4))
    assert result.verdict == verdict
    assert result.p_value < 0.01
    assert result.low <= result.ratio <= result.high
    assert result.ratio == pytest.approx(scale, rel=0.05)


def test_three_samples_are_insufficient():
    result = stats.ratio_test([1.0, 1.1, 1.2], [2.0, 2.1, 2.2])
    assert result.verdict == "insufficient data"
    assert "at least 5" in result.reason
    assert math.isnan(result.low) and math.isnan(result.p_value)


def test_zero_spread_on_both_sides_is_insufficient():
    result = stats.ratio_test([1.0] * 10, [2.0] * 10)
    assert result.verdict == "insufficient data"
    assert "zero spread" in result.reason


def test_zero_median_is_insufficient():
    result = stats.ratio_test([0.0] * 8 + [1e-6, 2e-6], [1e-6] * 10)
    assert result.verdict == "insufficient data"
    assert math.isnan(result.ratio)


def test_small_shift_below_min_effect_is_no_change():
    a = _lognormal(400, 1.0, 5, sigma=0.01)
    b = _lognormal(400, 1.01, 6, sigma=0.01)  # a real but 1% change
    strict = stats.ratio_test(a, b, min_effect=0.02)
    assert strict.verdict == "no change"
    assert strict.low > 1.0  # the CI excludes 1, but not the 2% minimum effect
    assert stats.ratio_test(a, b, min_effect=0.0).verdict == "slower"


def test_decide_needs_both_the_ci_and_the_p_value():
    assert stats.decide(1.1, 1.2, 0.01, min_effect=0.02, alpha=0.05)[0] == "slower"
    assert stats.decide(1.1, 1.2, 0.2, min_effect=0.02, alpha=0.05)[0] == "no change"
    assert stats.decide(0.8, 0.9, 0.01, min_effect=0.02, alpha=0.05)[0] == "faster"
    assert stats.decide(0.99, 1.2, 0.001, min_effect=0.02, alpha=0.05)[0] == "no change"


def test_bootstrap_is_seeded_and_reproducible():
    a, b = _lognormal(30, 1.0, 7), _lognormal(30, 1.1, 8)
    first = stats.bootstrap_median_ratio(a, b, seed=3)
    assert first == stats.bootstrap_median_ratio(a, b, seed=3)
    assert first != stats.bootstrap_median_ratio(a, b, seed=4)
    wide = stats.bootstrap_median_ratio(a, b, confidence=0.99, seed=3)
    assert wide[0] <= first[0] and wide[1] >= first[1]


def test_bootstrap_in_chunks_matches_one_block(monkeypatch):
    a, b = _lognormal(50, 1.0, 9), _lognormal(50, 1.1, 10)
    whole = stats.bootstrap_median_ratio(a, b, resamples=500)
    monkeypatch.setattr(stats, "_MAX_BOOTSTRAP_CELLS", 50 * 7)  # 7 resamples per chunk
    assert stats.bootstrap_median_ratio(a, b, resamples=500) == pytest.approx(whole)


def test_bootstrap_ci_covers_the_true_ratio_about_95_percent():
    hits = 0
    for seed in range(200):
        a, b = _lognormal(40, 1.0, 2 * seed, sigma=0.1), _lognormal(40, 1.1, 2 * seed + 1, sigma=0.1)
        low, high = stats.bootstrap_median_ratio(a, b, resamples=500, seed=seed)
        hits += low < 1.1 < high
    assert 0.88 <= hits / 200 <= 0.99


def test_mann_whitney_identical_values():
    assert stats.mann_whitney_p([1.0] * 6, [1.0] * 6) == 1.0
    assert stats.mann_whitney_p([1.0] * 8, [2.0] * 8) < 0.01


@pytest.mark.parametrize("bad", [[1.0, float("nan"), 1.0, 1.0, 1.0], [1.0, -1.0, 1.0, 1.0, 1.0]])
def test_bad_samples_raise(bad):
    with pytest.raises(ParameterError):
        stats.ratio_test(bad, [1.0] * 5)


@pytest.mark.parametrize("kwargs", [{"confidence": 1.0}, {"min_effect": -0.1}, {"min_samples": 1},
                                    {"alpha": 0.0}])
def test_bad_knobs_raise(kwargs):
    with pytest.raises(ParameterError):
        stats.ratio_test([1.0, 1.1] * 5, [1.0, 1.2] * 5, **kwargs)


def test_robust_cv_ignores_outliers():
    base = list(_lognormal(100, 1.0, 11, sigma=0.02))
    assert stats.robust_cv(base + [50.0] * 3) < 0.05
    assert np.std(base + [50.0] * 3) / np.mean(base + [50.0] * 3) > 1.0  # a plain CV is not robust
    assert stats.robust_cv([1.0]) == 0.0


def test_fit_slope_recovers_known_line():
    x = np.arange(50, dtype=float)
    y = 3.0 * x + 2.0 + np.random.default_rng(0).normal(0, 1.0, 50)
    fit = stats.fit_slope(x, y)
    assert fit.low < fit.slope < fit.high
    assert fit.slope == pytest.approx(3.0, abs=0.05)
    assert fit.intercept == pytest.approx(2.0, abs=1.0)
    assert fit.r2 > 0.99 and fit.n == 50
    assert fit.to_frame().loc[0, "slope"] == fit.slope
    assert "SlopeFit(" in repr(fit)


def test_fit_slope_ci_covers_the_true_slope_about_95_percent():
    x = np.arange(20, dtype=float)
    rng = np.random.default_rng(2)
    fits = [stats.fit_slope(x, 0.5 * x + rng.normal(0, 2.0, 20)) for _ in range(400)]
    coverage = np.mean([f.low < 0.5 < f.high for f in fits])
    assert 0.92 <= coverage <= 0.98


def test_fit_slope_flat_noise_ci_contains_zero():
    fit = stats.fit_slope(np.arange(30), np.random.default_rng(1).normal(5, 1, 30))
    assert fit.low < 0.0 < fit.high
    assert fit.p_value > 0.05


def test_fit_slope_constant_y():
    fit = stats.fit_slope([1, 2, 3, 4], [7, 7, 7, 7])
    assert (fit.slope, fit.low, fit.high, fit.r2) == (0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize("x, y", [([1, 2], [1, 2]), ([1, 1, 1], [1, 2, 3]), ([1, 2, 3], [1, 2]),
                                  ([1, 2, float("nan")], [1, 2, 3])])
def test_fit_slope_rejects_bad_input(x, y):
    with pytest.raises(ParameterError):
        stats.fit_slope(x, y)


def test_paired_ratio_cancels_load_shared_by_a_pair():
    rng = np.random.default_rng(12)
    load = np.where(rng.random(60) < 0.45, 4.0, 1.0)  # 45% of rounds run 4x slower on both sides
    a = 1e-3 * load * rng.lognormal(0, 0.01, 60)
    b = 1.15e-3 * load * rng.lognormal(0, 0.01, 60)
    paired = stats.ratio_test(a, b, paired=True)
    assert paired.verdict == "slower"
    assert paired.ratio == pytest.approx(1.15, rel=0.02)
    assert paired.high - paired.low < 0.05
    unpaired = stats.ratio_test(a, b)
    assert unpaired.high - unpaired.low > paired.high - paired.low


def test_paired_needs_equal_lengths_and_nonzero_a():
    with pytest.raises(ParameterError):
        stats.ratio_test([1.0] * 6, [1.0] * 7, paired=True)
    result = stats.ratio_test([0.0] + [1.0, 1.1] * 3, [1.0, 1.2] * 3 + [1.0], paired=True)
    assert result.verdict == "insufficient data" and math.isnan(result.ratio)


@pytest.mark.parametrize("second_half, cv_ok", [(1.49, True), (1.51, False)])
def test_unreliable_when_a_median_drifts_past_half(second_half, cv_ok):
    a = [1.0] * 10
    b = [1.0] * 5 + [second_half] * 5
    assert (stats.unreliable(a, b) == "") is cv_ok


@pytest.mark.parametrize("spread, ok", [(0.33, True), (0.34, False)])
def test_unreliable_when_the_robust_cv_passes_half(spread, ok):
    noisy = [1.0 - spread, 1.0 - spread, 1.0, 1.0 + spread, 1.0 + spread]  # robust CV = 1.4826 * spread
    assert (stats.unreliable([1.0] * 5, noisy) == "") is ok


def test_unreliable_names_no_drift_it_could_not_measure():
    noisy = [0.5, 0.5, 1.0, 1.5, 1.5]
    assert stats.unreliable([1.0] * 5, noisy) == "CV 74%"
    assert stats.unreliable([1.0] * 10, noisy * 2).startswith("timing drifted +0%, CV ")
