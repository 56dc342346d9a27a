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



def row(investigation: str, metric: str, value: float, unit: str, *, subject: str, device: str,
        ci: tuple[float, float] | None = None, higher_is_better: bool = False, quality: str = "") -> dict:
    """One perf-log row. ``higher_is_better`` is always written: the log's guess from the
    metric name would read "..._per_step" as a rate. ``quality``: why the value is unreliable."""
    out = {"investigation": investigation, "metric": metric, "value": float(value), "unit": unit,
           "subject": subject, "device": device, "higher_is_better": bool(higher_is_better), "quality": quality}
    if ci is not None and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci):
        out["ci_low"], out["ci_high"] = float(min(ci)), float(max(ci))
    return out


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


def load_note(load: float | None = None, cores: int | None = None) -> str:
    """"load average 7.6 on 2 cores" when the machine's 1-minute load average (default: now)
    exceeds its cores, else "": timings taken then measure the other load as much as the code,
    so the perf log does not judge them against another run (``perflog.judge``)."""
    if load is None and hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
    cores = cores or os.cpu_count() or 1
    return f"load average {load:.1f} on {cores} cores while measuring" if load is not None and load > cores else ""


def _live(subject: str) -> str:
    """The quality note of a live measurement; "" for a trace file (the analyzing machine's load
    does not change what the trace recorded)."""
    return load_note() if subject.startswith("live ") else ""


