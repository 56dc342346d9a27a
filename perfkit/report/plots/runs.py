"""Runs over time: the perf log's values run by run (every investigation's log cell) and the
step times of one ``WorkloadRun``."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...results import format_number
from .figure import label, message_figure, new_figure


def perf_log_trend(log: pd.DataFrame, investigation: str | None = None, *, max_metrics: int = 6,
                   width: float = 8.0):
    """One panel per (investigation, metric, unit, device) of a ``PerfLog.read()`` frame:
    value per run in log order with its CI as an error bar, labelled by run time and change,
    regressed runs in red, improved in green. ``width`` in inches
    (the reports index draws each metric as its own small figure)."""
    rows = log if investigation is None else log[log["investigation"] == investigation]
    if rows.empty:
        return message_figure("Performance log", "the performance log has no rows yet")
    groups = list(rows.groupby(["investigation", "metric", "unit", "device"], sort=True))[:max_metrics]
    fig = new_figure(width, 0.6 + 2.0 * len(groups))
    for ax, (key, g) in zip(np.atleast_1d(fig.subplots(len(groups), 1)), groups):
        _trend_panel(ax, key, g)
    fig.tight_layout()
    return fig


def _trend_panel(ax, key: tuple, rows: pd.DataFrame) -> None:
    x = np.arange(len(rows))
    y = rows["value"].to_numpy(dtype=float)
    ax.plot(x, y, marker="o", color="#4c72b0")
    low, high = rows["ci_low"].to_numpy(dtype=float), rows["ci_high"].to_numpy(dtype=float)
    has = np.isfinite(low) & np.isfinite(high)
    if has.any():  # the interval as measured: a figure may lie outside its CI (a ratio of medians beside the
        # paired CI of the median ratio), which errorbar's lengths cannot draw
        ax.vlines(x[has], low[has], high[has], color="#4c72b0", linewidth=1)
        ax.plot(np.concatenate([x[has], x[has]]), np.concatenate([low[has], high[has]]), "_", color="#4c72b0",
                markersize=6)
    for verdict, color in (("regressed", "#c44e52"), ("improved", "#55a868")):
        hit = (rows["verdict"] == verdict).to_numpy()
        ax.plot(x[hit], rows["value"].to_numpy(dtype=float)[hit], "o", color=color, label=verdict)
    ax.set_xticks(x, [label(f"{_run_time(r)} {c}".strip(), 28) for r, c in zip(rows["run_id"], rows["change"])],
                  rotation=20, ha="right", fontsize=6)
    investigation, metric, unit, device = key
    ax.set_title(label(f"{investigation}: {metric} ({device})", 100), fontsize=9)
    ax.set_ylabel(label(unit, 16))


def _run_time(run_id: str) -> str:
    """"2026-11-23/125501/cpu_bound" -> "11-23 12:55:01": the run, not only its day."""
    parts = str(run_id).split("/")
    day = parts[0][5:] if len(parts[0]) == 10 else parts[0]
    stamp = parts[1] if len(parts) > 1 and parts[1][:6].isdigit() else ""
    return f"{day} {stamp[:2]}:{stamp[2:4]}:{stamp[4:6]}" if stamp else day


# -- workload runs -----------------------------------------------------------------------------

def workload_steps(run, *, title: str | None = None):
    """Wall time of each step of a ``WorkloadRun`` (ms) with its median as a line."""
    frame = run.to_frame()
    fig = new_figure(7.0, 3.0)
    ax = fig.add_subplot()
    ax.plot(frame["step"], frame["step_ms"], marker="o", label="step")
    ax.axhline(run.median_step_ms, color="#c44e52", linestyle="--",
               label=f"median {format_number(run.median_step_ms, 3)} ms")
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms)")
    ax.set_title(label(title or f"{run.workload} on {run.device}", 100))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
