"""Figures for the investigation notebooks and reports: each function takes a result (or a
``Trace``) and returns a ``matplotlib.figure.Figure``.

Figures are built with ``Figure`` + the Agg canvas, never through ``pyplot``: nothing is
registered globally, so batch runs do not accumulate open figures and the caller's backend
is untouched. In a notebook, ``%matplotlib inline`` then ``display(fig)`` shows them.
Functions only lay out numbers that a tested perfkit function computed; GPU-only figures
draw a "no GPU: <reason>" panel instead of failing. Names from traces are drawn as literal
text (a ``$`` does not start mathtext).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ParameterError

__all__ = [
    "step_timeline", "breakdown", "step_breakdown", "copy_bandwidth", "copy_kinds", "ab_distribution",
    "loss_curves", "diff_breakdown", "memory_growth", "monitor_timeline", "perf_log_trend", "workload_steps",
    "message_figure", "no_gpu_figure", "figure_png",
]

HOST_CATEGORIES = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
COLORS = {"cpu_op": "#4c72b0", "user_annotation": "#bbbbbb", "cuda_runtime": "#dd8452",
          "cuda_driver": "#dd8452", "kernel": "#55a868", "gpu_memcpy": "#c44e52", "gpu_memset": "#8172b3"}
_LABEL_CHARS = 48


# -- shared layout helpers ---------------------------------------------------------------------

def new_figure(width: float = 8.0, height: float = 4.0):
    """A pyplot-free Figure with an Agg canvas attached (savefig works in any backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=90)
    FigureCanvasAgg(fig)
    return fig


def label(text: Any, limit: int = _LABEL_CHARS) -> str:
    """A trace-supplied name as plain matplotlib text: ``$`` escaped, long names shortened."""
    s = str(text)
    s = s if len(s) <= limit else s[: limit - 1] + "\u2026"
    return s.replace("$", r"\$")


def message_figure(title: str, message: str):
    """A figure that only says something ("no GPU: ...", "no steps in this trace")."""
    fig = new_figure(6.0, 1.6)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(label(title, 120))
    ax.text(0.5, 0.5, label(message, 200), ha="center", va="center", wrap=True, transform=ax.transAxes)
    return fig


def no_gpu_figure(reason: str, title: str = "GPU figure"):
    """The figure GPU-only plots return without a GPU: the text "no GPU: <reason>"."""
    return message_figure(title, f"no GPU: {reason}")


