"""The verdict rules of ``cpu_bound``: every threshold, where it comes from, and ``decide``.

A step's (or the whole trace's) wall time is split by ``cpu_bound`` into GPU busy time and disjoint
layers of host time (DataLoader, compile spans, blocking syncs, other host work); ``decide`` turns
their shares of the wall time, the median launch-to-kernel delay and whether the trace has GPU
activity into one of ``VERDICTS``. The thresholds are defined here and nowhere else.
"""
from __future__ import annotations

import numpy as np

VERDICTS = ("GPU activity not recorded", "host activity not recorded", "warm-up", "compiling", "GPU-bound",
            "communication-bound", "input-bound", "CPU-only trace", "GPU-bound (host ahead)", "sync-bound",
            "launch-bound", "host-compute-bound")
# Each verdict names a cause with its own fix: launch-bound (fewer, larger launches: torch.compile,
# CUDA graphs) and host-compute-bound (the host computes: move the work to the GPU, vectorize) must
# never be confused, since compiling a step whose time is CPU ops launches nothing faster.

# --- verdict thresholds (``decide`` applies them in VERDICTS order) ---
# Warm-up (``warmup.py``: first calls >= 10x their later median and >= 1 ms, cold first steps) holding at
# least this share of the window makes the verdict "warm-up": the window measures start-up more than the
# loop, and the fix is to profile later steps (an RTX 3090 CNN's first call: 200 ms of first calls in a
# 307.7 ms window, called launch-bound and sent to CUDA graphs). Below it the warm-up is taken out and the
# rest of the window decides (every share is of the window less its warm-up); above it the rest's verdict
# is given as the cause behind the warm-up (``behind_warmup``). "The larger half decides", as COMM_SHARE.
WARMUP_SHARE = 0.50
# Compile spans cover at least this share of the step AND more of it than any other cause (GPU
# busy, DataLoader, syncs, other host work): the window measures torch.compile compiling, not the
# training loop. The floor matches the input and sync shares below.
COMPILE_SHARE = 0.10
# GPU busy share of the step at or above which the GPU is the limiter. What stays idle in a
# well-fed PyTorch loop (launch gaps, step boundaries) is typically a few percent; perfkit calls a
# step GPU-bound when at most a fifth of it is idle. torch-tb-profiler (pytorch/kineto tb_plugin,
# RunGenerator.analyze) flags "low utilization" below 50%: those steps get severity "high" here.
GPU_BOUND_BUSY = 0.80
LOW_UTILIZATION = 0.50
# Of a GPU-bound step's busy time, the share that is collective kernels with no compute under them
# at or above which communication, not compute, is the limiter (HTA's critical path calls such a
# step gpu_communication_bound; a perfkit rule: the larger half decides).
COMM_SHARE = 0.50
# With the GPU less busy, collectives not overlapped by compute at or above this share of the step
# compete with the host causes, and win when larger: a collective kernel lasts until its slowest
# peer arrives, so a rank whose host syncs on it (DLRM's .item() after all_to_all) waits for its
# peers, not for its own GPU. The floor is the sync share's.
COMM_STEP_SHARE = 0.10
# Share of the step spent in DataLoader.__next__ at or above which an idle GPU is blamed on input.
# torch-tb-profiler recommends num_workers from 5% (same source); a verdict asks for twice that.
INPUT_SHARE = 0.10
# Median launch-to-kernel delay at or above this share of the step: the host is that far ahead of
# the GPU, so work is queued and the idle GPU time the window shows (the window's edges, GPU-side
# waits, work from before the profiler started) is not the host's doing: "GPU-bound (host ahead)"
# instead of sync-bound or launch-bound. A share of the step, not an absolute 1 ms: a loader-
# or sync-bound loop launches a burst after each wait that queues for milliseconds too (ResNet-50
# num_workers=0 in ../shared: input-bound, median delay 9.8 ms = 5.6% of its 175 ms step), while
# the host-ahead traces there wait 12-70% of the step (TimeSformer H100: 62.7 ms of 383 ms).
HOST_AHEAD_SHARE = 0.10
# A step whose launches queue at least this multiple of its window in GPU time (``queued_gpu_us``): the
# host ran ahead of the GPU, as in a short profile where it never had to wait (the H100 MLP fp32 profile
# of scripts/gpu: 2.9-4.0 ms windows each queuing 7.2 ms of GEMMs), and the windows are the host's issue
# time, not a step's. In a steady state a step queues at most its own length on one stream, or the queue
# would grow without bound; across streams a step's tail can overlap the next step (the MI300X ResNet DDP
# rank of ../shared queues 1.18x its window: RCCL kernels launched at the end of backward, waiting on
# peers), so the rule asks for 1.5x (perfkit rule).
QUEUED_OVER_WALL = 1.5
# ... and at least this long (us): a kernel on an idle GPU starts 5-20 us after its launch (median
# 7-18 us in the idle-GPU traces of ../shared: DLRM V100, BERT H100 and MI300X), so in a very short
# step that latency alone is 10% of it; only several launch latencies of waiting mean a queue.
HOST_AHEAD_MIN_US = 100.0
# Share of the step the host spends blocked in sync calls (outside data loading) at or above which
# an idle GPU is blamed on syncs: each sync drains the GPU queue, so host and GPU stop overlapping.
# Once it is met, the syncs weigh against the other host causes with what removing them could save: the
# blocked time, but no more than the GPU's idle share (``sync_cost``). A sync in a host-ahead loop counts
# when the GPU idles in it or in the refill after it for this share too (``sync_eligible``): the H200
# item-logging MLP of scripts/gpu (30% blocked, 13% of the step GPU-idle at its two .item() calls) read
# host-compute-bound while its host was ahead between the syncs.
SYNC_SHARE = 0.10
# Launch-bound needs launches: at least this many per step (all launch-bound shares are counted
# while the GPU idles: launching ahead of a busy GPU keeps nothing waiting). An eager op costs the host 5-10 us on
# CUDA (NVIDIA's CUDA Graphs post: ~2.5-5 us of launch latency plus PyTorch's dispatch) and 50-300 us
# per op on the ROCm toy step in ../shared (MI250); with fewer than 10 per step the host time goes
# elsewhere (the T4 step with 2 launches and 63% in CPU aten::normal_), so fusing or graphing them
# cannot be what an idle GPU waits for.
LAUNCH_MIN_PER_STEP = 10
# Untraced host time (no host event, GPU idle) between two launch calls of a thread at most this far apart
# is the host issuing work, not host compute of its own: Python around eager ops costs 5-50 us per op, and
# Triton's launcher runs between cuLaunchKernel calls; a torch.compile'd ResNet-18 recorded without stacks
# (1,278 launches in 60.6 ms, median kernel 4.4 us, 36% of the window untraced between them) was called
# host-compute-bound and told CUDA graphs would not help. An environment step or NumPy work between two
# launches takes longer than this (perfkit rule).
DENSE_LAUNCH_GAP_US = 100.0
# ... and, while the GPU idles, the host issuing work (ops that launch, with their launch calls, and
# the Python frames a launch runs inside: a module's forward) must hold at least as much time as
# the host working on its own (ops that launch nothing, Python frames with no launch inside: an
# environment step). A perfkit rule: the larger side decides.
# Everything else with an idle GPU is host-compute-bound: the host computes (CPU ops, Python).