def finite_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows whose value is a finite number (the perf log refuses NaN: "not measured" is not a value)."""
    return [r for r in rows if isinstance(r["value"], (int, float)) and math.isfinite(r["value"])]


def cpu_bound_rows(result, subject: str, device: str) -> list[dict]:
    """Median step wall time (ms), host busy time per step (ms), GPU busy share (%, only with
    GPU events) and kernel launches per step of a ``cpu_bound`` result, CIs over its steps (all
    of them, as its step table shows them); for a torch.compile trace (``result.compile``) also
    ``compile_s``, the compile seconds of the whole trace (exact for a trace file), second when
    the verdict is "compiling" (the verdict card shows the first three rows), else last."""
    steps = result.steps
    if steps.empty:
        return []
    base = dict(subject=subject, device=device, quality=_live(subject))
    ms = steps["wall_us"] / 1e3
    host = steps["host_busy_us"] / 1e3
    rows = [row("cpu_bound", "median_step_ms", ms.median(), "ms", ci=step_ci(ms), **base),
            _mean_row("cpu_bound", "host_busy_ms_per_step", host, **base)]
    if result.has_gpu:
        rows += [row("cpu_bound", "gpu_busy_pct", result.overall["gpu_busy_pct"], "%", higher_is_better=True,
                     ci=step_ci(steps["gpu_busy_pct"], np.mean), **base),
                 _mean_row("cpu_bound", "launches_per_step", steps["launches"], "launches", **base)]
    if result.compile is not None:
        seconds = result.compile["compile_s"]
        compiled = row("cpu_bound", "compile_s", seconds, "s", ci=_trace_ci(subject, seconds), **base)
        rows.insert(1 if result.verdict == "compiling" else len(rows), compiled)
    return finite_rows(rows)


def trace_step_rows(investigation: str, trace, subject: str, device: str) -> list[dict]:
    """Median step time (ms) of a trace with its CI over its full steps (partial steps at the
    profiler window's edges left out, as ``diff`` does: an 18 us stub beside 2 ms steps would
    stretch the CI down to 0.018 ms); none without steps."""
    from ..trace.steps import stub_steps

    steps = trace.steps
    ms = steps.loc[~stub_steps(steps), "dur_us"] / 1e3 if len(steps) else pd.Series(dtype=float)
    if ms.empty:
        return []
    return finite_rows([row(investigation, "median_step_ms", ms.median(), "ms", ci=step_ci(ms), subject=subject,
                            device=device, quality=_live(subject))])


def htod_rows(result, trace, subject: str, device: str, sweep=None) -> list[dict]:
    """Median step (ms), HtoD copy time per step (ms) and pageable HtoD copies per step of a
    trace's ``htod`` result (when it has copies); with a GPU ``htod_sweep`` result, the best GB/s
    per mode at the largest size swept, with its CI over the timed copies."""
    rows = trace_step_rows("htod", trace, subject, device)
    frame = result.to_frame()
    h = frame[frame["direction"] == "HtoD"] if len(frame) else frame
    if len(h) and result.n_steps:
        pageable = h.loc[h["memory"] == "pageable", "count"].sum() / result.n_steps
        rows += [row("htod", "htod_ms_per_step", h["time_us"].sum() / result.n_steps / 1e3, "ms", subject=subject,
                     device=device, ci=_trace_ci(subject, h["time_us"].sum() / result.n_steps / 1e3)),
                 row("htod", "pageable_htod_per_step", pageable, "copies", subject=subject, device=device,
                     ci=_trace_ci(subject, pageable))]
    if sweep is not None and sweep.available:
        rows += sweep_rows(sweep)
    return finite_rows(rows)


def _trace_ci(subject: str, value: float) -> tuple[float, float] | None:
    # Totals over a trace file are fixed by the file: exact; from a live recording they vary by run.
    return exact(value) if subject.startswith("trace ") else None


def sweep_rows(sweep) -> list[dict]:
    """GB/s per mode at the largest size of a GPU ``htod_sweep``, CI over the timed copies."""
    table = sweep.to_frame()
    top = table[table["size_bytes"] == table["size_bytes"].max()]
    size = int(top["size_bytes"].iloc[0])
    subject = f"htod_sweep {size} B"
    raw = {mode: np.asarray(s, dtype=float) for n, mode, s in sweep.samples if n == size}
    out = []
    for rec in top.to_dict("records"):
        seconds = raw.get(rec["mode"], np.array([]))
        ci = step_ci(size / seconds[seconds > 0] / 1e9) if seconds.size else None
        out.append(row("htod", f"{rec['mode']}_gbps", rec["gbps"], "GB/s", higher_is_better=True, ci=ci,
                       subject=subject, device=sweep.device, quality=load_note()))
    return out


def sync_rows(result, trace, subject: str, device: str, *, detected=None, detected_steps: int = 0) -> list[dict]:
    """Sync points per step (host waits on the GPU; on a CPU-only trace the possible ones), host
    time blocked in them per step (ms) and host scalar reads per step (.item()/nonzero that did
    not wait: not sync points) of a ``syncs`` result, CIs over the trace's steps; with a runtime
    ``detect_syncs`` report over ``detected_steps`` steps, its syncs per step (exact: a count of calls).

    The names are new with the GPU-confirmed count (issue 10): the old ``syncs_per_step`` and
    ``blocked_ms_per_step`` counted scalar reads that never waited, so a run judged against them
    would show a drop that is a change of meaning, not of the code."""
    t = result.total
    rows = []
    if t["steps"]:
        base = dict(subject=subject, device=device)
        inside = result.sync_points[result.sync_points["in_steps"]]
        points = _per_step(inside, trace, "blocked_us")
        reads = _per_step(result.host_reads, trace, "blocked_us")
        rows += [row("sync_points", "sync_points_per_step", t["per_step"], "syncs",
                     ci=step_ci(points["count"], np.mean), **base),
                 row("sync_points", "sync_blocked_ms_per_step", t["in_steps"]["blocked_us"] / t["steps"] / 1e3, "ms",
                     ci=step_ci(points["blocked_us"] / 1e3, np.mean), quality=_live(subject), **base),
                 row("sync_points", "host_scalar_reads_per_step", t["host_scalar_reads"] / t["steps"], "reads",
                     ci=step_ci(reads["count"], np.mean), **base)]
    if detected is not None and detected_steps:
        value = detected.total / detected_steps
        rows.append(row("sync_points", "detected_syncs_per_step", value, "syncs", subject=subject, device=device,
                        ci=exact(value)))
    return finite_rows(rows)


def _per_step(events: pd.DataFrame, trace, column: str) -> pd.DataFrame:
    """count and sum of ``column`` of ``events`` per profiler step of ``trace`` (0 for a step
    without events)."""
    steps = trace.steps["step"].tolist() if len(trace.steps) else []
    if events.empty or "step" not in events:
        return pd.DataFrame({"count": [0] * len(steps), column: [0.0] * len(steps)})
    g = events.groupby("step").agg(count=(column, "size"), total=(column, "sum"))
    g = g.reindex(steps, fill_value=0)
    return pd.DataFrame({"count": g["count"].to_numpy(), column: g["total"].to_numpy(dtype=float)})


def ab_rows(investigation: str, ab, names: tuple[str, str], subject: str, device: str) -> list[dict]:
    """Both arms of an A/B timing (median ms per call, CI over its samples) and B's speedup over
    A with the A/B's own CI. Each is compared with the same metric of the previous run, never A
    with B. The arms' absolute times get a quality note when the machine was loaded or their
    medians drifted during the run; the speedup too when the machine was loaded (measured: a
    compile A/B went from 1.05x to 0.59x between two runs at load average 4.4 on 2 cores)."""
    a, b = (np.asarray(s, dtype=float) * 1e3 for s in (ab.samples_a, ab.samples_b))
    env = getattr(ab, "environment", {}) or {}
    drift = [w for w in getattr(ab, "warnings", ()) if "absolute times are not reliable" in w]
    load = load_note(env.get("load_avg_1min"), env.get("cpu_count"))
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


def compile_rows(result, subject: str) -> list[dict]:
    """compiled and eager step time and speedup (``ab_rows``), compile time (s; no CI: judged
    against its history) and graph breaks (exact)."""
    device = result.device
    rows = ab_rows("compile_ab", result.timing, ("eager_step_ms", "compiled_step_ms"), subject, device)
    rows += [row("compile_ab", "compile_time_s", result.compile_time_s, "s", subject=subject, device=device,
                 quality=load_note()),
             row("compile_ab", "graph_breaks", result.graph_break_count, "breaks", subject=subject, device=device,
                 ci=exact(result.graph_break_count))]
    return finite_rows(rows)


def amp_rows(result, subject: str) -> list[dict]:
    """autocast and fp32 step time and speedup (``ab_rows``), and the largest relative loss
    difference between the two training curves (exact: seeded)."""
    rows = ab_rows("amp_regression", result.timing, ("fp32_step_ms", "amp_step_ms"), subject, result.device)
    rows.append(row("amp_regression", "loss_max_rel_diff", result.loss_max_rel_diff, "ratio", subject=subject,
                    device=result.device, ci=exact(result.loss_max_rel_diff)))
    return finite_rows(rows)


def leak_rows(result, subject: str) -> list[dict]:
    """1/0 for a "leak" verdict (exact) and the growth per 1,000 steps of the series that
    decided it, with the fit's CI."""
    d = result.decision
    leak = 1.0 if result.verdict == "leak" else 0.0
    rows = [row("memory_leak", "leak", leak, "flag", subject=subject, device=result.device, ci=exact(leak))]
    if d is not None:
        rows.append(row("memory_leak", f"{d.series}_per_1000_steps", d.per_1000, d.unit, subject=subject,
                        device=result.device, ci=(d.ci_low, d.ci_high)))
    return finite_rows(rows)


