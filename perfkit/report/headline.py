"""The headline metrics each investigation appends to the performance log.

* ``*_rows(result, ...)``: perf-log rows (dicts for ``PerfLog.append_many``) of each
  investigation, built with ``row`` and ``finite_rows``; ``trace_device(trace)`` names the
  device they were measured on.
* ``log_headline(path, rows)`` appends them (creating the folder).

The notebooks import this module as their one helper namespace (``headline.*``), so it also
re-exports the data sources of ``perfkit.report.sources`` and the read-back paragraphs and
tables of ``perfkit.report.readback``.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..errors import ParameterError
from .readback import (amp_text, compile_text, cpu_bound_text, diff_text, finite, htod_text, leak_text, prose,
                       site_labels, summary_frame, summary_pair, summary_table, sync_text, validation_text)
from .sources import (CPU_TRACES, MODES, ROOT, MLPProblem, check_mode, detect_workload_syncs, find_trace,
                      live_workload, load_or_record, mlp_problem, shipped_traces)
from .verdicts import log_verdict

__all__ = [
    "trace_device", "row", "finite_rows", "trace_rows", "ab_rows", "leak_rows",
    "cpu_bound_rows", "htod_rows", "sync_rows", "compile_rows", "amp_rows", "diff_rows", "validation_rows",
    "log_headline",
    # perfkit.report.sources
    "ROOT", "CPU_TRACES", "MODES", "check_mode", "shipped_traces", "find_trace", "load_or_record", "MLPProblem",
    "mlp_problem", "live_workload", "detect_workload_syncs",
    # perfkit.report.readback
    "site_labels", "summary_table", "summary_pair", "summary_frame", "cpu_bound_text", "htod_text", "sync_text",
    "compile_text", "amp_text", "leak_text", "diff_text", "validation_text", "prose",
]

def trace_device(trace) -> str:
    """"cpu" for a trace without GPU events, else the first GPU's name ("cuda" if unnamed)."""
    if not trace.has_gpu_events:
        return "cpu"
    named = [d.get("name") for d in trace.devices if d.get("name")]
    return named[0] if named else "cuda"


def row(investigation: str, metric: str, value: float, unit: str, *, change: str = "baseline",
        run_id: str = "", device: str = "", higher_is_better: bool = False, **extra: Any) -> dict:
    """One perf-log row (the fields ``PerfLog.append`` takes). ``higher_is_better`` is always
    written: the log's guess from the metric name would read "..._per_step" as a rate."""
    out = {"investigation": investigation, "metric": metric, "value": float(value), "unit": unit,
           "change": change, "run_id": run_id, "higher_is_better": bool(higher_is_better), **extra}
    if device:
        out["device"] = device
    return out


