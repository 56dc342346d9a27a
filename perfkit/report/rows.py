"""The headline metrics each investigation writes to the performance log.

``*_rows(result, source...)`` turn a result into perf-log rows (dicts for
``PerfLog.append_many``), each with a 95% CI of the value from the run's own samples: the
profiled steps of a trace (``step_ci``) or an A/B harness's timed calls; exact figures (counted,
or fixed by a seed) get ``ci = (value, value)``. Rows never carry a baseline: the perf log
compares each metric with the previous run of the same investigation, subject and device
(``perfkit.report.perflog.judge``), never with the other arm of this run.
``log_rows(perf_log_path, rows, run_id=...)`` appends them.
"""
from __future__ import annotations

import math
import os
from typing import Iterable

import numpy as np
import pandas as pd

from ..cpus import available_cores, busy, load_average
from ..results import format_number
from ..stats import exact
from ..stats import step_ci
from ..trace.recorded import recorded_machine
from ..trace.steps import full_steps
from .perflog import PerfLog, empty_log, format_delta, format_value


def row(investigation: str, metric: str, value: float, unit: str, *, subject: str, device: str,
        ci: tuple[float, float] | None = None, higher_is_better: bool = False, quality: str = "") -> dict:
    """One perf-log row. ``higher_is_better`` is always written: the log's guess from the
    metric name would read "..._per_step" as a rate. ``quality``: why the value is unreliable."""
    out = {"investigation": investigation, "metric": metric, "value": float(value), "unit": unit,
           "subject": subject, "device": device, "higher_is_better": bool(higher_is_better), "quality": quality}
    if ci is not None and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci):
        out["ci_low"], out["ci_high"] = float(min(ci)), float(max(ci))
    return out


def load_note(load: float | None = None, cores: int | None = None) -> str:
    """"load average 7.6 on 2 cores" when the machine's 1-minute load average (default: now)
    exceeds its cores, else "": timings taken then measure the other load as much as the code,
    so the perf log does not judge them against another run (``perflog.judge``)."""
    load = load_average() if load is None else load
    cores = cores or available_cores()
    return f"load average {load:.1f} on {cores} cores while measuring" if busy(load, cores) else ""


def live_note(subject: str) -> str:
    """The quality note of a live measurement; "" for a trace file (the analyzing machine's load
    does not change what the trace recorded: ``recorded_note`` reads the recording's)."""
    return load_note() if subject.startswith("live ") else ""


def recorded_note(trace) -> str:
    """The quality note of a trace's step times: the load ``perfkit profile`` recorded in it when that
    exceeded the CPUs (``trace.recorded``), else "" (nothing recorded, or a quiet machine)."""
    machine = recorded_machine(trace)
    return load_note(machine.load_1min, machine.cpus) if machine.known else ""


def finite_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows whose value is a finite number (the perf log refuses NaN: "not measured" is not a value)."""
    return [r for r in rows if isinstance(r["value"], (int, float)) and math.isfinite(r["value"])]


def trace_step_rows(investigation: str, trace, subject: str, device: str) -> list[dict]:
    """Median step time (ms) of a trace with its CI over its full steps (partial steps at the
    profiler window's edges left out, as ``diff`` does: an 18 us stub beside 2 ms steps would
    stretch the CI down to 0.018 ms); none without steps."""
    ms = full_steps(trace.steps)["dur_us"] / 1e3
    if ms.empty:
        return []
    return finite_rows([row(investigation, "median_step_ms", ms.median(), "ms", ci=step_ci(ms), subject=subject,
                            device=device, quality=live_note(subject) or recorded_note(trace))])


def ab_rows(investigation: str, ab, names: tuple[str, str], subject: str, device: str) -> list[dict]:
    """Both arms of an A/B timing (median ms per call, CI over its samples) and B's speedup over
    A with the A/B's own CI. Each is compared with the same metric of the previous run, never A
    with B. The arms' absolute times get a quality note when the machine was loaded or their
    medians drifted during the run; the speedup too when the machine was loaded (measured: a
    compile A/B went from 1.05x to 0.59x between two runs at load average 4.4 on 2 cores) or the
    A/B is inconclusive (``ABResult.conclusion``: its timing drifted or spread too far)."""
    a, b = (np.asarray(s, dtype=float) * 1e3 for s in (ab.samples_a, ab.samples_b))
    env = getattr(ab, "environment", {}) or {}
    drift = [w for w in getattr(ab, "warnings", ()) if "absolute times are not reliable" in w]
    load = load_note(env.get("load_avg_1min"), env.get("cpu_count"))
    load = "; ".join(filter(None, [load, getattr(ab, "unreliable", "") and ab.conclusion]))
    note = "; ".join(filter(None, [load, *drift[:1]]))
    base = dict(subject=subject, device=device)
    lo, hi = ab.speedup_ci
    return finite_rows([
        row(investigation, names[1], float(np.median(b)) if b.size else math.nan, "ms", ci=step_ci(b), quality=note,
            **base),
        row(investigation, names[0], float(np.median(a)) if a.size else math.nan, "ms", ci=step_ci(a), quality=note,
            **base),
        row(investigation, "speedup", ab.speedup, "x", higher_is_better=True, ci=(lo, hi), quality=load, **base),
    ])


def log_rows(perf_log_path: str | os.PathLike, rows: Iterable[dict], *, change: str = "",
             run_id: str = "") -> pd.DataFrame:
    """Append ``rows`` (with ``change`` and ``run_id``; "" = a new run id) to the perf log at
    ``perf_log_path`` ("" = the workbook's) in one atomic write; returns them as judged
    (``PerfLog`` columns). No rows (a trace without steps, say): nothing is written and the
    empty frame is returned."""
    rows = [{**r, "change": change, "run_id": run_id} for r in rows]
    return PerfLog(perf_log_path or None).append_many(rows) if rows else empty_log()


def logged_table(logged: pd.DataFrame) -> pd.DataFrame:
    """The rows ``log_rows`` returned as a person reads them: metric, value with its CI, the
    previous run's value, delta and verdict."""
    return pd.DataFrame({
        "metric": logged["metric"],
        "value": [format_value(v, u) for v, u in zip(logged["value"], logged["unit"])],
        "95% CI": [_ci_text(lo, hi) for lo, hi in zip(logged["ci_low"], logged["ci_high"])],
        "previous run": [format_value(v) for v in logged["baseline"]],
        "delta": [format_delta(d) for d in logged["delta_pct"]],
        "verdict": ["REGRESSED" if v == "regressed" else v for v in logged["verdict"]],
        "note": logged["quality"],
    }, columns=["metric", "value", "95% CI", "previous run", "delta", "verdict", "note"])


def _ci_text(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "none"
    return "exact" if low == high else f"{format_number(low)} to {format_number(high)}"


def history(perf_log_path: str | os.PathLike, investigation: str, subject: str) -> pd.DataFrame:
    """Perf-log rows of one investigation and subject (empty when the log does not exist yet)."""
    log = PerfLog(perf_log_path or None).read(investigation, missing_ok=True)
    return log[log["subject"] == subject].reset_index(drop=True)


def trace_ci(subject: str, value: float) -> tuple[float, float] | None:
    # Totals over a trace file are fixed by the file: exact; from a live recording they vary by run.
    return exact(value) if subject.startswith("trace ") else None


def mean_row(investigation: str, metric: str, values: pd.Series, unit: str = "ms", **base) -> dict:
    """The mean of per-step ``values`` with its CI over the steps."""
    return row(investigation, metric, float(values.mean()), unit, ci=step_ci(values, np.mean), **base)
