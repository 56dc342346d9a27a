"""Host-device copies (the htod investigation): the bandwidth sweep and the copies found in a
trace. Both draw the "no GPU: <reason>" figure without GPU data."""
from __future__ import annotations

import numpy as np

from ..tables import bytes_text
from .figure import label, new_figure, no_gpu_figure, plain_ticks


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
    plain_ticks(ax.xaxis, bytes_text)
    ax.set_xlabel("copy size")
    ax.set_ylabel("GB/s (1e9 bytes/s)")
    ax.set_title(f"{title} on {label(result.device)}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def copy_kinds(result, *, title: str = "Host-device copies in the trace"):
    """Copy time (ms) and GB/s per (direction, memory kind) of a trace ``htod`` result: the GPU side's
    rate beside the effective one (host blocked time included: a pageable copy's staging shows only
    there). A trace without copies gives the "no GPU" figure with the reason."""
    frame = result.to_frame()
    if frame.empty:
        reason = next((w for w in result.warnings if "GPU" in w), "the trace has no GPU copies")
        return no_gpu_figure(reason.removeprefix("no GPU events: "), title)
    names = [f"{d} {m}" for d, m in zip(frame["direction"], frame["memory"])]
    fig = new_figure(9.0, 3.2)
    left, right = fig.subplots(1, 2)
    left.bar(names, frame["time_us"].to_numpy(dtype=float) / 1e3, color="#c44e52")
    left.set_ylabel("copy time (ms)")
    at = np.arange(len(names))
    right.bar(at - 0.2, frame["gb_per_s"].to_numpy(dtype=float), 0.4, color="#4c72b0", label="GPU side")
    right.bar(at + 0.2, frame["effective_gb_per_s"].to_numpy(dtype=float), 0.4, color="#dd8452",
              label="effective (host blocked included)")
    right.set_xticks(at, names)
    right.set_ylabel("GB/s (1e9 bytes/s)")
    right.legend(fontsize=7)
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
