"""``summarize(trace)``: whole-file counts that anyone can check against the raw JSON.

Every number is counted over the whole file (not only inside profiler steps), times in microseconds,
categories normalized to modern Kineto names; ``sync_points`` and ``diagnosis`` are ``perfkit sync-points``'
totals and ``perfkit diagnose``'s verdict, so the summary says the same as those commands.

Devices are the GPUs with activity in the trace, named from ``deviceProperties`` by this rule:

1. the entry whose ``id`` is the device's id, if it has a name;
2. otherwise, when every named entry carries the same name (a single entry, as in a process that
   sees one GPU, or a node of identical GPUs), that name: ROCm traces put GPU events on the HSA
   agent index, which counts the CPU agents first (GPU 0 shows as device 2 on a two-socket host),
   so the index need not match the id of any entry, while the GPU model is not in doubt;
3. otherwise "" (unknown): listed GPUs of different models and none with this id.
"""
from __future__ import annotations

import numpy as np

from ..trace import Trace
from ..trace.schema import LAUNCH_CATEGORIES
from .classify import DIRECTIONS, SYNC_RUNTIME, busy_us, copies_frame
from .compile import compile_facts
from .step.diagnosis import diagnose
from .sync_points.find import syncs as sync_analysis

# Why ``syncs`` (runtime synchronize calls, the raw count anyone can check) and ``sync_points``
# (``perfkit sync-points``) differ.
SYNC_NOTE = ("syncs counts synchronizing runtime calls (cudaStreamSynchronize, cudaMemcpy, ...) over the whole file, "
             "each for its own duration; sync_points counts Python-level calls that waited (an .item() and the "
             "cudaStreamSynchronize inside it are one, blocking copies from pageable memory included), each for the "
             "host time of the whole call, and splits them into inside and outside the profiled steps")


def summarize(trace: Trace) -> dict:
    """One JSON-ready dict per trace: see the keys below (schema of ``perfkit summary --json``).

    ``devices``: ``[{"id", "name"}]`` (naming rule in the module doc). ``compile``: None, or when the
    trace shows torch.compile (compile spans, compiled regions or Triton kernels)
    ``{kernels, triton_kernels, triton_time_share, compile_s, compiled_regions}`` (see
    ``compile.compile_facts``).
    """
    ev = trace.events
    points = sync_analysis(trace)
    diagnosis = diagnose(trace, path=trace.files[0].path if trace.files else None, kernel_fix=False)
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
        "sync_points": _sync_points(points.total),
        "compile": compile_facts(trace),
        "diagnosis": {"verdict": diagnosis.verdict, "title": diagnosis.title, "prediction": diagnosis.prediction},
        "warnings": list(trace.warnings),
    }


def _sync_points(total: dict) -> dict:
    """``perfkit sync-points``' totals, with why they differ from the runtime-call counts."""
    return {"count": total["count"], "blocked_us": total["blocked_us"], "per_step": total["per_step"],
            "in_steps": total["in_steps"], "outside_steps": total["outside_steps"], "note": SYNC_NOTE}


def _devices(trace: Trace, gpu) -> list[dict]:
    """GPUs with activity in the trace, named by the rule of the module doc; a trace without GPU
    activity lists its ``deviceProperties`` entries with ``"active": False``."""
    used = sorted(int(d) for d in gpu["device"].unique() if d >= 0)
    if not used:
        return [{"id": _as_int(p.get("id")), "name": str(p.get("name") or ""), "active": False}
                for p in trace.devices if isinstance(p, dict)]
    return [{"id": d, "name": device_name(trace.devices, d)} for d in used]


def device_name(properties: list[dict], device: int) -> str:
    """Name of GPU ``device`` from ``deviceProperties`` entries (rule in the module doc)."""
    by_id = {_as_int(p.get("id")): str(p.get("name") or "") for p in properties}
    if by_id.get(device):
        return by_id[device]
    names = set(by_id.values()) - {""}
    return names.pop() if len(names) == 1 else ""


def _as_int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


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