# --- finding thresholds (findings below the verdict) ---
# A share under this is not worth a sentence in a verdict's text (the blocked time a host-ahead fix mentions).
MENTION_SHARE = 0.01
# A cause other than the verdict's holding at least this share of the step (less warm-up) is named beside
# the verdict ("also: ..."), as the next thing to fix: the floor of the input, sync and compile rules.
SECOND_CAUSE_SHARE = 0.10
# ... and a launch-bound step names its syncs from this many per step whatever their share: its fix, CUDA
# graphs, captures only the work between two syncs (the H100 PPO of .item() logging syncs 32 times a step,
# 0.4% of it blocked). Two per step is an inference call reading its output (BERT, vLLM), not a pattern.
SYNCS_BEFORE_GRAPHS = 4
# Short-kernel rule of torch-tb-profiler: more than half of more than 100 kernels are short.
TINY_KERNEL_SHARE = 0.50
TINY_KERNEL_MIN_COUNT = 100
# DataLoader above 5% of step time: a note (torch-tb-profiler's num_workers rule).
DATALOADER_NOTE_SHARE = 0.05
# Copy/convert ops from 10% of host busy time (perfkit rule).
COPY_OPS_SHARE = 0.10
# A compile finding (below the verdict) from this share of the wall time (perfkit rule).
COMPILE_NOTE_SHARE = 0.01


