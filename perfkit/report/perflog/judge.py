"""Regression verdicts of perf-log rows: does a metric differ from the previous run?

The baseline of a row is the same metric of the previous run of the same investigation, on the
same subject (the trace or workload measured) and device: ``Baselines.previous``. Never another
row of the same run: an A/B's other arm is not a baseline.

The rule (``judge``), for a value ``v`` against its baseline ``b``:

* **Noise**, relative (timing noise is multiplicative): the change is ``log(v / b)``, its sigma
  ``sqrt(s_v^2 + s_b^2 + 2 s_run^2)``: ``s_v``/``s_b`` from each row's own 95% CI (half width /
  1.96 / value; the harness's bootstrap CI, or the spread of the profiled steps), ``s_run`` the
  run-to-run spread: the standard deviation of the log values of the metric's last ``HISTORY``
  runs once there are at least ``MIN_HISTORY``, else ``RUN_TO_RUN`` (runs on one machine differ
  beyond their own CI: other load, clocks, caches). A row without
  a CI is judged against its history band alone; with no history either it is
  "not enough data". An exact figure (``ci_low == ci_high == value``: counted from a fixed input,
  e.g. a shipped trace) has no noise.
* **Measurement quality.** A row with a ``quality`` note (e.g. timed while the machine's load
  average exceeded its cores), or whose baseline has one, is "not enough data": its absolute
  times describe the other load, not the code.
* **Logged once.** A row whose value and CI equal its baseline's (a shipped trace analyzed again
  by the same code) is "unchanged": returned to the notebook, not written again.
* **False alarms per run.** A run logs about 18 metrics. Each is tested two-sided at
  ``ALPHA_RUN / RUN_METRICS`` (Bonferroni): a run of up to ``RUN_METRICS`` unchanged metrics is
  flagged with probability at most ``ALPHA_RUN`` (5%), where per-metric 95% tests would flag
  about 60% of runs. ``Z`` is that test's threshold (3.02 sigma).
* **Minimum effect.** Only a change of at least ``MIN_EFFECT`` (10%) of the baseline is
  "regressed" or "improved", in the metric's direction (``higher_is_better``); a smaller change
  that beats the noise is "within noise" too: not worth a red row.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy.stats import norm

VERDICTS = ("improved", "regressed", "within noise", "no baseline", "not enough data", "unchanged")
ALPHA_RUN = 0.05
RUN_METRICS = 20
MIN_EFFECT = 0.10
# Run-to-run spread (1 sigma, fraction of the value) assumed until a metric has MIN_HISTORY runs.
# Measured: back-to-back `perfkit run` pairs on a shared 2-core machine moved live timings by up
# to ~15% with narrow per-run CIs (see docs/reports.md).
RUN_TO_RUN = 0.10
MIN_HISTORY = 3
HISTORY = 10
_Z95 = 1.959964


def _z(alpha_two_sided: float) -> float:
    return float(norm.isf(alpha_two_sided / 2))


Z = _z(ALPHA_RUN / RUN_METRICS)


@dataclass(frozen=True)
class Measurement:
    """One logged value with its run id and 95% CI (NaN bounds: no CI)."""

    run_id: str
    value: float
    ci_low: float = math.nan
    ci_high: float = math.nan
    quality: str = ""

    @property
    def exact(self) -> bool:
        return self.ci_low == self.ci_high == self.value

    def same_figures(self, other: "Measurement") -> bool:
        """Value and CI identical to ``other``'s: a fixed input analyzed again by the same code."""
        pairs = ((self.value, other.value), (self.ci_low, other.ci_low), (self.ci_high, other.ci_high))
        return all(a == b or (isnan(a) and isnan(b)) for a, b in pairs)

    @property
    def sigma(self) -> float:
        """1-sigma noise from the CI; NaN without one."""
        if isnan(self.ci_low) or isnan(self.ci_high):
            return math.nan
        return (self.ci_high - self.ci_low) / (2 * _Z95)