def snapshot_rows(source) -> list[dict]:
    """CUDA memory snapshots (``snapshots.load_snapshots``) as rows, exact (fixed by the files).
    One snapshot: its growth within the window and its history's peak (MiB), never a leak flag.
    Several: ``snapshot_leak`` (1/0 for a "leak" verdict of ``snapshot_growth``) and the median
    growth per interval after the first (MiB; the one interval of two snapshots)."""
    base = dict(subject=source.subject, device=source.device)
    if source.single:
        s = source.result
        growth, peak = s.net_growth_bytes / 2**20, s.peak_bytes / 2**20
        return finite_rows([row("memory_leak", "window_growth_mib", growth, "MiB", ci=exact(growth), **base),
                            row("memory_leak", "window_peak_mib", peak, "MiB", ci=exact(peak), **base)])
    g = source.result
    leak = 1.0 if g.verdict == "leak" else 0.0
    later = g.table["growth_bytes"].iloc[2:] if len(g.table) > 2 else g.table["growth_bytes"].iloc[1:]
    per = float(later.median()) / 2**20
    return finite_rows([row("memory_leak", "snapshot_leak", leak, "flag", ci=exact(leak), **base),
                        row("memory_leak", "growth_mib_per_interval", per, "MiB", ci=exact(per), **base)])


