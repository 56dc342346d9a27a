"""Independent counts from a trace's raw JSON (orjson + gzip only, no perfkit): what bounds its steps, and the op
that launched each GPU event.

Used by the diagnosis label tests to check, from the raw events, the evidence behind each
hand-written label. Deliberately simple: ProfilerStep# windows (else the whole trace), unions of
GPU intervals inside them, DataLoader ranges, launch calls, kernel durations, NCCL/RCCL kernels not
overlapped by other GPU work, and the longest single host call.
"""
import bisect
import gzip
import re
import statistics
from pathlib import Path

import orjson

GPU = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
LAUNCH = re.compile(r"^(cuda|cu|hip)(LaunchKernel|ExtLaunchKernel|ModuleLaunchKernel|ExtModuleLaunchKernel|"
                    r"GraphLaunch|LaunchCooperativeKernel|LaunchKernelEx|LaunchKernelExC)")
COMM = re.compile(r"nccl|rccl", re.I)
SYNC = re.compile(r"^(cuda|hip|cu)(StreamSynchronize|DeviceSynchronize|EventSynchronize|CtxSynchronize|Memcpy$)")


def launch_owners(events: list) -> dict:
    """Per GPU event (by id()): the innermost host op around its launch call (correlation id), from the raw events."""
    gpu = {}
    for e in events:
        if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset") and \
                "correlation" in (e.get("args") or {}):
            gpu.setdefault(e["args"]["correlation"], []).append(e)
    ops = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator", "operator") and \
                not str(e["name"]).startswith("ProfilerStep#"):
            ops.setdefault((e["pid"], e["tid"]), []).append(e)
    for thread in ops.values():  # latest start last; at one start, the shortest, then the first recorded, last
        order = {id(o): i for i, o in enumerate(thread)}
        thread.sort(key=lambda o: (o["ts"], -o["dur"], -order[id(o)]))
    starts = {key: [o["ts"] for o in thread] for key, thread in ops.items()}
    owners = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime") and (e.get("args") or {}).get("correlation") \
                in gpu:
            # the innermost op around the launch: of the ops that start at or before it and end at or after
            # it, the latest-starting (the shortest at a tie), found walking back from the last start <= it
            thread = ops.get((e["pid"], e["tid"]), [])
            i = bisect.bisect_right(starts.get((e["pid"], e["tid"]), []), e["ts"])
            while i > 0 and thread[i - 1]["ts"] + thread[i - 1]["dur"] < e["ts"] + e["dur"]:
                i -= 1
            if i > 0:
                for k in gpu[e["args"]["correlation"]]:
                    owners[id(k)] = thread[i - 1]
    return owners


def union_length(spans):
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _clip(spans, lo, hi):
    return [(max(a, lo), min(b, hi)) for a, b in spans if b > lo and a < hi]


