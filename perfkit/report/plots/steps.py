"""Where a step's time goes (the cpu_bound and sync_points investigations, and the explorer):
the timeline of one step's host threads and GPU streams, the largest rows of an analysis table as
bars, and the per-step split of a ``cpu_bound`` result."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...analysis.ops import HOST_CATEGORIES
from ...errors import ParameterError
from .figure import label, message_figure, new_figure

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
COLORS = {"cpu_op": "#4c72b0", "user_annotation": "#bbbbbb", "cuda_runtime": "#dd8452",
          "cuda_driver": "#dd8452", "kernel": "#55a868", "gpu_memcpy": "#c44e52", "gpu_memset": "#8172b3"}


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
    # An empty analysis table can hold an object-dtype column (no rows to infer from).
    rows = frame.assign(**{value: pd.to_numeric(frame[value], errors="coerce")}).nlargest(top, value)
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