def diff_rows(investigation: str, result, after, subject: str, device: str) -> list[dict]:
    """A trace diff as rows: the after trace's median step (ms, CI over its steps) and the step
    ratio after/before with the diff's bootstrap CI."""
    s = result.step_change
    rows = trace_step_rows(investigation, after, subject, device)
    rows.append(row(investigation, "step_ratio_after_before", s["ratio"], "x", subject=subject, device=device,
                    ci=(s["low"], s["high"])))
    return finite_rows(rows)


def validation_rows(report) -> list[dict]:
    """1 (pass) or 0 (fail or error) per check of a ``ValidationReport`` that has an
    expectation on this device (exact), so a check that stops passing is flagged "regressed";
    skipped, measured and inconclusive checks are not logged."""
    device = report.environment["gpu"] if report.device.startswith("cuda") else "cpu"
    subject = f"validate preset={report.preset}"
    return [row("validation", f"{c.name}_pass", 1.0 if c.status == "pass" else 0.0, "flag", subject=subject,
                device=device, higher_is_better=True, ci=exact(1.0 if c.status == "pass" else 0.0))
            for c in report.checks if c.status in ("pass", "fail", "error")]


def step_anatomy_rows(path, gaps, subject: str, device: str) -> list[dict]:
    """Mean step wall time (ms, the step of ``step_anatomy``'s sentence) of a ``critical_path``
    result and, with a GPU timeline (``gpu_gaps`` result), GPU busy (any stream) and idle time per
    step and the compute stream's idle time in each gap class that has any
    (``idle_<class>_ms_per_step``; ``other_stream`` idle overlaps the GPU's busy time, so the classes
    need not sum to the GPU's idle time). Means over the step windows, CIs over them. (Without a
    GPU the path is the main thread's host time, the step itself.)"""
    steps = path.steps
    if steps.empty:
        return []
    base = dict(subject=subject, device=device, quality=_live(subject))
    rows = [_mean_row("step_anatomy", "mean_step_ms", steps["wall_us"] / 1e3, **base)]
    if not gaps.has_gpu:
        return finite_rows(rows)
    g = gaps.steps
    idle = g["wall_us"] - g["gpu_busy_us"]
    rows += [_mean_row("step_anatomy", "gpu_busy_ms_per_step", g["gpu_busy_us"] / 1e3, **base),
             _mean_row("step_anatomy", "gpu_idle_ms_per_step", idle / 1e3, **base)]
    # Only classes with idle time: a class absent from both runs says nothing, and one that
    # appears is new ("no baseline"), not a regression from zero.
    rows += [_mean_row("step_anatomy", f"idle_{c}_ms_per_step", g[f"{c}_us"] / 1e3, **base)
             for c in _gap_classes(g) if g[f"{c}_us"].sum() > 0]
    return finite_rows(rows)


def _gap_classes(steps: pd.DataFrame) -> list[str]:
    from ..analysis.step.gaps import CLASSES

    return [c for c in CLASSES if f"{c}_us" in steps]


def _mean_row(investigation: str, metric: str, values: pd.Series, unit: str = "ms", **base) -> dict:
    """The mean of per-step ``values`` with its CI over the steps."""
    return row(investigation, metric, float(values.mean()), unit, ci=step_ci(values, np.mean), **base)