def raw_facts(path) -> dict:
    doc = orjson.loads(gzip.decompress(Path(path).read_bytes()))  # orjson: the same values, 3x faster than json
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") in ("user_annotation", "cpu_op", "Operator")]
    if steps:  # drop a first/last step shorter than 10% of the shortest other (cut by the profiler window)
        steps = sorted(set(steps))
        lengths = [b - a for a, b in steps]
        keep = [s for i, s in enumerate(steps) if not (i in (0, len(steps) - 1) and len(steps) > 1
                and (s[1] - s[0]) < 0.1 * min(l for j, l in enumerate(lengths) if j != i))]
        steps = keep
    else:
        host = [(e["ts"], e["ts"] + e["dur"]) for e in events]
        steps = [(min(a for a, _ in host), max(b for _, b in host))]
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in GPU]
    kernels = [e for e in events if e.get("cat") in ("kernel", "Kernel")]
    other = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in GPU
             and not COMM.search(str(e.get("name", "")))]
    loader = [(e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("enumerate(DataLoader)")]
    launches = [e for e in events if LAUNCH.match(str(e.get("name", "")))]
    wall = sum(b - a for a, b in steps)
    inside = lambda spans: sum(union_length(_clip(spans, a, b)) for a, b in steps)  # noqa: E731
    busy = inside(gpu)
    in_steps = [e for e in launches if any(a <= e["ts"] < b for a, b in steps)]
    # the GPU work the steps' own launches queued (not what an earlier step launched that runs in them)
    launched = {(e.get("args") or {}).get("correlation") for e in in_steps} - {None}
    own = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in GPU
           and (e.get("args") or {}).get("correlation") in launched]
    in_kernels = [e["dur"] for e in kernels if any(a <= e["ts"] < b for a, b in steps)]
    host = [e for e in events if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver", "Operator", "Runtime")
            and any(a <= e["ts"] < b for a, b in steps)]
    longest = max((e["dur"] for e in host), default=0.0)
    # blocking calls: synchronize calls, and copies from pageable memory (the call returns once copied)
    pageable = {e.get("args", {}).get("correlation") for e in events if e.get("cat") in ("gpu_memcpy", "Memcpy")
                and "Pageable" in str(e.get("name", ""))}
    blocking = [(e["ts"], e["ts"] + e["dur"]) for e in host if e.get("cat") in ("cuda_runtime", "Runtime")
                and (SYNC.search(str(e.get("name", ""))) or (str(e.get("name", "")).startswith(("cudaMemcpyAsync", "hipMemcpyAsync"))
                     and e.get("args", {}).get("correlation") in pageable))]
    gap = 0.0  # the longest stretch of a step with no GPU work, as a share of the step
    for a, b in steps:
        end = a
        for s, e in sorted(_clip(gpu, a, b)):
            gap = max(gap, (s - end) / (b - a))
            end = max(end, e)
        gap = max(gap, (b - end) / (b - a))
    return {"steps": len(steps), "longest_gpu_gap_share": gap, "wall_us": wall, "gpu_events": len(gpu),
            "busy_share": busy / wall if wall else 0.0, "own_busy_share": inside(own) / wall if wall else 0.0,
            "comm_exposed_share": (busy - inside(other)) / wall if wall else 0.0,
            "loader_share": inside(loader) / wall if wall else 0.0, "launches": len(launches),
            "sync_share": inside(blocking) / wall if wall else 0.0,
            "launches_per_step": len(in_steps) / max(len(steps), 1),
            "median_kernel_us": statistics.median(in_kernels) if in_kernels else None,
            "longest_host_call_share": longest / (wall / len(steps)) if wall else 0.0,
            "devices": [d.get("name") for d in doc.get("deviceProperties", []) if isinstance(d, dict)]}


def supports(verdict: str, raw: dict) -> None:
    """The label's claim, recounted from the raw events."""
    if verdict == "GPU activity not recorded":
        assert raw["gpu_events"] == 0 and raw["launches"] > 0 and raw["devices"]
    elif verdict == "warm-up":
        assert raw["longest_host_call_share"] >= 0.25  # one first call holds a large part of the window
    elif verdict == "GPU-bound":
        assert raw["busy_share"] >= 0.8 and raw["comm_exposed_share"] < 0.5 * raw["busy_share"]
    elif verdict == "communication-bound":
        assert raw["comm_exposed_share"] >= 0.1
    elif verdict == "input-bound":  # the DataLoader holds at least the 5% its fix must save
        assert raw["loader_share"] >= 0.05 and raw["busy_share"] < 0.8
    elif verdict == "launch-bound":  # short kernels, and the GPU idles in the step's own work (whatever ran before)
        assert raw["launches_per_step"] >= 1 and min(raw["busy_share"], raw["own_busy_share"]) < 0.8
        assert raw["median_kernel_us"] < 50
    elif verdict == "host-compute-bound":  # few launches, or one long stretch with no GPU work at all
        assert raw["busy_share"] < 0.8
        assert raw["launches_per_step"] < 10 or raw["longest_gpu_gap_share"] >= 0.25
    elif verdict == "sync-bound":
        assert raw["sync_share"] >= 0.1 and raw["busy_share"] < 0.8
    elif verdict == "GPU-bound (host ahead)":
        assert raw["busy_share"] < 0.8 and raw["launches_per_step"] >= 10
    else:
        raise AssertionError(verdict)
