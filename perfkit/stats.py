"""Statistics for A/B timing: a median ratio with a bootstrap CI, a rank test and a verdict.

Everything here is pure numpy/scipy on arrays of samples (seconds, or any positive unit);
nothing times or imports torch. ``ratio_test(a, b)`` answers "is B faster or slower than A?"
with one of ``VERDICTS``; it never defaults to "significant" (STYLE.md point 7): "faster" and
"slower" need the whole bootstrap confidence interval of the median ratio B/A (median(B) /
median(A), or the median of paired ratios) beyond ``1 -/+ min_effect`` AND a Mann-Whitney U
p-value below ``alpha``. ``fit_slope(x, y)`` is a linear fit with a
t-based CI on the slope (for drift and leak hunts).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .errors import ParameterError
from .results import html_section, html_table

VERDICTS = ("faster", "slower", "no change", "insufficient data")

# Largest bootstrap index matrix built at once (resamples x n); bounds memory to ~32 MB.
_MAX_BOOTSTRAP_CELLS = 4_000_000


@dataclass(frozen=True)
class RatioTest:
    """Outcome of ``ratio_test``: ratio = median(B) / median(A) (below 1: B takes less time).

    ``low``/``high`` bound the ratio at ``confidence``; ``p_value`` is the two-sided
    Mann-Whitney U test; ``reason`` says why the verdict was reached.
    """

    ratio: float
    low: float
    high: float
    p_value: float
    verdict: str
    reason: str
    n_a: int
    n_b: int
    confidence: float
    min_effect: float
    alpha: float
    paired: bool = False

    def __repr__(self) -> str:
        return (f"RatioTest(B/A={self.ratio:.4g} [{self.low:.4g}, {self.high:.4g}], "
                f"p={self.p_value:.3g}, {self.verdict})")


@dataclass(frozen=True)
class SlopeFit:
    """Least-squares line y = slope * x + intercept, with a t-based CI on the slope.

    Units: slope is y-units per x-unit. ``p_value`` tests slope != 0 (two-sided).
    """

    slope: float
    low: float
    high: float
    r2: float
    n: int
    intercept: float = 0.0
    stderr: float = 0.0
    p_value: float = 1.0
    confidence: float = 0.95

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(self)])

    def __repr__(self) -> str:
        return (f"SlopeFit(slope={self.slope:.4g} [{self.low:.4g}, {self.high:.4g}], "
                f"r2={self.r2:.3f}, n={self.n})")

    def _repr_html_(self) -> str:
        return html_section("Linear fit", html_table(self.to_frame()))


def as_samples(values, name: str = "samples") -> np.ndarray:
    """1-D float array of finite, non-negative values; raises ParameterError otherwise."""
    arr = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(arr)):
        raise ParameterError(f"{name}: contains NaN or infinite values; drop failed runs before comparing")
    if np.any(arr < 0):
        raise ParameterError(f"{name}: contains negative values; timings must be >= 0 seconds")
    return arr


def robust_cv(samples) -> float:
    """1.4826 * median absolute deviation / median: a coefficient of variation that a few
    outliers (first calls, GC pauses) do not inflate. 0 for fewer than 2 samples."""
    arr = np.asarray(samples, dtype=float)
    if arr.size < 2:
        return 0.0
    med = float(np.median(arr))
    return float(1.4826 * np.median(np.abs(arr - med)) / med) if med > 0 else 0.0


# Past these, timings support no verdict at all ("inconclusive: re-run on a quiet machine"): samples whose
# median moves by half between the two halves of the run, or whose robust CV passes 50%, were timed on a
# machine whose load changed under them; a bootstrap CI assumes one distribution per side. Measured: a
# loaded 2-core machine gave an AMP A/B drift of -66% and a CV of 131%, and a speedup CI of 0.14-2.25
# that read as "no change". The A/B harness (``ABResult.unreliable``) and ``perfkit trace-diff`` judge by these.
UNRELIABLE_DRIFT = 0.5
UNRELIABLE_CV = 0.5


def half_move(samples) -> float:
    """second-half median / first-half median - 1 of one side's samples (in run order); 0 under 10 samples."""
    arr = np.asarray(samples, dtype=float)
    half = len(arr) // 2
    if half < 5:
        return 0.0
    first, second = np.median(arr[:half]), np.median(arr[half:])
    return float(second / first - 1) if first > 0 else 0.0