def decide(row: dict, thresholds: dict, kind: str = "gpu") -> tuple[str, dict]:
    """Verdict for one step (or the overall sums of ``overall_numbers``) and the numbers and
    thresholds that decided it. ``kind``: "gpu" (GPU activity recorded), "unrecorded" (launch calls
    or work only a GPU does, such as NCCL collectives or cuDNN ops, but no GPU events: the profiler did not
    record the device), "nohost" (GPU events and no host event at all: the profiler did not record the host),
    "cpu" (neither). Rules in order, shares of the step's wall time less its warm-up calls:

    1. GPU activity not recorded: ``kind == "unrecorded"`` (nothing about the GPU can be decided); host activity
       not recorded: ``kind == "nohost"`` (nothing about the host can be);
    2. warm-up: warm-up >= ``WARMUP_SHARE`` of the whole window; ``behind_warmup`` in the evidence is the
       verdict rules 3-11 give the rest of it (None when nothing is left);
    3. compiling: compile spans >= ``compile_share`` and more than any other cause;
    4. GPU-bound / communication-bound: GPU busy >= ``gpu_bound_busy``; communication-bound when
       collective kernels with no compute under them are >= ``COMM_SHARE`` of the busy time;
    5. input-bound: DataLoader >= ``input_share`` and the largest host cause (``host_causes``);
    6. CPU-only trace: no GPU events and no launch calls;
    7. communication-bound: collectives not under compute >= ``COMM_STEP_SHARE`` and at least every host
       cause (a host blocked on a collective is not a host cause: ``host_causes``), whatever the queue;
    8. GPU-bound (host ahead): median launch-to-kernel delay >= ``host_ahead_share`` of the step
       and >= ``HOST_AHEAD_MIN_US`` (work is queued), and less than half of the GPU's idle time is the
       host loading data, issuing work or working on its own (the GPU idles for reasons other than
       the host);
    9.-11. the largest of the host causes that meet their rule (``host_causes``): sync-bound (host
       blocked in syncs >= ``sync_share``, weighed by what removing them saves), launch-bound (>=
       ``LAUNCH_MIN_PER_STEP`` launches per step, the host issuing work >= the host working on its own,
       while the GPU idles), host-compute-bound (ops that launch nothing, Python with no launch inside,
       untraced code).
    """
    e = _evidence(row, thresholds, kind == "gpu")
    if kind == "unrecorded":
        return "GPU activity not recorded", dict(e, rule="kernel launches or GPU-only ops but no GPU events: the "
                                                          "profiler did not record the GPU")
    if kind == "nohost":
        return "host activity not recorded", dict(e, rule="GPU events but no host event: the profiler did not record "
                                                           "the host")
    if e["warmup_share"] >= WARMUP_SHARE:
        behind = steady_verdict(e, thresholds, kind)[0] if np.isfinite(e["dataloader_share"]) else None
        return "warm-up", dict(e, rule=f"warm-up >= {WARMUP_SHARE:.0%} of the window", behind_warmup=behind)
    return steady_verdict(e, thresholds, kind)


def steady_verdict(e: dict, t: dict, kind: str) -> tuple[str, dict]:
    """Rules 3-11 of ``decide`` on the evidence of the step less its warm-up (``_evidence``)."""
    causes = [e[k] for k in ("gpu_busy_share", "dataloader_share", "sync_share", "host_other_share")]
    others = max([c for c in causes if c is not None and np.isfinite(c)], default=0.0)
    if e["compile_share"] >= t["compile_share"] and e["compile_share"] > others:
        return "compiling", dict(e, rule=f"compile spans >= {t['compile_share']:.0%} of step and more than any "
                                         "other cause")
    if kind == "gpu" and e["gpu_busy_share"] >= t["gpu_bound_busy"]:
        if e["comm_exposed_share"] >= COMM_SHARE * e["gpu_busy_share"]:
            return "communication-bound", dict(e, rule=f"gpu busy >= {t['gpu_bound_busy']:.0%} of step, of which "
                                                        f"collectives not overlapped by compute >= {COMM_SHARE:.0%}")
        return "GPU-bound", dict(e, rule=f"gpu busy >= {t['gpu_bound_busy']:.0%} of step")
    host = host_causes(e, t)
    if host["input-bound"] > 0 and host["input-bound"] >= max(host.values()):
        return "input-bound", dict(e, rule=f"DataLoader >= {t['input_share']:.0%} of step and the largest host cause")
    if kind == "cpu":
        return "CPU-only trace", dict(e, rule="no GPU events and no kernel launches: all step time is host time")
    if e["comm_exposed_share"] >= COMM_STEP_SHARE and e["comm_exposed_share"] >= max(host.values()):
        return "communication-bound", dict(e, rule=RULE_TEXT["communication-bound"].format(**t))
    explained = e["dataloader_idle_share"] + e["issuing_idle_share"] + e["own_work_idle_share"]
    if kind == "gpu" and queue_is_deep(e, t) and explained < 0.5 * (1.0 - e["gpu_busy_share"]):
        return "GPU-bound (host ahead)", dict(e, rule=f"median launch-to-kernel delay >= {t['host_ahead_share']:.0%} "
                                                      f"of step and >= {HOST_AHEAD_MIN_US:g} us: GPU work is queued")
    verdict = max(host, key=host.get) if max(host.values()) > 0 else "host-compute-bound"
    return verdict, dict(e, rule=RULE_TEXT[verdict].format(**t))


