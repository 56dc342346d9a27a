"""How much GPU time each step queued, and whether the host ran ahead of the GPU.

``queued_gpu_us``: per step window, the GPU time (interval union) of the kernels, copies and memsets
launched from it, wherever on the GPU's timeline they ran. In a steady state a step queues at most
its own length; a step that queues far more is a host that ran ahead of the GPU (a short profile
where the host never waited), and its window is how fast the host issues work, not how long a step
takes. ``cpu_bound`` carries the column and the warning; ``kernels`` divides MFU by the longer of
the two.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace import intervals
from ...trace.schema import GPU_CATEGORIES
from ...trace.steps import step_rows
from .rules import QUEUED_OVER_WALL


def queued_gpu_us(trace, windows: pd.DataFrame, links: pd.DataFrame | None = None) -> np.ndarray:
    """Per row of ``windows`` (``rank``, ``step``): the GPU time of the work launched from it.
    ``links``: ``trace.launches()`` when the caller has it."""
    links = trace.launches() if links is None else links
    gpu = links[links["gpu_cat"].isin(GPU_CATEGORIES)]
    out = np.zeros(len(windows))
    if gpu.empty or windows.empty:
        return out
    row = windows.index.get_indexer(step_rows(windows, trace.events.loc[gpu["cpu_index"].to_numpy(), ["rank", "step"]]))
    keep = row >= 0
    order = np.argsort(row[keep], kind="stable")  # one slice per window: linear in links, whatever the steps
    row = row[keep][order]
    start = gpu["gpu_ts_us"].to_numpy(dtype=np.float64)[keep][order]
    end = start + gpu["gpu_dur_us"].to_numpy(dtype=np.float64)[keep][order]
    positions, first = np.unique(row, return_index=True)
    for position, a, b in zip(positions, first, [*first[1:], len(row)]):
        out[position] = intervals.length(start[a:b], end[a:b])
    return out


def host_ahead(steps: pd.DataFrame) -> tuple[float, float] | None:
    """(median queued GPU time, median window) in us when the median step (``wall_us``,
    ``queued_gpu_us``) queues at least ``QUEUED_OVER_WALL`` times its window: the host ran ahead of
    the GPU and the windows understate a step. None otherwise."""
    if steps.empty:
        return None
    queued, wall = float(steps["queued_gpu_us"].median()), float(steps["wall_us"].median())
    return (queued, wall) if wall > 0 and queued >= QUEUED_OVER_WALL * wall else None


def host_ahead_warning(steps: pd.DataFrame) -> tuple[str, ...]:
    """What ``host_ahead`` found, by how much and what to compare instead; () when it found nothing."""
    ahead = host_ahead(steps)
    if ahead is None:
        return ()
    queued, wall = ahead
    return (f"the host ran ahead of the GPU: each step's launches queue a median {queued / 1e3:,.2f} ms of GPU work "
            f"but its window lasts {wall / 1e3:,.2f} ms, so step times here are how fast the host issues work: a "
            f"step of a long run takes at least {queued / 1e3:,.2f} ms ({queued / wall:.1f}x); compare runs by "
            "queued GPU time per step (queued_gpu_us) or time them synchronized (perfkit.compare), or profile later "
            "in the run, once the host waits for the GPU (perfkit profile --wait 20)",)
