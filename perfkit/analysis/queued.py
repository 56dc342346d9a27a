"""How much GPU time each step queued: the measure that ``step`` and ``gpu_kernels`` both read.

``queued_gpu_us``: per step window, the GPU time (interval union) of the kernels, copies and memsets
launched from it, wherever on the GPU's timeline they ran. In a steady state a step queues at most
its own length; a step that queues far more is a host that ran ahead of the GPU (a short profile
where the host never waited), and its window is how fast the host issues work, not how long a step
takes. ``step.cpu_bound`` carries the column and ``step.queued`` the warning; ``kernels`` divides MFU by
the longer of the two.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import intervals
from ..trace.schema import GPU_CATEGORIES
from ..trace.steps import step_rows


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