RULE_TEXT = {
    "communication-bound": f"collectives not overlapped by compute >= {COMM_STEP_SHARE:.0%} of step and larger than "
                           "every host cause (a collective waits for its slowest peer; a host blocked on one waits "
                           "with it)",
    "input-bound": "DataLoader >= {input_share:.0%} of step and the largest host cause",
    "sync-bound": "host blocked in syncs >= {sync_share:.0%} of step and the largest host cause",
    "launch-bound": f">= {LAUNCH_MIN_PER_STEP} launches per step, the host issuing work (launching ops, the Python "
                    "around them) >= its own work while the GPU idles, the largest host cause",
    "host-compute-bound": "GPU idle while the host computes (ops that launch nothing, Python, untraced code): the "
                          "largest host cause",
}


def host_causes(e: dict, t: dict) -> dict:
    """Shares of the step of the host-side causes that meet their rule (0 where not): input
    (DataLoader while the GPU idles), sync (blocking calls: they wait while the GPU works, then the
    GPU idles while the host starts again; not when the GPU's queue is deep (``queue_is_deep``):
    then the syncs wait for work the GPU does anyway), launch (``launch_bound``: launching ops while the GPU
    idles) and host compute (ops that launch nothing and Python with no launch inside while the GPU
    idles: always eligible). Untraced time (no host event, GPU idle: Python in a trace without
    stacks) is in none of them: what it was is unknown, so it never outweighs a measured cause;
    when no cause has any time, the step is host-compute-bound on its untraced time. The largest decides, so a 16% sync beside 63% of CPU ops is not called
    sync-bound, and launching while the GPU still has queued work keeps no GPU waiting."""
    idle = e["dataloader_idle_share"]
    syncs = sync_cost(e) if sync_eligible(e, t) else 0.0
    return {"input-bound": idle if idle >= t["input_share"] else 0.0,
            "sync-bound": syncs,
            "launch-bound": e["issuing_idle_share"] if launch_bound(e) else 0.0,
            "host-compute-bound": e["own_work_idle_share"] if np.isfinite(e["own_work_idle_share"]) else 0.0}


def no_fix_verdict(e: dict, t: dict) -> tuple[str, str]:
    """The verdict of a step that no fix perfkit replays saves ``whatif.MIN_SAVING`` of (``e``: ``_evidence`` of the
    step less its warm-up). Its kernels queued deep (``queue_is_deep``) while the host's measured work explains less
    than half of the GPU's idle time: "GPU-bound (host ahead)", the GPU waits for something other than the host.
    Else the largest of what is left: GPU compute (busy less exposed collectives), collectives not under compute,
    and the host's measured work with the GPU idle (DataLoader, issuing, its own work; not the syncs, whose removal
    saved nothing). Untraced time, as far as the GPU idles (``min(untraced, idle)``), is the host's where it
    outweighs every part and no measured host or collective cause reaches ``SECOND_CAUSE_SHARE``: what the host did
    there is unknown, so it never outweighs a measured cause, but it is the host's time, never the GPU's (a step 99%
    untraced with the GPU busy 1% is not GPU-bound)."""
    busy = e["gpu_busy_share"] or 0.0
    host = max(e["dataloader_idle_share"], e["issuing_idle_share"], max(e["own_work_idle_share"], 0.0))
    if queue_is_deep(e, t) and host < 0.5 * (1.0 - busy):
        return "GPU-bound (host ahead)", ("no fix saves 5% of the step, and its kernels queue far behind their launch "
                                          "while the GPU idles: it waits for something other than the host")
    parts = {"GPU-bound": max(busy - e["comm_exposed_share"], 0.0), "communication-bound": e["comm_exposed_share"],
             "host-compute-bound": host}
    untraced = min(e["untraced_share"], 1.0 - busy)
    if untraced > max(parts.values()) and max(host, e["comm_exposed_share"]) < SECOND_CAUSE_SHARE:
        parts["host-compute-bound"] = untraced
    verdict = max(parts, key=parts.get) if max(parts.values()) > 0 else "host-compute-bound"
    return verdict, (f"no fix saves 5% of the step: what no fix removes, {verdict} ({parts[verdict]:.0%} of the "
                     "step), is largest")


