"""Regression verdicts of perf-log rows: how a new value compares with its baseline.

``classify_change(value, baseline, ...)`` is the rule (a confidence interval on the ratio decides
alone; otherwise a change within ``noise_pct`` percent is noise), ``infer_higher_is_better``
guesses a metric's direction from its name and unit, and ``complete_numbers`` fills a row's
value, baseline (the previous value of the same investigation + metric + device), delta,
direction and verdict before ``PerfLog`` writes it.
"""
from __future__ import annotations

import math
from typing import Any

from ..errors import ParameterError

VERDICTS = ("improved", "regressed", "within noise", "no baseline", "not enough data")
# perfkit.bench.compare's A/B and perfkit.analysis.diff's verdicts (B vs A) in the log's words:
# "faster" is better whatever the metric.
_VERDICT_ALIASES = {"faster": "improved", "slower": "regressed", "no change": "within noise",
                    "no detectable change": "within noise", "insufficient data": "not enough data"}
DEFAULT_NOISE_PCT = 5.0


def log_verdict(verdict: str) -> str:
    """An A/B (``perfkit.bench.compare``) or trace-diff (``perfkit.analysis.diff``) verdict in
    the log's words ("faster" -> "improved", ...); anything else is "not enough data"."""
    return _VERDICT_ALIASES.get(verdict, "not enough data")


def classify_change(value: float, baseline: float | None, *, higher_is_better: bool,
                    noise_pct: float = DEFAULT_NOISE_PCT,
                    ci: tuple[float, float] | None = None) -> str:
    """Verdict for ``value`` against ``baseline``: one of ``VERDICTS``.

    ``ci`` is a confidence interval on the ratio value/baseline (1.0 = no change) from an
    A/B comparison; when given it decides alone (an interval containing 1 is "within noise").
    Otherwise a change of at most ``noise_pct`` percent is "within noise".
    """
    if ci is not None:
        low, high = ci
        direction = 1 if low > 1.0 else -1 if high < 1.0 else 0
    elif baseline is None or isnan(baseline):
        return "no baseline"
    elif baseline == 0:
        direction = (value > 0) - (value < 0)
    else:
        delta = (value - baseline) / abs(baseline) * 100.0
        direction = 0 if abs(delta) <= noise_pct else (1 if delta > 0 else -1)
    if direction == 0:
        return "within noise"
    return "improved" if (direction > 0) == higher_is_better else "regressed"


def infer_higher_is_better(metric: str, unit: str) -> bool:
    """Rates (a unit per second: ``GB/s``, ``samples/sec``; names with throughput/speedup/util)
    are better high; times, bytes and counts (``syncs/step`` too) are better low. Pass
    ``higher_is_better`` to override."""
    text = f"{metric} {unit}".lower()
    per_second = unit.lower().strip().endswith(("/s", "/sec", "/second"))
    return per_second or any(w in text for w in ("throughput", "speedup", "util", "per_sec", "mfu"))


def latest_values(rows: list[dict]) -> dict:
    """(investigation, metric, device) -> the last value logged for it: each key's baseline."""
    return {(r["investigation"], r["metric"], r["device"]): r["value"] for r in rows}


def complete_numbers(row: dict, previous: dict, noise_pct: float) -> None:
    """Fill ``row`` in place: value, baseline (as given, else from ``previous``, a
    ``latest_values`` dict), ci_low/ci_high, delta_pct, higher_is_better and verdict; then
    record its value in ``previous`` as the baseline of the next row with the same key.
    Raises ParameterError for a missing or non-numeric value, a bad CI, flag or verdict."""
    row["value"] = _number(row, "value")
    key = (row["investigation"], row["metric"], row["device"])
    row["baseline"] = _number(row, "baseline") if "baseline" in row else previous.get(key, math.nan)
    row["ci_low"], row["ci_high"] = _number(row, "ci_low"), _number(row, "ci_high")
    if isnan(row["ci_low"]) != isnan(row["ci_high"]) or row["ci_low"] > row["ci_high"]:
        raise ParameterError("PerfLog.append: give both ci_low <= ci_high (CI of value/baseline) or neither")
    base = row["baseline"]
    row["delta_pct"] = math.nan if isnan(base) or base == 0 else (row["value"] - base) / abs(base) * 100
    hib = row.get("higher_is_better")
    row["higher_is_better"] = infer_higher_is_better(row["metric"], row["unit"]) if hib is None else _flag(hib)
    row["verdict"] = _verdict(row, noise_pct)
    previous[key] = row["value"]


def _verdict(row: dict, noise_pct: float) -> str:
    given = row.get("verdict")
    if given not in (None, ""):
        verdict = _VERDICT_ALIASES.get(str(given), str(given))
        if verdict not in VERDICTS:
            raise ParameterError(f"PerfLog.append: verdict={given!r}; use one of {', '.join(VERDICTS)}")
        return verdict
    ci = None if isnan(row["ci_low"]) else (row["ci_low"], row["ci_high"])
    return classify_change(row["value"], row["baseline"], higher_is_better=row["higher_is_better"],
                           noise_pct=noise_pct, ci=ci)


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        if value.strip().lower() not in ("true", "false", "1", "0"):
            raise ParameterError(f"PerfLog.append: higher_is_better={value!r}; use True or False")
        return value.strip().lower() in ("true", "1")
    return bool(value)


def _number(row: dict, key: str) -> float:
    raw = row.get(key)
    if raw is None or raw == "":
        if key == "value":
            raise ParameterError("PerfLog.append: value is required")
        return math.nan
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ParameterError(f"PerfLog.append: {key}={raw!r} is not a number") from None
    if key == "value" and not math.isfinite(value):
        raise ParameterError(f"PerfLog.append: value={raw!r} must be finite")
    return value


def isnan(value: Any) -> bool:
    """True for a float NaN (the log's "not measured"); False for anything else, None included."""
    return isinstance(value, float) and math.isnan(value)
