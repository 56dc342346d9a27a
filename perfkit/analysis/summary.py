"""``summarize(trace)``: whole-file counts that anyone can check against the raw JSON.

Every number is counted over the whole file (not only inside profiler steps), times in microseconds,
categories normalized to modern Kineto names.
"""
from __future__ import annotations

import numpy as np

from ..trace import Trace
from ..trace.schema import LAUNCH_CATEGORIES
from .classify import DIRECTIONS, SYNC_RUNTIME, busy_us, copies_frame


def summarize(trace: Trace) -> dict:
    """One JSON-ready dict per trace: see the keys below (schema of ``perfkit summary --json``)."""
    ev = trace.events
    complete = ev[ev["ph"] == "X"]
    kernels = complete[complete["cat"] == "kernel"]
    gpu = complete[complete["cat"].isin(["kernel", "gpu_memcpy", "gpu_memset"])]
    steps = trace.steps
    host = complete[complete["cat"].isin(LAUNCH_CATEGORIES)]
    syncs = host[host["name"].astype(str).isin(list(SYNC_RUNTIME))]
    return {
        "trace": ", ".join(f.path for f in trace.files),
        "ranks": trace.ranks,
        "devices": _devices(trace, gpu),
        "events": {
            "total": int(sum(f.events_read for f in trace.files)),
            "by_category": {str(k): int(v) for k, v in complete["cat"].value_counts().items() if v},
        },
        "steps": {
            "count": int(len(steps)),
            "median_us": float(np.median(steps["dur_us"])) if len(steps) else None,
            "source": sorted(set(steps["source"])) if len(steps) else [],
        },
        "gpu": {
            "kernel_count": int(len(kernels)),
            "kernel_time_us": float(kernels["dur_us"].sum()),
            "busy_us": busy_us(gpu),
        },
        "memcpy": _memcpy(complete),
        "syncs": {"count": int(len(syncs)), "blocked_us": float(syncs["dur_us"].sum())},
        "warnings": list(trace.warnings),
    }


def _devices(trace: Trace, gpu) -> list[dict]:
    """GPUs with activity in the trace, named from deviceProperties (which lists every visible GPU)."""
    names = {d.get("id"): d.get("name", "") for d in trace.devices}
    used = sorted(int(d) for d in gpu["device"].unique() if d >= 0)
    return [{"id": d, "name": names.get(d, "")} for d in used]


def _memcpy(complete) -> dict:
    copies = copies_frame(complete)
    out = {}
    for direction in DIRECTIONS:
        c = copies[copies["direction"] == direction]
        out[direction] = {
            "count": int(len(c)),
            "bytes": int(c["bytes"].clip(lower=0).sum()),
            "time_us": float(c["dur_us"].sum()),
            "pageable_count": int((c["memory"] == "pageable").sum()),
            "pinned_count": int((c["memory"] == "pinned").sum()),
        }
    return out