def finite_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows whose value is a finite number (the perf log refuses NaN: "not measured" is not a value)."""
    return [r for r in rows if isinstance(r["value"], (int, float)) and math.isfinite(r["value"])]


def trace_rows(investigation: str, summary: dict, *, change: str = "baseline", run_id: str = "",
               device: str = "") -> list[dict]:
    """Median step time (ms) of a trace summary, when the trace has steps."""
    median = summary["steps"]["median_us"]
    if median is None:
        return []
    return [row(investigation, "median_step_ms", median / 1e3, "ms", change=change, run_id=run_id, device=device)]


def ab_rows(investigation: str, result, metric: str = "time_per_call_ms", *, change: str = "baseline",
            run_id: str = "", device: str = "") -> list[dict]:
    """An A/B result as one row: value = median(B) in ms against baseline = median(A), the
    ratio CI as ci_low/ci_high and the A/B verdict (faster -> improved, slower -> regressed,
    no change -> within noise, insufficient data -> not enough data); plus the speedup."""
    base = dict(change=change, run_id=run_id, device=device or result.environment.get("device", ""))
    ci = {"ci_low": result.ci_low, "ci_high": result.ci_high} if finite(result.ci_low, result.ci_high) else {}
    rows = [row(investigation, metric, result.median_b * 1e3, "ms", baseline=result.median_a * 1e3,
                verdict=log_verdict(result.verdict), **ci, **base)]
    if finite(result.speedup):
        rows.append(row(investigation, "speedup", result.speedup, "x", baseline=1.0, higher_is_better=True,
                        verdict=log_verdict(result.verdict), **base))
    return finite_rows(rows)


def validation_rows(report, *, change: str = "baseline", run_id: str = "") -> list[dict]:
    """1 (pass) or 0 (fail or error) per check of a ``ValidationReport`` that has an expectation
    on this device, so a check that stops passing is flagged "regressed"; skipped and measured
    checks are not logged. Device: the GPU name, or "cpu"."""
    device = report.environment["gpu"] if report.device.startswith("cuda") else "cpu"
    return [row("validation", f"{c.name}_pass", 1.0 if c.status == "pass" else 0.0, "flag", change=change,
                run_id=run_id, device=device, higher_is_better=True)
            for c in report.checks if c.status in ("pass", "fail", "error")]


def leak_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """Growth per 1,000 steps of the series that decided a leak hunt (bytes or objects), and
    1/0 for whether the verdict was "leak"."""
    d = result.decision
    base = dict(change=change, run_id=run_id, device=device or result.device)
    rows = [row("memory_leak", "leak", 1.0 if result.verdict == "leak" else 0.0, "flag", **base)]
    if d is not None:
        rows.append(row("memory_leak", f"{d.series}_per_1000_steps", d.per_1000, d.unit, **base))
    return finite_rows(rows)


def cpu_bound_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """Median step wall time (ms), host busy time per step (ms), GPU busy share (%, only with
    GPU events) and launches per step of a ``cpu_bound`` result."""
    steps, overall = result.steps, result.overall
    if steps.empty:
        return []
    base = dict(change=change, run_id=run_id, device=device)
    rows = [row("cpu_bound", "median_step_ms", float(steps["wall_us"].median()) / 1e3, "ms", **base),
            row("cpu_bound", "host_busy_ms_per_step", overall["host_busy_us"] / overall["steps"] / 1e3, "ms", **base)]
    if result.has_gpu:
        rows += [row("cpu_bound", "gpu_busy_pct", overall["gpu_busy_pct"], "%", higher_is_better=True, **base),
                 row("cpu_bound", "launches_per_step", overall["launches_per_step"], "launches", **base)]
    return finite_rows(rows)


def htod_rows(result, summary: dict, sweep=None, *, change: str = "baseline", run_id: str = "",
              device: str = "") -> list[dict]:
    """Median step (ms), HtoD copy time per step (ms) and pageable HtoD copies per step of a
    trace's ``htod`` result (when it has copies); with a GPU ``htod_sweep`` result, the best
    GB/s per mode at the largest size swept."""
    base = dict(change=change, run_id=run_id, device=device)
    rows = trace_rows("htod", summary, **base)
    frame = result.to_frame()
    h = frame[frame["direction"] == "HtoD"]
    if len(h) and result.n_steps:
        rows += [row("htod", "htod_ms_per_step", h["time_us"].sum() / result.n_steps / 1e3, "ms", **base),
                 row("htod", "pageable_htod_per_step", h.loc[h["memory"] == "pageable", "count"].sum() / result.n_steps,
                     "copies", **base)]
    if sweep is not None and sweep.available:
        table = sweep.to_frame()
        top = table[table["size_bytes"] == table["size_bytes"].max()]
        rows += [row("htod", f"{m}_gbps_at_{int(r['size_bytes'])}B", r["gbps"], "GB/s", higher_is_better=True,
                     **{**base, "device": device or sweep.device}) for m, r in zip(top["mode"], top.to_dict("records"))]
    return finite_rows(rows)


def sync_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "",
              detected=None, detected_steps: int = 0) -> list[dict]:
    """Sync points per step and host time blocked per step (ms) of a ``syncs`` result; with a
    runtime ``detect_syncs`` report over ``detected_steps`` steps, its syncs per step."""
    t = result.total
    base = dict(change=change, run_id=run_id, device=device)
    rows = []
    if t["steps"]:
        rows += [row("sync_points", "syncs_per_step", t["per_step"], "syncs", **base),
                 row("sync_points", "blocked_ms_per_step", t["blocked_us"] / t["steps"] / 1e3, "ms", **base)]
    if detected is not None and detected_steps:
        rows.append(row("sync_points", "detected_syncs_per_step", detected.total / detected_steps, "syncs", **base))
    return finite_rows(rows)


def compile_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """The steady-state A/B (compiled vs eager) as ``ab_rows``, plus compile time (s) and graph breaks."""
    base = dict(change=change, run_id=run_id, device=device or result.device)
    rows = ab_rows("compile_ab", result.timing, "compiled_step_ms", **base)
    rows += [row("compile_ab", "compile_time_s", result.compile_time_s, "s", **base),
             row("compile_ab", "graph_breaks", result.graph_break_count, "breaks", **base)]
    return finite_rows(rows)


def amp_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """The steady-state A/B (autocast vs fp32) as ``ab_rows``, plus the largest relative loss
    difference between the two training curves."""
    base = dict(change=change, run_id=run_id, device=device or result.device)
    rows = ab_rows("amp_regression", result.timing, "amp_step_ms", **base)
    rows.append(row("amp_regression", "loss_max_rel_diff", result.loss_max_rel_diff, "ratio", **base))
    return finite_rows(rows)


def diff_rows(investigation: str, result, *, change: str = "baseline", run_id: str = "",
              device: str = "") -> list[dict]:
    """A trace diff as perf-log rows: B's median step (ms) against A's as baseline, with the
    bootstrap CI of the ratio and the diff's verdict, plus B's host busy time per step (ms)."""
    s = result.step_change
    base = dict(change=change, run_id=run_id, device=device)
    ci = {"ci_low": s["low"], "ci_high": s["high"]} if finite(s["low"], s["high"]) else {}
    rows = []
    if finite(s["median_b_us"], s["median_a_us"]):
        rows.append(row(investigation, "diff_median_step_ms", s["median_b_us"] / 1e3, "ms",
                        baseline=s["median_a_us"] / 1e3, verdict=log_verdict(s["verdict"]),
                        **ci, **base))
    host = result.metrics[result.metrics["metric"] == "host busy per step (us)"]
    if len(host):
        rows.append(row(investigation, "diff_host_busy_ms_per_step", float(host["b"].iloc[0]) / 1e3, "ms",
                        baseline=float(host["a"].iloc[0]) / 1e3, **base))
    return finite_rows(rows)


def log_headline(perf_log_path: str | os.PathLike, rows: Iterable[dict]) -> pd.DataFrame:
    """Append ``rows`` to the perf log at ``perf_log_path`` in one atomic write (its folder
    is created); returns the rows as written (``PerfLog`` columns)."""
    from .perflog import PerfLog

    rows = list(rows)
    if not rows:
        raise ParameterError("log_headline: no rows to append (every headline metric was NaN?)")
    Path(perf_log_path).parent.mkdir(parents=True, exist_ok=True)
    return PerfLog(perf_log_path).append_many(rows)