class Baselines:
    """Earlier measurements per key (investigation, subject, metric, device), one per run."""

    def __init__(self, rows: list[dict]):
        self._runs: dict[tuple, list[Measurement]] = {}
        for row in rows:
            self.add(key_of(row), Measurement(row["run_id"], row["value"], row["ci_low"], row["ci_high"],
                                              row.get("quality", "")))

    @classmethod
    def recent(cls, newest_first, keys: set[tuple], current_runs: set[str]) -> "Baselines":
        """The baselines of ``keys`` from rows given newest first (``store.rows_newest_first``),
        read only until each key has ``HISTORY + 1`` runs other than ``current_runs`` (the runs
        being judged): an append to a 1M-row log reads its last runs, not the whole file."""
        kept, runs = [], {key: set() for key in keys}
        for row in newest_first:
            key = key_of(row)
            if key not in runs:
                continue
            kept.append(row)
            if row["run_id"] not in current_runs:
                runs[key].add(row["run_id"])
            if all(len(r) > HISTORY for r in runs.values()):
                break
        return cls(kept[::-1])

    def add(self, key: tuple, m: Measurement) -> None:
        runs = self._runs.setdefault(key, [])
        if runs and runs[-1].run_id == m.run_id and m.run_id:
            runs[-1] = m  # a run that logs a metric twice counts once, with its last value
        else:
            runs.append(m)

    def previous(self, key: tuple, run_id: str) -> tuple[Measurement | None, list[Measurement]]:
        """The last measurement of ``key`` from another run than ``run_id``, and up to
        ``HISTORY`` earlier ones (oldest first, the baseline last)."""
        earlier = [m for m in self._runs.get(key, []) if not run_id or m.run_id != run_id]
        return (earlier[-1] if earlier else None), earlier[-HISTORY:]


def key_of(row: dict) -> tuple:
    return (row["investigation"], row["subject"], row["metric"], row["device"])


def judge(current: Measurement, baseline: Measurement | None, history: list[Measurement], *,
          higher_is_better: bool) -> str:
    """The verdict of ``current`` against ``baseline`` (see the module docstring)."""
    if baseline is None:
        return "no baseline"
    if current.same_figures(baseline):
        return "unchanged"
    if current.quality or baseline.quality:
        return "not enough data"  # a run the machine disturbed says nothing about the code
    sigma = noise(current, baseline, history)
    if isnan(sigma):
        return "not enough data"
    change = relative_change(current.value, baseline.value)
    significant = abs(change) > Z * sigma if sigma > 0 else change != 0
    diff = current.value - baseline.value
    large = abs(diff) >= MIN_EFFECT * abs(baseline.value) if baseline.value != 0 else diff != 0
    if not (significant and large):
        return "within noise"
    return "improved" if (diff > 0) == higher_is_better else "regressed"


def relative_change(value: float, base: float) -> float:
    """log(value / base) for positive numbers (timing noise is multiplicative: a run 10% slower
    and one 10% faster are equally likely), else (value - base) / |base|; inf from a base of 0."""
    if value > 0 and base > 0:
        return math.log(value / base)
    if base == 0:
        return 0.0 if value == 0 else math.inf
    return (value - base) / abs(base)


def noise(current: Measurement, baseline: Measurement, history: list[Measurement]) -> float:
    """1-sigma noise of ``relative_change(current, baseline)``; NaN when it cannot be estimated."""
    if current.exact and baseline.exact:
        return 0.0
    run = _relative_spread([m.value for m in history]) if len(history) >= MIN_HISTORY else math.nan
    own = [_relative_sigma(m) for m in (current, baseline)]
    if any(isnan(s) for s in own):
        return math.nan if isnan(run) else run * math.sqrt(2)
    run = RUN_TO_RUN if isnan(run) else run
    return math.sqrt(own[0] ** 2 + own[1] ** 2 + 2 * run ** 2)


def _relative_sigma(m: Measurement) -> float:
    if isnan(m.sigma):
        return math.nan
    return m.sigma / abs(m.value) if m.value != 0 else (0.0 if m.sigma == 0 else math.inf)


def _relative_spread(values: list[float]) -> float:
    """Standard deviation of log values (all positive), else of values / |their mean|."""
    if all(v > 0 for v in values):
        return _stdev([math.log(v) for v in values])
    scale = abs(sum(values) / len(values))
    return _stdev(values) / scale if scale else math.nan


def _stdev(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def infer_higher_is_better(metric: str, unit: str) -> bool:
    """Rates (a unit per second: ``GB/s``, ``samples/sec``; names with throughput/speedup/util)
    are better high; times, bytes and counts (``syncs/step`` too) are better low. Pass
    ``higher_is_better`` to override."""
    text = f"{metric} {unit}".lower()
    per_second = unit.lower().strip().endswith(("/s", "/sec", "/second"))
    return per_second or any(w in text for w in ("throughput", "speedup", "util", "per_sec", "mfu"))


def isnan(value: Any) -> bool:
    """True for a float NaN (the log's "not measured"); False for anything else, None included."""
    return isinstance(value, float) and math.isnan(value)