def unreliable(a, b) -> str:
    """Why timings ``a`` and ``b`` (each in run order) support no verdict, "" when they do: a side's median
    drifted by more than ``UNRELIABLE_DRIFT`` (``half_move``) or its ``robust_cv`` passed ``UNRELIABLE_CV``,
    e.g. "timing drifted -66%, CV 131%" ("CV 126%" alone where a side is too short to show a drift)."""
    drift = max((half_move(a), half_move(b)), key=abs)
    spread = max(robust_cv(a), robust_cv(b))
    if abs(drift) <= UNRELIABLE_DRIFT and spread <= UNRELIABLE_CV:
        return ""
    if min(len(a), len(b)) < 10:  # half_move needs 5 samples a half
        return f"CV {spread:.0%}"
    return f"timing drifted {drift:+.0%}, CV {spread:.0%}"


def bootstrap_median_ratio(a, b, *, confidence: float = 0.95, resamples: int = 2000,
                           seed: int = 0, paired: bool = False) -> tuple[float, float]:
    """Percentile bootstrap CI of the median ratio B/A. Returns (low, high).

    Unpaired: median(b) / median(a), resampling each side independently. Paired (``a[i]``
    and ``b[i]`` taken together, e.g. one interleaved round): median(b / a), resampling the
    pairs. Vectorized: a (resamples x n) index matrix, built in chunks.
    """
    _check_confidence(confidence)
    if resamples < 100:
        raise ParameterError(f"resamples={resamples}: use at least 100 (2000 is the default)")
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if paired:
            ratios = _bootstrap_medians(b / a, resamples, rng)
        else:
            med_a = _bootstrap_medians(a, resamples, rng)
            ratios = _bootstrap_medians(b, resamples, rng) / med_a
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def _bootstrap_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    rows = max(1, _MAX_BOOTSTRAP_CELLS // max(x.size, 1))
    out = []
    for start in range(0, resamples, rows):
        idx = rng.integers(0, x.size, size=(min(rows, resamples - start), x.size))
        out.append(np.median(x[idx], axis=1))
    return np.concatenate(out)


def mann_whitney_p(a, b) -> float:
    """Two-sided Mann-Whitney U p-value (1.0 when every value is identical)."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.ptp(np.concatenate([a, b])) == 0:
        return 1.0
    return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): the chance of ``k`` or more of ``n`` events at probability ``p`` each (1.0
    for k <= 0)."""
    from scipy import stats

    return 1.0 if k <= 0 else float(stats.binom.sf(k - 1, n, p))


def decide(low: float, high: float, p_value: float, *, min_effect: float, alpha: float) -> tuple[str, str]:
    """Verdict from a CI on B/A and a p-value: (verdict, reason)."""
    if p_value >= alpha:
        return "no change", f"p={p_value:.3g} >= alpha={alpha:.3g}"
    if high < 1.0 - min_effect:
        return "faster", f"CI high {high:.4g} < {1 - min_effect:.4g} and p={p_value:.3g}"
    if low > 1.0 + min_effect:
        return "slower", f"CI low {low:.4g} > {1 + min_effect:.4g} and p={p_value:.3g}"
    return "no change", (f"CI [{low:.4g}, {high:.4g}] is not entirely beyond the "
                         f"{min_effect:.1%} minimum effect")


def ratio_test(a, b, *, confidence: float = 0.95, min_effect: float = 0.02, alpha: float | None = None,
               min_samples: int = 5, resamples: int = 2000, seed: int = 0, paired: bool = False) -> RatioTest:
    """Compare samples ``b`` against ``a`` (e.g. seconds per call).

    The ratio is median(b) / median(a), or with ``paired=True`` (equal lengths, ``a[i]`` and
    ``b[i]`` measured together) the median of b[i] / a[i], which cancels load that hits both
    members of a pair. ``alpha`` defaults to ``1 - confidence``. "insufficient data" when a
    side has fewer than ``min_samples`` samples, when both sides have zero spread (no noise
    estimate: usually a clock too coarse for the work) or when A has zero times. Raises
    ParameterError for NaN/negative samples, unequal paired lengths or out-of-range knobs.
    """
    a, b = as_samples(a, "samples A"), as_samples(b, "samples B")
    alpha = check_knobs(confidence, min_effect, min_samples, alpha)
    if paired and a.size != b.size:
        raise ParameterError(f"paired=True needs as many A as B samples (got {a.size} and {b.size})")
    common = dict(n_a=int(a.size), n_b=int(b.size), confidence=confidence, min_effect=min_effect, alpha=alpha,
                  paired=paired)
    problem = _insufficiency(a, b, min_samples, paired)
    ratio = _ratio(a, b, paired)
    if problem:
        return RatioTest(ratio, math.nan, math.nan, math.nan, "insufficient data", problem, **common)
    low, high = bootstrap_median_ratio(a, b, confidence=confidence, resamples=resamples, seed=seed,
                                       paired=paired)
    p_value = mann_whitney_p(a, b)
    verdict, reason = decide(low, high, p_value, min_effect=min_effect, alpha=alpha)
    return RatioTest(ratio, low, high, p_value, verdict, reason, **common)


def _ratio(a: np.ndarray, b: np.ndarray, paired: bool = False) -> float:
    if a.size == 0 or b.size == 0 or np.median(a) == 0 or (paired and np.any(a == 0)):
        return math.nan
    return float(np.median(b / a) if paired else np.median(b) / np.median(a))


def _insufficiency(a: np.ndarray, b: np.ndarray, min_samples: int, paired: bool = False) -> str:
    if min(a.size, b.size) < min_samples:
        return (f"{a.size} A and {b.size} B samples; need at least {min_samples} per side: "
                "raise repeats or min_time_s")
    if np.median(a) == 0 or (paired and np.any(a == 0)):
        return ("A has samples of 0 seconds: the clock is too coarse for this work; "
                "time more calls per sample (inner)")
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return ("both sides have zero spread, so noise cannot be estimated: the clock is "
                "probably too coarse; time more calls per sample (inner)")
    return ""


def _check_confidence(confidence: float) -> None:
    if not 0.5 <= confidence < 1.0:
        raise ParameterError(f"confidence={confidence}: must be in [0.5, 1) (e.g. 0.95)")


def check_knobs(confidence: float = 0.95, min_effect: float = 0.02, min_samples: int = 5,
                alpha: float | None = None) -> float:
    """Validate the test's knobs (so callers can fail before timing anything); returns alpha."""
    _check_confidence(confidence)
    if not 0.0 <= min_effect < 1.0:
        raise ParameterError(f"min_effect={min_effect}: must be a fraction in [0, 1) (0.02 means 2%)")
    if min_samples < 2:
        raise ParameterError(f"min_samples={min_samples}: must be at least 2")
    alpha = 1.0 - confidence if alpha is None else float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ParameterError(f"alpha={alpha}: must be between 0 and 1 (e.g. 0.05)")
    return alpha


def fit_slope(x, y, confidence: float = 0.95) -> SlopeFit:
    """Fit y = slope * x + intercept (scipy.stats.linregress) with a t-based slope CI.

    CI = slope +/- t_{(1+confidence)/2, n-2} * stderr. A constant ``y`` gives slope 0 with a
    zero-width CI and r2 = 1 (the line fits exactly). Raises ParameterError for fewer than 3
    points, mismatched lengths, non-finite values or a constant ``x``.
    """
    from scipy import stats

    _check_confidence(confidence)
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    _check_fit_input(x, y)
    n = int(x.size)
    if np.ptp(y) == 0:
        return SlopeFit(0.0, 0.0, 0.0, 1.0, n, float(y[0]), 0.0, 1.0, confidence)
    fit = stats.linregress(x, y)
    half = float(stats.t.ppf((1.0 + confidence) / 2.0, n - 2) * fit.stderr)
    return SlopeFit(float(fit.slope), float(fit.slope) - half, float(fit.slope) + half,
                    float(fit.rvalue) ** 2, n, float(fit.intercept), float(fit.stderr),
                    float(fit.pvalue), confidence)


def _check_fit_input(x: np.ndarray, y: np.ndarray) -> None:
    if x.size != y.size:
        raise ParameterError(f"fit_slope: x has {x.size} values but y has {y.size}; pass paired values")
    if x.size < 3:
        raise ParameterError(f"fit_slope: {x.size} points; a slope CI needs at least 3")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ParameterError("fit_slope: x or y contains NaN or infinite values; drop them first")
    if np.ptp(x) == 0:
        raise ParameterError("fit_slope: every x is the same, so no slope can be fitted; vary x (e.g. the step)")


def exact(value: float) -> tuple[float, float]:
    """The CI of a figure without measurement noise (a count from a fixed input, a seeded loss)."""
    return (float(value), float(value))


def step_ci(values, statistic=np.median) -> tuple[float, float] | None:
    """95% percentile-bootstrap CI of ``statistic`` over per-step (or per-sample) values
    (``scipy.stats.bootstrap``, fixed seed so the same input gives the same CI); a zero-width
    CI when every value is equal; None with fewer than 2 finite values."""
    from scipy.stats import bootstrap

    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size < 2:
        return None
    if np.ptp(arr) == 0:
        return exact(arr[0])
    res = bootstrap((arr,), statistic, confidence_level=0.95, n_resamples=2000, method="percentile",
                    rng=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)
