"""The GPU side of a rank's dependency graph (``graph``): each GPU event's edges and latencies, and what its wait
held back (``wait_lost``). The rules are ``graph``'s module doc (**GPU**); the constants that carry them are here."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .lanes import CLOCK_SLACK_US, QUEUE_SLACK_US, other_stream
from .segments import host_point

# When the trace shows no launch or queue gap held within QUEUE_SLACK_US: a kernel on an idle GPU starts a few
# microseconds after its launch returns (NVIDIA's CUDA Graphs post: 2.5-5 us), and back-to-back kernels on one
# stream about a microsecond apart.
DEFAULT_LAUNCH_LATENCY_US = 4.0
DEFAULT_GPU_GAP_US = 1.0
# A wait at least this long after every dependency the trace shows is work the GPU did that the trace does not
# show (work queued before the window, another process: a vLLM graph replay's copy waited 149 ms): it is held at
# its recorded start. A shorter one is a latency of the device (a kernel's start after its launch, clocks that
# disagree), kept after its dependency as recorded (perfkit rule).
HELD_WAIT_US = 1000.0
# ... after a launch, held from the larger of that and this many times the rank's median launch latency (of those
# under HELD_WAIT_US): kernels start 5-20 us after their launch on CUDA (``rules.HOST_AHEAD_MIN_US``: 7-18 us in
# the idle-GPU traces of ../shared) and 50-300 us on ROCm (``rules.LAUNCH_MIN_PER_STEP``'s MI250 step).
LAUNCH_LATENCY_TIMES = 10.0


def gpu_edges(tl, seg: dict, threads: tuple) -> tuple[dict, dict, dict]:
    """GPU events with their edges and latencies (module doc); notes; the typical latencies."""
    g = tl.gpu
    n = len(g["start"])
    start, end = g["start"].astype(np.float64), g["end"].astype(np.float64)
    index = {code: i for i, code in enumerate(threads)}
    thread = np.array([index.get(int(c), -1) for c in g["launch_thread"]], dtype=np.int64)
    # A blocking launch (a synchronous or pageable copy) does its copy before it returns: it releases its copy at
    # its start, even where whole-microsecond clocks put the copy's start on the call's return.
    inside = (g["launch_end"] > start) | g["launch_blocks"].astype(bool)
    point = np.where(inside, g["launch_start"], g["launch_end"]).astype(np.float64)
    launch_seg = np.full(n, -1, dtype=np.int64)
    at_end = np.ones(n, dtype=bool)
    for i in range(len(threads)):
        rows = np.flatnonzero(thread == i)
        if len(rows):
            launch_seg[rows], at_end[rows] = host_point(seg, i, point[rows])
    launched = launch_seg >= 0
    prev = g["prev"].astype(np.int64)
    prev_end = np.where(prev >= 0, end[np.clip(prev, 0, None)], -np.inf)
    release = np.where(launched, point, -np.inf)
    ready = np.maximum(prev_end, release)
    cross = np.full(n, -1, dtype=np.int64)
    for row in np.flatnonzero(np.isfinite(ready) & (start - ready > QUEUE_SLACK_US)):
        cross[row] = other_stream(tl, int(row), float(ready[row]))
    cross_end = np.where(cross >= 0, end[np.clip(cross, 0, None)], -np.inf)
    obs_chain, obs_launch, obs_cross = start - prev_end, start - release, start - cross_end
    bind = np.argmax(np.column_stack([prev_end, release, cross_end]), axis=1)
    held = np.isfinite(ready)
    typical = {"launch_lat": _typical(obs_launch[held & (bind == 1)], DEFAULT_LAUNCH_LATENCY_US),
               "gap": _typical(obs_chain[held & (bind == 0)], DEFAULT_GPU_GAP_US)}
    binding_obs = np.choose(bind, [obs_chain, obs_launch, obs_cross])
    launch_obs = obs_launch[held & (bind == 1) & (obs_launch >= 0) & (obs_launch < HELD_WAIT_US)]
    launch_hold = max(HELD_WAIT_US, LAUNCH_LATENCY_TIMES * float(np.median(launch_obs))) if len(launch_obs) \
        else HELD_WAIT_US
    long_wait = held & (binding_obs >= np.where(bind == 1, launch_hold, HELD_WAIT_US))
    # A blocking launch stages its copy first (pageable memory): the copy starting inside the call is the call's doing.
    long_wait &= ~((bind == 1) & g["launch_blocks"].astype(bool) & (start <= g["launch_end"] + CLOCK_SLACK_US))
    kept = ~long_wait
    gap = _latency(obs_chain, bind == 0, kept, typical["gap"])
    launch_lat = _latency(obs_launch, bind == 1, kept, typical["launch_lat"])
    cross_lat = np.where(cross >= 0, _latency(obs_cross, bind == 2, kept, typical["gap"]), 0.0)
    base = np.where(launched & ~long_wait, -np.inf, start)
    out = {"start": start, "end": end, "dur": end - start, "lane": g["lane"], "kind": g["kind"],
           "label": g["label"].astype(np.int64), "prev": prev, "gap": np.where(prev >= 0, gap, 0.0),
           "launch_seg": launch_seg, "launch_at_end": at_end, "launch_lat": np.where(launched, launch_lat, 0.0),
           "cross": cross, "cross_lat": cross_lat, "base": base, "launch_point": np.where(launched, point, np.nan),
           "released_at_start": (launched & inside).astype(np.int64)}
    lost = np.where(long_wait, binding_obs - np.where(bind == 1, typical["launch_lat"], typical["gap"]), 0.0)
    out["wait_lost"] = np.clip(lost, 0, None)
    notes = {"unexplained_waits": int(long_wait.sum()), "unexplained_us": float(out["wait_lost"].sum()),
             "unlaunched": int((~launched).sum()), "unlaunched_us": float((end - start)[~launched].sum())}
    return out, notes, typical


def _typical(values: np.ndarray, default: float) -> float:
    ok = values[(values >= 0) & (values <= QUEUE_SLACK_US)]
    return float(np.median(ok)) if len(ok) else default


def _latency(obs: np.ndarray, binding: np.ndarray, kept: np.ndarray, typical: float) -> np.ndarray:
    """The latency on one kind of edge: what was recorded on the binding edge of a wait shorter than the hold; the
    typical latency on a binding edge whose wait is held (the floor ``base`` carries it); the typical one, at most
    what was recorded, on an edge that did not hold the work back."""
    finite = np.where(np.isfinite(obs), obs, typical)
    return np.where(binding & kept, finite, np.where(binding, typical, np.minimum(typical, finite)))
