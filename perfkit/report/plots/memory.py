"""Memory over a run (the memory_leak investigation): the leak series ``hunt_leak`` sampled with
their fitted growth, the system monitor's samples over time, and CUDA memory snapshots (one
snapshot's history, or memory across several)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

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
