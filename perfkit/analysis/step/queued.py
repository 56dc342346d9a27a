"""Whether the host ran ahead of the GPU: each step's queued GPU time (:mod:`perfkit.analysis.queued`)
against its window, judged by ``rules.QUEUED_OVER_WALL``, and the warning that says so. ``cpu_bound``
carries the warning; ``diagnosis`` and the reports quote the queued time beside the mean step.
"""
from __future__ import annotations

import pandas as pd

from .rules import QUEUED_OVER_WALL


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
