"""Memory over a run (the memory_leak investigation): the leak series ``hunt_leak`` sampled with
their fitted growth, the system monitor's samples over time, CUDA memory snapshots (one
snapshot's history, or memory across several) and a profiler trace's memory timeline."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...results import format_signed
from .figure import label, message_figure, new_figure


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
    per_1000 = format_signed(growth.per_1000 / scale) or "n/a"  # as the card writes it (1,035, not 1,030)
    ax.set_title(f"{per_1000} {unit}/1k steps ({growth.state})", fontsize=9)
    ax.legend(fontsize=7)


# -- system monitor ----------------------------------------------------------------------------

def monitor_timeline(result, *, columns: tuple[str, ...] | None = None, title: str = "System monitor"):
    """One stacked panel per sampled metric of a ``MonitorResult`` (CPU %, RSS in MiB, GPU
    util/memory/power per GPU) against seconds since start; all-NaN columns are skipped.
    Without GPU data the title says "no GPU: <reason>", the reason's words before any parenthesis
    (the NVML error itself is in the monitor's text)."""
    frame = result.to_frame()
    cols = [c for c in (columns or frame.columns) if c != "time_s" and c in frame and _numeric(frame, c)]
    if not result.gpu_available:
        title = f"{title} (no GPU: {str(result.gpu_reason).split(' (', 1)[0]})"
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


# -- CUDA memory snapshots ---------------------------------------------------------------------

def snapshot_history(snapshot, *, title: str = "Live memory over the snapshot's history"):
    """Live bytes (MiB, relative to the start of the history) after each alloc/free of one
    ``MemorySnapshot``, per device, against ms since the first event; the title gives the growth
    within the window (one window: growth, not a leak). Without history: a figure that says so."""
    live = snapshot.live_bytes()
    if live.empty:
        return message_figure(title, "no allocation history in this snapshot: call "
                                     "torch.cuda.memory._record_memory_history() before the code you snapshot")
    fig = new_figure(9.0, 3.2)
    ax = fig.add_subplot()
    for device, rows in live.groupby("device"):
        ax.step(rows["elapsed_ms"].to_numpy(dtype=float), rows["live_bytes"].to_numpy(dtype=float) / 2**20,
                where="post", linewidth=1, label=f"cuda:{device}")
    ax.set_xlabel("time since the first recorded event (ms)")
    ax.set_ylabel("live MiB (from the history's start)")
    ax.set_title(label(f"{title}: {snapshot.net_growth_bytes / 2**20:+,.1f} MiB within the window", 110), fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def snapshot_series(growth, *, title: str = "Memory at each snapshot"):
    """Allocated and reserved MiB at each snapshot of a ``snapshot_growth`` result, in the order
    taken; the title gives its verdict."""
    table = growth.to_frame()
    fig = new_figure(8.0, 3.2)
    ax = fig.add_subplot()
    x = table["snapshot"].to_numpy(dtype=float)
    ax.plot(x, table["allocated_bytes"].to_numpy(dtype=float) / 2**20, "o-", label="allocated")
    ax.plot(x, table["reserved_bytes"].to_numpy(dtype=float) / 2**20, "s--", color="#888888", label="reserved")
    ax.set_xticks(x, [str(int(v)) for v in x])
    ax.set_xlabel("snapshot (in the order taken)")
    ax.set_ylabel("MiB")
    ax.set_title(label(f"{title}: {growth.verdict}", 100))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# -- a profiler trace's [memory] events --------------------------------------------------------

def memory_over_time(timeline, *, title: str = "Memory timeline"):
    """Allocated (solid) and reserved (dashed, when the device reserves) bytes after each ``[memory]`` event of a
    ``memory_timeline`` result, one panel per (rank, device), against ms since the panel's first
    event or step; dotted lines at step starts (and the last step's end), the peak marked with its
    op; the unit (GiB, MiB, KiB, B) is the largest the panel's peak fills. The titles give the peak and
    the growth per step. Without events: a figure that says how to record them."""
    events = timeline.events
    if not timeline.devices:
        return message_figure(title, timeline.warnings[0] if timeline.warnings else "no [memory] events")
    fig = new_figure(9.0, 0.6 + 2.6 * len(timeline.devices))
    axes = np.atleast_1d(fig.subplots(len(timeline.devices), 1))
    for ax, d in zip(axes, timeline.devices):
        rows = events[(events["rank"] == d["rank"]) & (events["device"] == d["device"])]
        steps = timeline.steps[(timeline.steps["rank"] == d["rank"]) & (timeline.steps["step"] >= 0)]
        _timeline_panel(ax, rows, steps, d)
    axes[-1].set_xlabel("time since the first event or step (ms)")
    fig.suptitle(label(title, 100), fontsize=10)
    fig.tight_layout()
    return fig


BYTE_UNITS = ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))


def byte_unit(peak: float) -> tuple[int, str]:
    """The largest of GiB, MiB, KiB, B that ``peak`` bytes fill at least once."""
    return next(((scale, name) for scale, name in BYTE_UNITS if peak >= scale), BYTE_UNITS[-1])


def _timeline_panel(ax, rows: pd.DataFrame, steps: pd.DataFrame, d: dict) -> None:
    t0 = min([rows["ts_us"].min(), *steps["start_us"]])
    x = (rows["ts_us"].to_numpy(dtype=float) - t0) / 1e3
    scale, unit = byte_unit(max(d["peak_bytes"], d["peak_reserved_bytes"]))
    for col, style, name in (("allocated", "-", "allocated"), ("reserved", "--", "reserved")):
        y = rows[col].to_numpy(dtype=float)
        known = y >= 0  # -1: the event did not carry this total
        if (y[known] > 0).any():  # CPU events carry a reserved total of 0: nothing to draw
            ax.step(x[known], y[known] / scale, style, where="post", linewidth=1, label=name)
    bounds = [*steps["start_us"], *steps["end_us"].tail(1)]
    for b in bounds:
        ax.axvline((b - t0) / 1e3, color="#999999", linestyle=":", linewidth=0.8)
    for _, s in steps.iterrows():
        ax.text((s["start_us"] - t0) / 1e3, 1.0, f" step {int(s['step'])}", fontsize=6, va="top",
                transform=ax.get_xaxis_transform())
    peak = rows.loc[rows["allocated"].idxmax()]
    ax.plot([(peak["ts_us"] - t0) / 1e3], [peak["allocated"] / scale], "v", color="#c44e52", label="peak")
    ax.annotate(label(peak["op"] or "(no op)", 40), ((peak["ts_us"] - t0) / 1e3, peak["allocated"] / scale),
                fontsize=7, xytext=(4, 4), textcoords="offset points")
    growth = d["growth_per_step_bytes"]
    grows = "" if growth is None else f", {format_signed(growth / scale, 3)} {unit}/step held at step ends"
    ax.set_ylabel(unit, fontsize=8)
    ax.set_title(label(f"{d['device']} (rank {d['rank']}): peak {d['peak_bytes'] / scale:,.1f} {unit}"
                       f"{'' if d['peak_step'] < 0 else ' in step ' + str(d['peak_step'])}{grows}", 110), fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
