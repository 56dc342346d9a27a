"""The verdict rules of ``cpu_bound``: every threshold, where it comes from, and ``decide``.

A step's (or the whole trace's) wall time is split by ``cpu_bound`` into GPU busy time and disjoint
layers of host time (DataLoader, compile spans, blocking syncs, other host work); ``decide`` turns
their shares of the wall time, the median launch-to-kernel delay and whether the trace has GPU
activity into one of ``VERDICTS``. The thresholds are defined here and nowhere else.
"""
from __future__ import annotations

import numpy as np

VERDICTS = ("compiling", "GPU-bound", "input-bound", "CPU-only trace", "GPU-bound (host ahead)", "sync-bound",
            "CPU-launch-bound")

# --- verdict thresholds (``decide`` applies them in VERDICTS order) ---
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
# Share of the step spent in DataLoader.__next__ at or above which an idle GPU is blamed on input.
# torch-tb-profiler recommends num_workers from 5% (same source); a verdict asks for twice that.
INPUT_SHARE = 0.10
# Median launch-to-kernel delay at or above this share of the step: the host is that far ahead of
# the GPU, so work is queued and the idle GPU time the window shows (the window's edges, GPU-side
# waits, work from before the profiler started) is not the host's doing: "GPU-bound (host ahead)"
# instead of sync-bound or CPU-launch-bound. A share of the step, not an absolute 1 ms: a loader-
# or sync-bound loop launches a burst after each wait that queues for milliseconds too (ResNet-50
# num_workers=0 in ../shared: input-bound, median delay 9.8 ms = 5.6% of its 175 ms step), while
# the host-ahead traces there wait 12-70% of the step (TimeSformer H100: 62.7 ms of 383 ms).
HOST_AHEAD_SHARE = 0.10
# ... and at least this long (us): a kernel on an idle GPU starts 5-20 us after its launch (median
# 7-18 us in the idle-GPU traces of ../shared: DLRM V100, BERT H100 and MI300X), so in a very short
# step that latency alone is 10% of it; only several launch latencies of waiting mean a queue.
HOST_AHEAD_MIN_US = 100.0
# Share of the step the host spends blocked in sync calls (outside data loading) at or above which
# an idle GPU is blamed on syncs: each sync drains the GPU queue, so host and GPU stop overlapping.
SYNC_SHARE = 0.10
# Everything else with an idle GPU is CPU-launch-bound; with no GPU events and no launch calls at
# all it is "CPU-only trace" (only "compiling" and "input-bound" come first: both are host causes).

# --- finding thresholds (findings below the verdict) ---
# Short-kernel rule of torch-tb-profiler: more than half of more than 100 kernels are short.
TINY_KERNEL_SHARE = 0.50
TINY_KERNEL_MIN_COUNT = 100
# DataLoader above 5% of step time: a note (torch-tb-profiler's num_workers rule).
DATALOADER_NOTE_SHARE = 0.05
# Copy/convert ops from 10% of host busy time (perfkit rule).
COPY_OPS_SHARE = 0.10
# A compile finding (below the verdict) from this share of the wall time (perfkit rule).
COMPILE_NOTE_SHARE = 0.01


def decide(row: dict, thresholds: dict, has_gpu: bool = True, cpu_only: bool = False) -> tuple[str, dict]:
    """Verdict for one step (or the overall sums of ``overall_numbers``) and the numbers and
    thresholds that decided it. Rules in order, shares of the step's wall time:

    1. compiling: compile spans >= ``compile_share`` and more than any other cause (GPU busy,
       DataLoader, syncs, other host work);
    2. GPU-bound: GPU busy >= ``gpu_bound_busy``;
    3. input-bound: DataLoader >= ``input_share`` and >= the sync share;
    4. CPU-only trace: no GPU events and no launch calls in the whole trace;
    5. GPU-bound (host ahead): median launch-to-kernel delay >= ``host_ahead_share`` of the step
       and >= ``HOST_AHEAD_MIN_US`` (the GPU idles for reasons other than the host: work is queued);
    6. sync-bound: host blocked in syncs >= ``sync_share``;
    7. CPU-launch-bound: the GPU idles and none of the above explains it (the host is busy issuing
       ops, or runs untraced Python).
    Without GPU events (but with launch calls) rules 2 and 5 cannot apply: host time decides.
    """
    e = _evidence(row, thresholds, has_gpu)
    t = thresholds
    causes = [e[k] for k in ("gpu_busy_share", "dataloader_share", "sync_share", "host_other_share")]
    others = max([c for c in causes if c is not None and np.isfinite(c)], default=0.0)
    if e["compile_share"] >= t["compile_share"] and e["compile_share"] > others:
        return "compiling", dict(e, rule=f"compile spans >= {t['compile_share']:.0%} of step and more than any "
                                         "other cause")
    if has_gpu and e["gpu_busy_share"] >= t["gpu_bound_busy"]:
        return "GPU-bound", dict(e, rule=f"gpu busy >= {t['gpu_bound_busy']:.0%} of step")
    if e["dataloader_share"] >= t["input_share"] and e["dataloader_share"] >= e["sync_share"]:
        return "input-bound", dict(e, rule=f"DataLoader >= {t['input_share']:.0%} of step")
    if cpu_only:
        return "CPU-only trace", dict(e, rule="no GPU events and no kernel launches: all step time is host time")
    if has_gpu and e["queue_delay_share"] >= t["host_ahead_share"] and e["queue_delay_us"] >= HOST_AHEAD_MIN_US:
        return "GPU-bound (host ahead)", dict(e, rule=f"median launch-to-kernel delay >= {t['host_ahead_share']:.0%} "
                                                      f"of step and >= {HOST_AHEAD_MIN_US:g} us: GPU work is queued")
    if e["sync_share"] >= t["sync_share"]:
        return "sync-bound", dict(e, rule=f"host blocked in syncs >= {t['sync_share']:.0%} of step")
    return "CPU-launch-bound", dict(e, rule="GPU idle; not explained by compiling, DataLoader, a queue ahead or syncs")


def _evidence(row: dict, thresholds: dict, has_gpu: bool) -> dict:
    """Shares of the step's wall time (NaN for an empty window) and the thresholds in force."""
    wall = row["wall_us"] if row["wall_us"] > 0 else float("nan")
    step_wall = wall / row["steps"] if "steps" in row else wall
    delay = row["median_queue_delay_us"] if "median_queue_delay_us" in row else row["queue_delay_us"]
    return {"gpu_busy_share": row["gpu_busy_us"] / wall if has_gpu else None,
            "dataloader_share": row["dataloader_us"] / wall, "compile_share": row["compile_us"] / wall,
            "sync_share": row["sync_us"] / wall, "host_other_share": row["host_other_us"] / wall,
            "queue_delay_us": delay, "queue_delay_share": delay / step_wall if has_gpu else None,
            "launches": row["launches"], "tiny_kernel_pct": row["tiny_kernel_pct"],
            **{f"threshold_{k}": v for k, v in thresholds.items()}}