def figure_png(fig) -> bytes:
    """The figure as PNG bytes (for HTML reports: ``perfkit.report.html.png_img``)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


# -- trace timeline ----------------------------------------------------------------------------

def step_timeline(trace, step: int | None = None, *, rank: int | None = None, max_lanes: int = 16):
    """Host ops per thread lane and GPU kernels/copies per stream lane over one step window.

    ``step`` is a profiler step number (``trace.steps["step"]``), default the first step; a
    trace with no steps shows its whole time range. x is milliseconds from the window start.
    Host lanes are (pid, tid) with cpu_op / user_annotation / runtime events; GPU lanes are
    (device, stream) with kernels, memcpys and memsets; at most ``max_lanes`` busiest lanes of
    each kind. A trace without GPU events gets a "no GPU events" lane. Raises ParameterError
    for a step the trace does not have.
    """
    start, end, title = _window(trace, step, rank)
    ev = _in_window(trace.events, start, end, rank)
    host = _lanes(ev[ev["cat"].isin(HOST_CATEGORIES) & ~_is_step_marker(ev)], ("pid", "tid"), "thread", max_lanes)
    gpu = _lanes(ev[ev["cat"].isin(DEVICE_CATEGORIES)], ("device", "stream"), "stream", max_lanes)
    lanes = host + (gpu or [("GPU: no GPU events", ev.iloc[:0])])
    fig = new_figure(10.0, 1.2 + 0.35 * len(lanes))
    ax = fig.add_subplot()
    for y, (_, rows) in enumerate(lanes):
        _draw_lane(ax, rows, y, start)
    _finish_timeline(ax, lanes, title, (end - start) / 1e3, gpu_missing=not gpu)
    fig.tight_layout()
    return fig


def _window(trace, step, rank) -> tuple[float, float, str]:
    steps = trace.steps if rank is None else trace.steps[trace.steps["rank"] == rank]
    if step is None and len(steps):
        step = int(steps["step"].iloc[0])
    if step is None:
        ev = trace.events[trace.events["ph"] == "X"]
        return float(ev["ts_us"].min()), float((ev["ts_us"] + ev["dur_us"]).max()), "whole trace (no steps)"
    row = steps[steps["step"] == step]
    if row.empty:
        have = ", ".join(str(s) for s in steps["step"].tolist()[:20]) or "none"
        raise ParameterError(f"step_timeline: step={step} is not in this trace; steps: {have}")
    return float(row["start_us"].iloc[0]), float(row["end_us"].iloc[0]), f"step {step}"


def _in_window(events: pd.DataFrame, start: float, end: float, rank) -> pd.DataFrame:
    ev = events[(events["ph"] == "X") & (events["ts_us"] < end) & (events["ts_us"] + events["dur_us"] > start)]
    return ev if rank is None else ev[ev["rank"] == rank]


def _is_step_marker(ev: pd.DataFrame) -> pd.Series:
    return ev["name"].astype(str).str.startswith("ProfilerStep#")


def _lanes(ev: pd.DataFrame, keys: tuple[str, str], kind: str, max_lanes: int) -> list:
    if ev.empty:
        return []
    groups = sorted(ev.groupby(list(keys), observed=True), key=lambda g: -g[1]["dur_us"].sum())
    return [(f"{kind} {label(k[0], 12)}:{label(k[1], 16)}", rows) for k, rows in groups[:max_lanes]]


def _draw_lane(ax, rows: pd.DataFrame, y: int, origin: float) -> None:
    for cat, part in rows.groupby("cat", observed=True):
        spans = list(zip((part["ts_us"] - origin) / 1e3, part["dur_us"] / 1e3))
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=COLORS.get(str(cat), "#999999"),
                       alpha=0.6, label=str(cat))


def _finish_timeline(ax, lanes, title: str, width_ms: float, gpu_missing: bool) -> None:
    ax.set_yticks(range(len(lanes)), [name for name, _ in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max(width_ms, 1e-3))
    ax.set_xlabel("time from window start (ms)")
    ax.set_title(f"Timeline, {title}: host threads and GPU streams")
    if gpu_missing:
        ax.text(0.5, len(lanes) - 1, "no GPU events in this trace", ha="center", va="center",
                transform=ax.get_yaxis_transform(), fontsize=8, color="#666666")
    handles = {h.get_label(): h for h in ax.collections}
    if handles:
        ax.legend(handles.values(), handles.keys(), fontsize=7, loc="upper right")


# -- breakdowns --------------------------------------------------------------------------------

def breakdown(frame: pd.DataFrame, *, name: str = "name", value: str = "total_us", top: int = 15,
              title: str = "Top ops by time", unit: str = "us"):
    """Horizontal bars of the ``top`` largest ``value`` per ``name`` in ``frame`` (a results
    table, e.g. an analysis's op or kernel table), largest on top. Raises ParameterError when
    a column is missing."""
    missing = [c for c in (name, value) if c not in frame.columns]
    if missing:
        raise ParameterError(f"breakdown: frame lacks column(s) {missing}; it has {list(frame.columns)}")
    rows = frame.nlargest(top, value)
    fig = new_figure(8.0, 1.0 + 0.3 * max(len(rows), 1))
    ax = fig.add_subplot()
    if rows.empty:
        ax.text(0.5, 0.5, "no rows", ha="center", va="center", transform=ax.transAxes)
    ax.barh(range(len(rows)), rows[value].to_numpy(dtype=float), color="#4c72b0")
    ax.set_yticks(range(len(rows)), [label(n) for n in rows[name]], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"{value} ({unit})")
    ax.set_title(label(title, 100))
    fig.tight_layout()
    return fig


def step_breakdown(result, *, title: str = "Where each step's wall time went"):
    """Per step of a ``cpu_bound`` result: host time stacked as DataLoader / syncs / other
    host work beside the GPU busy time, against the step's wall time (ms)."""
    steps = result.to_frame()
    if steps.empty:
        return message_figure(title, "no profiler steps in this trace")
    fig = new_figure(9.0, 1.8 + 0.45 * len(steps))
    ax = fig.add_subplot()
    y = np.arange(len(steps))
    left = np.zeros(len(steps))
    for col, color in (("dataloader_us", "#8172b3"), ("sync_us", "#c44e52"), ("host_other_us", "#4c72b0")):
        width = steps[col].to_numpy(dtype=float) / 1e3
        ax.barh(y - 0.2, width, 0.38, left=left, color=color, label=f"host: {col.removesuffix('_us')}")
        left += width
    ax.barh(y + 0.2, steps["gpu_busy_us"].to_numpy(dtype=float) / 1e3, 0.38, color="#55a868", label="GPU busy")
    ax.plot(steps["wall_us"].to_numpy(dtype=float) / 1e3, y, "|", markersize=18, color="#222222", label="wall")
    ax.set_yticks(y, [f"rank {r} step {s}" for r, s in zip(steps["rank"], steps["step"])], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(f"{title}: {result.verdict}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


# -- copies ------------------------------------------------------------------------------------

def copy_bandwidth(result, *, title: str = "Host-to-device copy bandwidth"):
    """GB/s versus copy size (log2 axis), one line per mode, from an ``htod_sweep`` result.
    Without a GPU (``result.available`` False) the figure says "no GPU: <reason>"."""
    if not result.available:
        return no_gpu_figure(result.reason.removeprefix("no GPU: "), title)
    frame = result.to_frame()
    fig = new_figure(7.0, 3.6)
    ax = fig.add_subplot()
    for mode, rows in frame.groupby("mode", sort=False):
        ax.plot(rows["size_bytes"].to_numpy(dtype=float), rows["gbps"].to_numpy(dtype=float), marker="o",
                label=label(mode))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("copy size (bytes)")
    ax.set_ylabel("GB/s (1e9 bytes/s)")
    ax.set_title(f"{title} on {label(result.device)}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def copy_kinds(result, *, title: str = "Host-device copies in the trace"):
    """Copy time (ms) and achieved GB/s per (direction, memory kind) of a trace ``htod``
    result. A trace without copies gives the "no GPU" figure with the reason."""
    frame = result.to_frame()
    if frame.empty:
        reason = next((w for w in result.warnings if "GPU" in w), "the trace has no GPU copies")
        return no_gpu_figure(reason.removeprefix("no GPU events: "), title)
    names = [f"{d} {m}" for d, m in zip(frame["direction"], frame["memory"])]
    fig = new_figure(9.0, 3.2)
    left, right = fig.subplots(1, 2)
    left.bar(names, frame["time_us"].to_numpy(dtype=float) / 1e3, color="#c44e52")
    left.set_ylabel("copy time (ms)")
    right.bar(names, frame["gb_per_s"].to_numpy(dtype=float), color="#4c72b0")
    right.set_ylabel("GB/s (1e9 bytes/s)")
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


# -- A/B ---------------------------------------------------------------------------------------

def ab_distribution(result, *, title: str | None = None):
    """Left: every sample of both sides (violin + strip, ms per call). Right: the ratio
    median(B)/median(A) with its confidence interval against 1 (no change)."""
    import seaborn as sns

    frame = result.to_frame().assign(ms=lambda f: f["seconds"] * 1e3)
    fig = new_figure(9.0, 3.6)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]})
    if len(frame):
        order = list(result.labels)
        sns.violinplot(data=frame, x="side", y="ms", order=order, ax=left, inner=None, cut=0, color="#dddddd")
        sns.stripplot(data=frame, x="side", y="ms", order=order, ax=left, size=3, jitter=0.2)
    left.set_ylabel("time per call (ms)")
    left.set_xlabel("")
    left.set_title(label(title or f"{result.labels[1]} vs {result.labels[0]}: {result.verdict}", 100))
    _ratio_panel(right, result)
    fig.tight_layout()
    return fig


def _ratio_panel(ax, result) -> None:
    a, b = result.labels
    ax.axhline(1.0, color="#888888", linestyle="--", linewidth=1)
    if math.isfinite(result.ratio):
        low, high = result.ci_low, result.ci_high
        yerr = [[result.ratio - low], [high - result.ratio]] if math.isfinite(low) and math.isfinite(high) else None
        ax.errorbar([0], [result.ratio], yerr=yerr, fmt="o", capsize=6, color="#c44e52")
    else:
        ax.text(0.5, 0.5, "no ratio\n(not enough data)", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([0], [label(f"{b}/{a}", 24)])
    ax.set_ylabel("time ratio (CI)")
    ax.set_title(f"ratio {result.ratio:.3g}", fontsize=9)


def loss_curves(result, *, title: str | None = None):
    """Loss per training step of both arms of an ``amp_ab`` result (fp32 and autocast) and
    their relative difference."""
    frame = result.to_frame()
    if frame.empty:
        return message_figure("Loss curves", "no training steps were run")
    fig = new_figure(9.0, 3.2)
    left, right = fig.subplots(1, 2)
    left.plot(frame["step"], frame["loss_fp32"], marker="o", markersize=3, label="fp32")
    left.plot(frame["step"], frame["loss_amp"], marker="x", markersize=3, label=f"{result.dtype} autocast")
    left.set_xlabel("step")
    left.set_ylabel("loss")
    left.legend(fontsize=7)
    right.plot(frame["step"], frame["rel_diff"], color="#c44e52")
    right.set_xlabel("step")
    right.set_ylabel("|loss_amp - loss_fp32| / |loss_fp32|")
    fig.suptitle(label(title or f"Training curves, fp32 vs {result.dtype} autocast on {result.device}", 100))
    fig.tight_layout()
    return fig


def diff_breakdown(result, *, top: int = 12, title: str = "Per-step time change, B - A"):
    """The ops and kernels of a trace ``diff`` whose per-step time moved most (us per step,
    B minus A): red bars got slower, green faster."""
    tables = [("op", result.ops), ("kernel", result.kernels)]
    rows = pd.concat([t.assign(name=[f"{kind}: {n}" for n in t["name"]]) for kind, t in tables if len(t)]) \
        if any(len(t) for _, t in tables) else pd.DataFrame(columns=["name", "delta_per_step_us"])
    rows = rows.dropna(subset=["delta_per_step_us"])
    rows = rows.loc[rows["delta_per_step_us"].abs().sort_values(ascending=False).index[:top]]
    fig = new_figure(8.0, 1.2 + 0.3 * max(len(rows), 1))
    ax = fig.add_subplot()
    if rows.empty:
        ax.text(0.5, 0.5, "no ops or kernels in either trace", ha="center", va="center", transform=ax.transAxes)
    delta = rows["delta_per_step_us"].to_numpy(dtype=float)
    ax.barh(range(len(rows)), delta, color=["#c44e52" if d > 0 else "#55a868" for d in delta])
    ax.set_yticks(range(len(rows)), [label(n) for n in rows["name"]], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="#888888", linewidth=1)
    ax.set_xlabel("change in time per step (us)")
    ax.set_title(label(title, 100))
    fig.tight_layout()
    return fig


# -- memory ------------------------------------------------------------------------------------

def memory_growth(result, series: tuple[str, ...] = ("tracemalloc_bytes", "rss_bytes", "objects",
                                                     "cuda_allocated_bytes")):
    """One panel per measured leak series: samples against step and the least-squares line
    with the slope ``hunt_leak`` fitted (drawn through the samples' mean point, where the
    least-squares line passes). Titles give growth per 1,000 steps and its state."""
    samples = result.to_frame()
    present = [s for s in series if s in samples and samples[s].notna().any() and result.series(s)]
    if not present:
        return message_figure("Memory growth", "no memory series were measured")
    fig = new_figure(4.0 * len(present), 3.2)
    for ax, name in zip(np.atleast_1d(fig.subplots(1, len(present))), present):
        _growth_panel(ax, samples, result.series(name))
    fig.suptitle(f"Leak hunt: {result.verdict} (decided by {result.decided_by})")
    fig.tight_layout()
    return fig


def _growth_panel(ax, samples: pd.DataFrame, growth) -> None:
    rows = samples[["step", growth.series]].dropna()
    x, y = rows["step"].to_numpy(dtype=float), rows[growth.series].to_numpy(dtype=float)
    scale, unit = (1024.0, "KiB") if growth.unit == "bytes" else (1.0, growth.unit)
    ax.plot(x, y / scale, "o", markersize=3, label="samples")
    if len(x) and math.isfinite(growth.per_1000):
        line = y.mean() + growth.per_1000 / 1000 * (x - x.mean())
        ax.plot(x, line / scale, "-", color="#c44e52", label="fit")
    ax.set_xlabel("step")
    ax.set_ylabel(f"{growth.series} ({unit})")
    ax.set_title(f"{growth.per_1000 / scale:+,.3g} {unit}/1k steps ({growth.state})", fontsize=9)
    ax.legend(fontsize=7)


# -- system monitor ----------------------------------------------------------------------------

def monitor_timeline(result, *, columns: tuple[str, ...] | None = None, title: str = "System monitor"):
    """One stacked panel per sampled metric of a ``MonitorResult`` (CPU %, RSS in MiB, GPU
    util/memory/power per GPU) against seconds since start; all-NaN columns are skipped.
    Without GPU data the title says "no GPU: <reason>"."""
    frame = result.to_frame()
    cols = [c for c in (columns or frame.columns) if c != "time_s" and c in frame and _numeric(frame, c)]
    if not result.gpu_available:
        title = f"{title} (no GPU: {result.gpu_reason})"
    if frame.empty or not cols:
        return message_figure(title, "no monitor samples")
    fig = new_figure(8.0, 1.0 + 1.3 * len(cols))
    axes = np.atleast_1d(fig.subplots(len(cols), 1, sharex=True))
    for ax, col in zip(axes, cols):
        scale, name = (2.0**20, col.replace("_bytes", " (MiB)")) if col.endswith("_bytes") else (1.0, col)
        ax.plot(frame["time_s"].to_numpy(dtype=float), frame[col].to_numpy(dtype=float) / scale, linewidth=1)
        ax.set_ylabel(label(name, 24), fontsize=7)
    axes[-1].set_xlabel("time since start (s)")
    axes[0].set_title(label(title, 120), fontsize=9)
    fig.tight_layout()
    return fig


def _numeric(frame: pd.DataFrame, col: str) -> bool:
    return pd.api.types.is_numeric_dtype(frame[col]) and frame[col].notna().any()


# -- perf log ----------------------------------------------------------------------------------

def perf_log_trend(log: pd.DataFrame, investigation: str | None = None, *, max_metrics: int = 6):
    """One panel per (investigation, metric, unit, device) of a ``PerfLog.read()`` frame:
    value per run in log order, regressed runs in red, improved in green."""
    rows = log if investigation is None else log[log["investigation"] == investigation]
    if rows.empty:
        return message_figure("Performance log", "the performance log has no rows yet")
    groups = list(rows.groupby(["investigation", "metric", "unit", "device"], sort=True))[:max_metrics]
    fig = new_figure(8.0, 0.6 + 2.0 * len(groups))
    for ax, (key, g) in zip(np.atleast_1d(fig.subplots(len(groups), 1)), groups):
        _trend_panel(ax, key, g)
    fig.tight_layout()
    return fig


def _trend_panel(ax, key: tuple, rows: pd.DataFrame) -> None:
    x = np.arange(len(rows))
    ax.plot(x, rows["value"].to_numpy(dtype=float), marker="o", color="#4c72b0")
    for verdict, color in (("regressed", "#c44e52"), ("improved", "#55a868")):
        hit = (rows["verdict"] == verdict).to_numpy()
        ax.plot(x[hit], rows["value"].to_numpy(dtype=float)[hit], "o", color=color, label=verdict)
    ax.set_xticks(x, [label(f"{d} {c}", 28) for d, c in zip(rows["date"], rows["change"])], rotation=20,
                  ha="right", fontsize=6)
    investigation, metric, unit, device = key
    ax.set_title(label(f"{investigation}: {metric} ({device})", 100), fontsize=9)
    ax.set_ylabel(label(unit, 16))


# -- workload runs -----------------------------------------------------------------------------

def workload_steps(run, *, title: str | None = None):
    """Wall time of each step of a ``WorkloadRun`` (ms) with its median as a line."""
    frame = run.to_frame()
    fig = new_figure(7.0, 3.0)
    ax = fig.add_subplot()
    ax.plot(frame["step"], frame["step_ms"], marker="o", label="step")
    ax.axhline(run.median_step_ms, color="#c44e52", linestyle="--", label=f"median {run.median_step_ms:.3g} ms")
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms)")
    ax.set_title(label(title or f"{run.workload} on {run.device}", 100))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