def ranks_rows(result, subject: str) -> list[dict]:
    """Perf-log rows of a ``ranks`` result (investigation "ranks"), device the ranks' GPU:

    * ``median_step_ms``: median over steps of the median rank's step time, CI over steps;
    * ``peer_wait_ms_per_step``: time the median rank's collectives waited for peers per step
      (mean over steps), CI over steps;
    * ``straggler_excess_pct``: the worst straggling rank's median excess over the median rank's
      own step time (0 with none), CI over its flagged steps;
    * ``straggling_ranks``: how many rank files straggle in at least one step (exact);
    * ``comm_overlap_pct`` (with NCCL/RCCL kernels): communication time hidden under compute,
      % of communication time, CI over steps; higher is better."""
    steps = result.steps
    if steps.empty:
        return []
    from .inputs import ranks_recorded_on

    base = dict(subject=subject, device=ranks_recorded_on(result))
    by_step = steps.groupby("step")
    wall, wait = median_rank(result, "wall_us") / 1e3, median_rank(result, "wait_us") / 1e3
    rows = [row("ranks", "median_step_ms", float(wall.median()), "ms", ci=step_ci(wall), **base),
            _mean_row("ranks", "peer_wait_ms_per_step", wait, **base), _straggler_row(result, base),
            row("ranks", "straggling_ranks", float(len(result.straggling_ranks)), "ranks",
                ci=exact(len(result.straggling_ranks)), **base)]
    comm = by_step["comm_us"].sum()
    if comm.sum() > 0:
        share = 100.0 * by_step["overlap_us"].sum() / comm.where(comm > 0)
        overlap = 100.0 * float(steps["overlap_us"].sum() / steps["comm_us"].sum())
        rows.append(row("ranks", "comm_overlap_pct", overlap, "%", ci=step_ci(share.dropna(), np.mean),
                        higher_is_better=True, **base))
    return finite_rows(rows)


def median_rank(result, column: str) -> pd.Series:
    """``column`` of a ``ranks`` result's median rank, per step: the median over rank files."""
    return result.steps.groupby("step")[column].median()


def _straggler_row(result, base: dict) -> dict:
    worst = result.straggling_ranks.sort_values("excess_pct", ascending=False).head(1)
    if worst.empty:
        return row("ranks", "straggler_excess_pct", 0.0, "%", ci=exact(0.0), **base)
    flagged = result.stragglers[result.stragglers["file"] == worst["file"].iloc[0]]["excess_pct"]
    return row("ranks", "straggler_excess_pct", float(worst["excess_pct"].iloc[0]), "%", ci=step_ci(flagged),
               **base)


def log_rows(perf_log_path: str | os.PathLike, rows: Iterable[dict], *, change: str = "",
             run_id: str = "") -> pd.DataFrame:
    """Append ``rows`` (with ``change`` and ``run_id``; "" = a new run id) to the perf log at
    ``perf_log_path`` ("" = the workbook's) in one atomic write; returns them as judged
    (``PerfLog`` columns). No rows (a trace without steps, say): nothing is written and the
    empty frame is returned."""
    from .perflog import PerfLog, empty_log

    rows = [{**r, "change": change, "run_id": run_id} for r in rows]
    return PerfLog(perf_log_path or None).append_many(rows) if rows else empty_log()


def logged_table(logged: pd.DataFrame) -> pd.DataFrame:
    """The rows ``log_rows`` returned as a person reads them: metric, value with its CI, the
    previous run's value, delta and verdict."""
    from .perflog import format_delta, format_value

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
    from ..results import format_number

    if not (math.isfinite(low) and math.isfinite(high)):
        return "none"
    return "exact" if low == high else f"{format_number(low)} to {format_number(high)}"


def history(perf_log_path: str | os.PathLike, investigation: str, subject: str) -> pd.DataFrame:
    """Perf-log rows of one investigation and subject (empty when the log does not exist yet)."""
    from .perflog import PerfLog

    log = PerfLog(perf_log_path or None).read(investigation, missing_ok=True)
    return log[log["subject"] == subject].reset_index(drop=True)