def sync_eligible(e: dict, t: dict) -> bool:
    """The sync rule: the host is blocked in syncs >= ``sync_share`` of the step (not counting the blocking on
    collectives, ``host_sync_share``), and the syncs leave the
    GPU idle: the queue is not deep (``queue_is_deep``: then the syncs wait for work the GPU does anyway),
    or the GPU idles at or after them for >= ``sync_share`` of the step all the same (a loop whose host
    runs ahead between two ``.item()`` calls drains the queue at each)."""
    if host_sync_share(e) < t["sync_share"]:
        return False
    return not queue_is_deep(e, t) or e["sync_idle_share"] >= t["sync_share"]


def host_sync_share(e: dict) -> float:
    """The host's blocked share less the blocking on collectives (``sync_comm``): waiting on a collective is
    communication (it ends when the slowest peer arrives), and two ranks of one symmetric step agree on it."""
    return max(e["sync_share"] - e.get("sync_comm_share", 0.0), 0.0)


def sync_cost(e: dict) -> float:
    """What removing the syncs could save, to weigh against the other host causes (each the time the GPU
    idles while the host does that thing): the host's blocked time, but no more than the GPU's idle share
    (without the syncs the host's other work overlaps the GPU, and the step still takes the GPU's busy
    time). A TimeSformer step blocked 34% of the time beside 57% of Python with the GPU idle is not
    sync-bound: the Python stays when the syncs go."""
    busy = e["gpu_busy_share"] if e["gpu_busy_share"] is not None else 0.0
    return min(host_sync_share(e), max(1.0 - busy, 0.0))


def queue_is_deep(e: dict, t: dict) -> bool:
    """The median launch-to-kernel delay is >= ``host_ahead_share`` of the step and >=
    ``HOST_AHEAD_MIN_US``: the host launches far ahead of the GPU."""
    return (e["queue_delay_share"] is not None and e["queue_delay_share"] >= t["host_ahead_share"]
            and e["queue_delay_us"] >= HOST_AHEAD_MIN_US)


def launch_bound(e: dict) -> bool:
    """The launch-bound rule of ``decide`` on its evidence (shares while the GPU idles). Untraced
    time is left out of the comparison: without Python stacks it cannot say what it was."""
    return e["launches_per_step"] >= LAUNCH_MIN_PER_STEP and e["issuing_idle_share"] >= e["own_work_idle_share"]


def _evidence(row: dict, thresholds: dict, has_gpu: bool) -> dict:
    """Shares of the step's wall time less its warm-up calls (NaN for an empty window) and the
    thresholds in force; ``warmup_share`` is of the whole step."""
    steps = row.get("steps", 1) or 1
    whole = row["wall_us"] if row["wall_us"] > 0 else float("nan")
    warm = row.get("warmup_us", 0.0)
    wall = whole - warm if whole - warm > 0 else float("nan")
    step_wall = wall / steps
    delay = row["median_queue_delay_us"] if "median_queue_delay_us" in row else row["queue_delay_us"]
    share = {k: row.get(f"{k}_us", 0.0) / wall for k in (
        "dataloader", "compile", "sync", "sync_comm", "sync_idle", "host_busy", "host_other", "launch_side", "host_compute",
        "python", "untraced", "dataloader_idle", "launch_side_idle", "host_compute_idle", "python_idle",
        "python_launch_idle", "untraced_launch_idle")}
    # GPU time during warm-up calls is out of the numerator as the calls are out of the denominator
    share["comm_exposed"] = (row.get("comm_exposed_us", 0.0) - row.get("comm_exposed_warmup_us", 0.0)) / wall
    # while the GPU idles: the host issuing work (launching ops and the Python frames they run in)
    # against the host working on its own (ops that launch nothing, Python frames with no launch)
    share["issuing_idle"] = share["launch_side_idle"] + share["python_launch_idle"] + share["untraced_launch_idle"]
    share["own_work_idle"] = share["host_compute_idle"] + share["python_idle"] - share["python_launch_idle"]
    busy = row["gpu_busy_us"] - row.get("gpu_busy_warmup_us", 0.0)
    return {"gpu_busy_share": busy / wall if has_gpu else None,
            **{f"{k}_share": v for k, v in share.items()}, "warmup_share": warm / whole,
            "queue_delay_us": delay, "queue_delay_share": delay / step_wall if has_gpu else None,
            "launches": row["launches"], "launches_per_step": row["launches"] / steps,
            "median_kernel_us": row.get("median_kernel_us", float("nan")), "tiny_kernel_pct": row["tiny_kernel_pct"],
            **{f"threshold_{k}": v for k, v in thresholds.items()}}
