"""The GPU's time in the profiled steps, split four ways on one time base (TraceLens's GPU timeline).

Over the full step windows (``trace.steps.full_step_windows``, the time base MFU divides by), per rank:

- ``computation_us``: time any compute kernel runs (every kernel but the collectives);
- ``exposed_comm_us``: time a collective runs and no compute kernel does (communication not hidden);
- ``exposed_memcpy_us``: time a copy or memset runs and neither does;
- ``idle_us``: time no GPU work runs.

The four sum to the windows' length (``total_us``). GPU work launched before the profiler's window is left out,
as everywhere in ``gpu-kernels`` (``trace.steps.before_window``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.intervals import window_cover
from ...trace.steps import full_step_windows

TIMELINE_KEYS = ("total_us", "computation_us", "exposed_comm_us", "exposed_memcpy_us", "idle_us")


def gpu_timeline(trace, links: pd.DataFrame) -> dict:
    """``TIMELINE_KEYS`` in us over the full step windows, summed over ranks, and each part's ``*_share`` of the
    total; ``links``: the GPU events that count (``attribute.kernel_links`` less the work before the window).
    Empty when the trace has no step window."""
    windows, _ = full_step_windows(trace)
    if windows.empty:
        return {}
    cls = links["class"]
    comm, copy = (cls == "comm").to_numpy(), cls.isin(("memcpy", "memset")).to_numpy()
    compute = window_cover(links[~comm & ~copy], windows).sum()
    busy_kernels = window_cover(links[~copy], windows).sum()
    busy = window_cover(links, windows).sum()
    total = float(windows["dur_us"].to_numpy(dtype=np.float64).sum())
    parts = {"total_us": total, "computation_us": float(compute), "exposed_comm_us": float(busy_kernels - compute),
             "exposed_memcpy_us": float(busy - busy_kernels), "idle_us": float(total - busy)}
    return {**parts, **{k.replace("_us", "_share"): v / total if total > 0 else None
                        for k, v in parts.items() if k != "total_us"}}
