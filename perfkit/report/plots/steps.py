"""Where a step's time goes (the cpu_bound and sync_points investigations, and the explorer):
the timeline of one step's host threads and GPU streams, the largest rows of an analysis table as
bars, the per-step split of a ``cpu_bound`` result, and the step each fix of a ``whatif`` result buys."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...analysis.host_ops import HOST_CATEGORIES
from ...analysis.step.rules import HOST_AHEAD_MIN_US
from ...errors import ParameterError
from ...results import format_number
from .figure import label, message_figure, new_figure, plain_ticks

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
COLORS = {"cpu_op": "#4c72b0", "user_annotation": "#bbbbbb", "cuda_runtime": "#dd8452",
          "cuda_driver": "#dd8452", "kernel": "#55a868", "gpu_memcpy": "#c44e52", "gpu_memset": "#8172b3"}


def step_timeline(trace, step: int | None = None, *, rank: int | None = None, max_lanes: int = 16):
    """Host ops per thread lane and GPU kernels/copies per stream lane over one step window.

    ``step`` is a profiler step number (``trace.steps["step"]``), default the first step; a
    trace with no steps shows its whole time range. x is milliseconds from the window start.
    Host lanes are (pid, tid) with cpu_op / user_annotation / runtime events; GPU lanes are
    (device, stream) with kernels, memcpys and memsets; at most ``max_lanes`` busiest lanes of
    each kind. A trace without GPU events gets host lanes only, and its title says "no GPU
    events in this trace". Raises ParameterError for a step the trace does not have.
    """
    start, end, title = _window(trace, step, rank)
    ev = _in_window(trace.events, start, end, rank)
    host = _lanes(ev[ev["cat"].isin(HOST_CATEGORIES) & ~_is_step_marker(ev)], ("pid", "tid"), "thread", max_lanes)
    gpu = _lanes(ev[ev["cat"].isin(DEVICE_CATEGORIES)], ("device", "stream"), "stream", max_lanes)
    lanes = host + gpu
    fig = new_figure(10.0, 1.4 + 0.35 * max(len(lanes), 1))
    ax = fig.add_subplot()
    for y, (_, rows) in enumerate(lanes):
        _draw_lane(ax, rows, y, start)
    what = "host threads and GPU streams" if trace.has_gpu_events else "host threads (no GPU events in this trace)"
    _finish_timeline(ax, lanes, f"Timeline, {title}: {what}", (end - start) / 1e3)
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


def _finish_timeline(ax, lanes, title: str, width_ms: float) -> None:
    ax.set_yticks(range(len(lanes)), [name for name, _ in lanes], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max(width_ms, 1e-3))
    ax.set_xlabel("time from window start (ms)")
    ax.set_title(label(title, 120))
    handles = {h.get_label(): h for h in ax.collections}
    if handles:  # outside the lanes, so it hides no event
        ax.legend(handles.values(), handles.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))


# -- breakdowns --------------------------------------------------------------------------------

def breakdown(frame: pd.DataFrame, *, name: str = "name", value: str = "total_us", top: int = 15,
              title: str = "Top ops by time", unit: str = "us", label_chars: int = 48):
    """Horizontal bars of the ``top`` largest ``value`` per ``name`` in ``frame`` (a results
    table, e.g. an analysis's op or kernel table), largest on top; names cut to ``label_chars``.
    Raises ParameterError when a column is missing."""
    missing = [c for c in (name, value) if c not in frame.columns]
    if missing:
        raise ParameterError(f"breakdown: frame lacks column(s) {missing}; it has {list(frame.columns)}")
    # An empty analysis table can hold an object-dtype column (no rows to infer from).
    rows = frame.assign(**{value: pd.to_numeric(frame[value], errors="coerce")}).nlargest(top, value)
    fig = new_figure(8.0 + max(label_chars - 48, 0) / 16, 1.0 + 0.3 * max(len(rows), 1))
    ax = fig.add_subplot()
    if rows.empty:
        ax.text(0.5, 0.5, "no rows", ha="center", va="center", transform=ax.transAxes)
    ax.barh(range(len(rows)), rows[value].to_numpy(dtype=float), color="#4c72b0")
    ax.set_yticks(range(len(rows)), [label(n, label_chars) for n in rows[name]], fontsize=7)
    ax.invert_yaxis()
    plain_ticks(ax.xaxis)  # "12,000,000", not an offset ("1.2 1e7")
    ax.set_xlabel(f"{value} ({unit})")
    ax.set_title(label(title, 100))
    fig.tight_layout()
    return fig


# Host layers of a cpu_bound step, in the order cpu_bound peels them off (disjoint: they add up to
# host_busy_us), each with its colour.
HOST_LAYERS = (("dataloader_us", "DataLoader", "#8172b3"), ("compile_us", "compile", "#937860"),
               ("sync_us", "syncs", "#c44e52"), ("host_other_us", "other host work", "#4c72b0"))


def step_breakdown(result, *, title: str = "Where each step's wall time went"):
    """Per step of a ``cpu_bound`` result: host time stacked as DataLoader / compile / syncs /
    other host work (``HOST_LAYERS``: they add up to ``host_busy_us``) beside the GPU busy time,
    against the step's wall time (ms). A trace without GPU events gets host bars only, and the
    title says so."""
    steps = result.to_frame()
    if steps.empty:
        return message_figure(title, "no profiler steps in this trace")
    fig = new_figure(9.0, 1.8 + 0.45 * len(steps))
    ax = fig.add_subplot()
    y = np.arange(len(steps))
    offset, height = (0.2, 0.38) if result.has_gpu else (0.0, 0.6)
    left = np.zeros(len(steps))
    for col, name, color in HOST_LAYERS:
        width = steps[col].to_numpy(dtype=float) / 1e3
        ax.barh(y - offset, width, height, left=left, color=color, label=f"host: {name}")
        left += width
    if result.has_gpu:
        ax.barh(y + offset, steps["gpu_busy_us"].to_numpy(dtype=float) / 1e3, height, color="#55a868",
                label="GPU busy")
    ax.plot(steps["wall_us"].to_numpy(dtype=float) / 1e3, y, "|", markersize=18, color="#222222", label="wall")
    ranks = steps["rank"].nunique() > 1
    ax.set_yticks(y, [f"rank {r} step {s}" if ranks else f"step {s}" for r, s in zip(steps["rank"], steps["step"])],
                  fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(f"{title}: {result.verdict}" + ("" if result.has_gpu else " (no GPU events: host time only)"))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def queue_delay(result, *, bins: int = 40, title: str = "Launch-to-kernel delay"):
    """Histogram of the launch-to-kernel-start delay (ms) of every kernel launch of a
    ``cpu_bound`` result (``result.launches["queue_delay_us"]``), with its median, the
    "host ahead" threshold (``host_ahead_share`` of the median step) and the median step itself
    as vertical lines: delays near the step length mean the host runs that far ahead of the GPU.
    A trace without GPU events, or without linked launches, gets a figure that says so."""
    if not result.has_gpu:
        return message_figure(title, "no GPU: the trace has no GPU events, so no launch reaches a kernel")
    delays = result.launches["queue_delay_us"].dropna().to_numpy(dtype=float) / 1e3
    if not len(delays):
        return message_figure(title, "no kernel launch in a step is linked to its kernel (no correlation ids)")
    o = result.overall
    step_ms = o["wall_us"] / max(o["steps"], 1) / 1e3
    share = result.evidence.get("threshold_host_ahead_share", float("nan"))
    fig = new_figure(9.0, 3.4)
    ax = fig.add_subplot()
    ax.hist(delays, bins=np.linspace(0.0, max(delays.max(), step_ms) * 1.02, bins + 1), color="#4c72b0")
    for x, style, name in ((float(np.median(delays)), "-", f"median delay {format_number(np.median(delays), 3)} ms"),
                           (max(share * step_ms, HOST_AHEAD_MIN_US / 1e3), "--",
                            f"host-ahead threshold ({share:.0%} of step, >= {HOST_AHEAD_MIN_US:g} us)"),
                           (step_ms, ":", f"mean step {format_number(step_ms, 3)} ms")):
        ax.axvline(x, linestyle=style, color="#c44e52" if style == "-" else "#222222", label=label(name, 80))
    ax.set_xlabel("delay from launch call to kernel start (ms)")
    ax.set_ylabel("kernel launches")
    ax.set_title(label(f"{title}: {len(delays):,} launches, {result.verdict}", 100))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fix_steps(w, *, title: str = "The step each fix buys (replayed)"):
    """The median step each fix of a ``whatif`` result predicts (ms), the fixes that apply only, against the
    measured median step (a vertical line); a one-time cost (``skip_warmup``, ``skip_compile``) is drawn on the
    mean step, with its own line. A trace nothing could be replayed on gets a figure that says why."""
    fixes = [p for p in w.fixes if p.applies]
    if w.replay.steps.empty or not fixes:
        return message_figure(title, w.rule if w.replay.steps.empty else "no fix perfkit models applies here")
    fig = new_figure(9.0, 1.6 + 0.4 * len(fixes))
    ax = fig.add_subplot()
    y = np.arange(len(fixes))
    mean = [p.fix in ("skip_warmup", "skip_compile") for p in fixes]
    steps = [(p.predicted_mean_us if m else p.predicted_step_us) / 1e3 for p, m in zip(fixes, mean)]
    colors = ["#bbbbbb" if p.measure else ("#55a868" if w.top is p else "#4c72b0") for p in fixes]
    ax.barh(y, steps, 0.6, color=colors)
    ax.axvline(w.step_us / 1e3, color="#222222", label=f"measured median step {format_number(w.step_us / 1e3, 3)} ms")
    if any(mean):
        m = float(w.replay.steps["measured_us"].mean()) / 1e3
        ax.axvline(m, color="#222222", linestyle="--", label=f"measured mean step {format_number(m, 3)} ms")
    ax.set_yticks(y, [p.fix + (" (mean)" if m else "") for p, m in zip(fixes, mean)], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("predicted step (ms)")
    ax.set_title(f"{title}: {w.verdict or 'no fix saves 5%'}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
