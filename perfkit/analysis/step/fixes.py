"""The fixes perfkit gives, each as a change to a rank's dependency graph (``graph``) that ``whatif`` replays.

Every fix returns the changed graph and what it assumed, or ``None`` and why it does not apply. What each changes:

* ``remove_syncs``: the host no longer waits at blocking calls other than pageable copies (``.item()``,
  ``.cpu()``, synchronize calls): their time and their waits go; the GPU work stays. A call that waits on a
  collective (one runs through at least half of it: ``layers.mostly_under``'s rule) stays: the host needs what
  the collective brings, and waiting on it is communication (``overlap_comm``).
* ``pin_copies``: copies from pageable memory come from pinned memory: the launch call returns at once (the trace's
  median asynchronous copy launch) and the copy runs at the pinned rate (the trace's own pinned host-to-device
  copies, else ``PINNED_HTOD_GBS`` for the device, else the slowest link there).
* ``non_blocking``: synchronize calls that wait only for host-to-device copies go (``.to(device)`` of pinned memory
  without ``non_blocking=True`` copies and then waits).
* ``dataloader_workers``: DataLoader ``__next__`` on the main thread takes ``LOADER_FETCH_US`` (a batch taken from
  workers that loaded it meanwhile), given enough workers on free cores to load one in the rest of the step.
* ``cuda_graphs``: each stretch of dense launches (launch calls, the ops that launch, the gaps between launches at
  most ``rules.DENSE_LAUNCH_GAP_US``: the host issuing work) between two things a graph cannot hold (a blocking
  call, DataLoader, compile, a warm-up call, host compute or untraced time longer than that, a wait, a step
  boundary), outside the
  optimizer's ``Optimizer.step``/``zero_grad`` (a fused or compiled optimizer is its own change), becomes one graph
  launch of ``GRAPH_LAUNCH_US`` (the small ops between the launches go with them: a replay skips them); its
  kernels start back to back; kernels are unchanged.
* ``amp``: GEMM, convolution and attention kernels in fp32 (on the CUDA cores) run at the device's bf16 matrix peak
  times the share of the fp32 peak they reach now; kernels in tf32 or lower precision (Tensor Cores) are unchanged.
* ``fuse_elementwise``: each run of consecutive memory-bound kernels (elementwise, reduction, norm) on a stream
  whose ops' bytes are known becomes one kernel moving the bytes of its largest op at the device's memory roof.
* ``overlap_comm``: collectives on their own stream stop holding other work back (no kernel and no blocking call
  waits for one): they overlap the compute available; their own time, a peer's included, stays.
* ``skip_warmup``: warm-up calls and cold first steps cost their later median (later steps profiled), and GPU work
  launched in them that waited for what the trace does not show (module loading) is no longer held.
* ``skip_compile``: compile spans cost nothing (compiled before the window, and no recompiles in it).

``host_compute`` is no fix but a measure: the host's own traced work (ops that launch nothing, Python outside
stretches of dense launches) taking no time; untraced time is unknown and never counts (``rules.host_causes``). What it saves bounds what moving that work to the GPU or
vectorizing it could buy; ``whatif`` weighs it with the fixes to name the cause, and never predicts a step from it.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ...trace.intervals import Coverage
from .lanes import GPU_COMM
from .rules import DENSE_LAUNCH_GAP_US
from .segments import (F_BLOCKING, F_COMPILE, F_ISSUING, F_LAUNCH, F_LOADER, F_OPTIMIZER, F_OWN, F_PAGEABLE,
                       F_TRACED, F_WARMUP)

# A batch taken from DataLoader workers that loaded it meanwhile: the median __next__ of the H200 DataLoader run
# with 4 workers in data/traces/gpu (260 us over its 3 profiled steps).
LOADER_FETCH_US = 260.0
# One cudaGraphLaunch of a captured region (NVIDIA's CUDA Graphs post: a graph launch costs about one kernel
# launch's host time, 5-10 us; perfkit rule: the high end).
GRAPH_LAUNCH_US = 10.0
# An asynchronous copy launch, where the trace has none to measure (the H200 pinned copies in data/traces/gpu: 19.5 us).
ASYNC_COPY_US = 20.0
# Pinned host-to-device copy rates in GB/s by device key (devices.DEVICES): about 85% of the PCIe link's
# 15.75 / 31.5 / 63 GB/s per direction (x16 gen 3 / 4 / 5); the H200 pinned copies in data/traces/gpu ran at 55.4.
PINNED_HTOD_GBS = {"V100-SXM2": 13.0, "V100-PCIe": 13.0, "T4": 13.0, "RTX-2080Ti": 13.0, "A10": 26.0,
                   "A100-40GB": 26.0, "A100-80GB": 26.0, "A100-80GB-PCIe": 26.0, "L4": 26.0, "L40S": 26.0,
                   "RTX-3090": 26.0, "RTX-4090": 26.0, "MI250": 26.0, "MI250X": 26.0, "H100-SXM": 53.0,
                   "H100-PCIe": 53.0, "H200": 53.0, "B200": 53.0, "MI300X": 53.0}
# Pinned copies the trace's own rate is read from: big enough that the copy's fixed cost does not set the rate.
MIN_RATE_BYTES = 1 << 20
MEMORY_BOUND_CLASSES = ("elementwise", "reduction", "norm")


def _with(g, seg=None, gpu=None, waits=None):
    return dataclasses.replace(g, seg={**g.seg, **(seg or {})}, gpu={**g.gpu, **(gpu or {})},
                               waits=g.waits if waits is None else waits)


def _drop_waits(g, runs: np.ndarray) -> dict:
    keep = ~np.isin(g.waits["run"], runs)
    return {k: v[keep] for k, v in g.waits.items()}


def _block_runs(g, mask: np.ndarray) -> np.ndarray:
    """Runs that start at a blocking call whose segments are in ``mask``."""
    first = g.runs["first"]
    return np.flatnonzero(mask[first])


def remove_syncs(g, ctx):
    blocking = ((g.seg["flags"] & F_BLOCKING) > 0) & ((g.seg["flags"] & F_PAGEABLE) == 0)
    blocking &= ~_on_collectives(g, blocking)
    runs = _block_runs(g, blocking)
    if not blocking.any():
        return None, "no blocking call other than pageable copies and waits on collectives"
    dur = np.where(blocking, 0.0, g.seg["dur"])
    return _with(g, seg={"dur": dur}, waits=_drop_waits(g, runs)), (
        f"the host no longer waits at {len(runs):,} blocking call(s) (.item(), .cpu(), synchronize): their time "
        "goes, the GPU work they waited for stays")


def pin_copies(g, ctx):
    pageable = (g.seg["flags"] & F_PAGEABLE) > 0
    if not pageable.any():
        return None, "no copy from pageable memory"
    rate = ctx.pinned_gbs
    calls = _call_ids(g, pageable)
    lengths = np.bincount(calls[pageable], weights=(g.seg["end"] - g.seg["start"])[pageable])
    scale = np.where(lengths > 0, np.minimum(ctx.async_copy_us / np.maximum(lengths, 1e-9), 1.0), 0.0)
    dur = g.seg["dur"].copy()
    dur[pageable] = (g.seg["end"] - g.seg["start"])[pageable] * scale[calls[pageable]]
    copies = _launched_in(g, pageable) & ctx.htod(g)
    nbytes = ctx.gpu_bytes(g)
    gdur = np.where(copies & (nbytes > 0), nbytes / (rate * 1e3), g.gpu["dur"])
    runs = _block_runs(g, pageable)
    return _with(g, seg={"dur": dur}, gpu={"dur": np.minimum(gdur, g.gpu["dur"])}, waits=_drop_waits(g, runs)), (
        f"{int(copies.sum()):,} pageable copies from pinned memory with non_blocking=True: each launch returns in "
        f"{ctx.async_copy_us:,.0f} us and copies at {rate:,.1f} GB/s ({ctx.pinned_source})")


def non_blocking(g, ctx):
    htod = ctx.htod(g)
    w = g.waits
    if not len(w["run"]):
        return None, "no blocking call"
    frame = pd.DataFrame({"run": w["run"], "htod": htod[w["gpu"]]})
    only = frame.groupby("run")["htod"].all()
    runs = only.index[only.to_numpy()].to_numpy()
    first = g.runs["first"]
    runs = runs[((g.seg["flags"][first[runs]] & F_PAGEABLE) == 0) & ~g.runs["shadow"][runs]]
    if not len(runs):
        return None, "no blocking call that waits only for a host-to-device copy"
    blocking = ((g.seg["flags"] & F_BLOCKING) > 0) & np.isin(g.seg["run"], runs)
    return _with(g, seg={"dur": np.where(blocking, 0.0, g.seg["dur"])}, waits=_drop_waits(g, runs)), (
        f"{len(runs):,} wait(s) for host-to-device copies go: .to(device, non_blocking=True) from pinned memory")


def dataloader_workers(g, ctx):
    loader = ((g.seg["flags"] & F_LOADER) > 0) & (g.seg["thread"] == 0)
    if not loader.any():
        return None, "no DataLoader __next__ on the main thread"
    calls = _call_ids(g, loader)
    lengths = np.bincount(calls[loader], weights=g.seg["dur"][loader])
    scale = np.where(lengths > LOADER_FETCH_US, LOADER_FETCH_US / np.maximum(lengths, 1e-9), 1.0)
    dur = g.seg["dur"].copy()
    dur[loader] *= scale[calls[loader]]
    per_step = float(np.median(lengths)) if len(lengths) else 0.0
    return _with(g, seg={"dur": dur}), (
        f"DataLoader __next__ takes {LOADER_FETCH_US:,.0f} us (a batch the workers loaded meanwhile; now a median "
        f"{per_step / 1e3:,.2f} ms): enough workers on free cores to load a batch in the rest of the step")


def cuda_graphs(g, ctx):
    seg, flags = g.seg, g.seg["flags"]
    region = _regions(g)
    launches = (flags & F_LAUNCH) > 0
    if not (region >= 0).any() or not (launches & (region >= 0)).any():
        return None, "no stretch of dense launches outside the optimizer"
    inside = region >= 0
    # What a graph replay skips: the launches, the ops around them (ops that launch nothing included: views,
    # allocations, shorter than DENSE_LAUNCH_GAP_US or they would end the region) and the gaps between them.
    issuing = inside & (((flags & (F_ISSUING | F_OWN)) > 0) | ((flags & F_TRACED) == 0))
    dur = np.where(issuing, 0.0, seg["dur"])
    at = np.flatnonzero(inside & launches)
    ids, first = np.unique(region[at], return_index=True)
    firsts = at[first].astype(np.int64)  # each region's first launch
    dur[firsts] = np.minimum(GRAPH_LAUNCH_US, seg["end"][firsts] - seg["start"][firsts] + GRAPH_LAUNCH_US)
    lseg = g.gpu["launch_seg"]
    # the launch call's own segment: the one after the point for work released at the call's start
    call_seg = np.clip(lseg + g.gpu["released_at_start"], 0, len(region) - 1)
    captured = (lseg >= 0) & inside[call_seg]
    first_of = np.full(int(region.max()) + 2, -1, dtype=np.int64)  # by region + 1 (-1: none)
    first_of[ids + 1] = firsts
    moved = first_of[region[np.clip(lseg, 0, len(region) - 1)] + 1]
    new_seg = np.where(captured & (moved >= 0), moved, lseg)
    gpu = {"launch_seg": new_seg.astype(np.int64), "launch_at_end": np.where(captured, True, g.gpu["launch_at_end"]),
           "launch_lat": np.where(captured, g.typical["launch_lat"], g.gpu["launch_lat"]),
           "gap": np.where(captured, np.minimum(g.gpu["gap"], g.typical["gap"]), g.gpu["gap"])}
    return _with(g, seg={"dur": dur}, gpu=gpu), (
        f"{len(ids):,} stretch(es) of dense launches ({int(captured.sum()):,} kernels) captured as CUDA graphs, "
        f"one {GRAPH_LAUNCH_US:g} us graph launch each (torch.compile(mode='reduce-overhead') or "
        "torch.cuda.graphs); the optimizer, syncs and host compute stay as they are")


def _regions(g) -> np.ndarray:
    """Per segment, the capturable stretch it belongs to (-1 for none; cuda_graphs doc)."""
    seg, flags = g.seg, g.seg["flags"]
    length = seg["end"] - seg["start"]
    barrier = ((flags & (F_BLOCKING | F_LOADER | F_COMPILE | F_OPTIMIZER | F_WARMUP)) > 0) | (
        ((flags & F_ISSUING) == 0) & (length > DENSE_LAUNCH_GAP_US))
    new = barrier | np.concatenate(([True], (seg["run"][1:] != seg["run"][:-1])
                                    | (seg["window"][1:] != seg["window"][:-1])
                                    | (seg["start"][1:] != seg["end"][:-1])))
    stretch = np.cumsum(new)
    out = np.where(barrier, -1, stretch)
    has_launch = np.zeros(stretch.max() + 1 if len(stretch) else 1, dtype=bool)
    has_launch[stretch[((flags & F_LAUNCH) > 0) & ~barrier]] = True
    return np.where((out >= 0) & has_launch[stretch], out, -1)


def amp(g, ctx):
    if ctx.device is None:
        return None, "the GPU is not in perfkit's device table: its bf16 peak is not known (perfkit gpu-kernels --peaks)"
    fp32 = ctx.device.peak_tflops("fp32", "vector")
    bf16 = ctx.device.peak_tflops("bf16", "matrix") or ctx.device.peak_tflops("fp16", "matrix")
    if not fp32 or not bf16:
        return None, f"{ctx.device.name} has no fp32 or bf16 peak in the device table"
    slow = ctx.fp32_matrix(g)
    if not slow.any():
        return None, "no GEMM, convolution or attention in fp32 (Tensor Cores already run, or no matrix work)"
    dur = np.where(slow, g.gpu["dur"] * fp32 / bf16, g.gpu["dur"])
    return _with(g, gpu={"dur": dur}), (
        f"{int(slow.sum()):,} fp32 GEMM/convolution/attention kernels run in bf16 on Tensor Cores "
        f"(torch.autocast(dtype=torch.bfloat16)) at the share of peak they reach now: {fp32:g} -> {bf16:g} TFLOP/s "
        f"({ctx.device.name}); the other kernels are unchanged")


def fuse_elementwise(g, ctx):
    if ctx.device is None or not ctx.device.mem_bw_gbs:
        return None, "the GPU's memory bandwidth is not known (perfkit gpu-kernels --peaks)"
    nbytes, memory = ctx.op_bytes(g), ctx.memory_bound(g)
    ok = memory & (nbytes > 0)
    prev = g.gpu["prev"]
    chained = ok & (prev >= 0) & ok[np.clip(prev, 0, None)]
    group = np.cumsum(~chained) - 1
    sizes = np.bincount(group[ok], minlength=group.max() + 1 if len(group) else 0)
    fused = ok & (sizes[group] >= 2)
    if not fused.any():
        return None, "no two consecutive memory-bound kernels with known bytes (record_shapes=True)"
    dur = g.gpu["dur"].copy()
    bw = ctx.device.mem_bw_gbs * 1e3  # bytes per us
    groups = np.unique(group[fused])
    first = np.array([np.flatnonzero(group == k)[0] for k in groups])
    most = pd.Series(nbytes[fused]).groupby(group[fused]).max().reindex(groups).to_numpy()
    total = pd.Series(dur[fused]).groupby(group[fused]).sum().reindex(groups).to_numpy()
    dur[fused] = 0.0
    dur[first] = np.minimum(most / bw, total)
    return _with(g, gpu={"dur": dur}), (
        f"{len(groups):,} run(s) of consecutive memory-bound kernels ({int(fused.sum()):,} kernels) fused into one "
        f"kernel each, moving its largest op's bytes at {ctx.device.mem_bw_gbs:,.0f} GB/s (torch.compile)")


def overlap_comm(g, ctx):
    comm = g.gpu["kind"] == GPU_COMM
    if not comm.any():
        return None, "no collective"
    lanes = np.unique(g.gpu["lane"][comm])
    if np.isin(g.gpu["lane"][~comm], lanes).any():
        return None, "the collectives share a stream with compute: overlap needs them on a stream of their own"
    cross = g.gpu["cross"]
    held = (cross >= 0) & comm[np.clip(cross, 0, None)]
    waits_comm = comm[g.waits["gpu"]]
    if not held.any() and not waits_comm.any():
        return None, "no kernel or host call waits for a collective: they already overlap"
    waits = {k: v[~waits_comm] for k, v in g.waits.items()}
    return _with(g, gpu={"cross": np.where(held, -1, cross)}, waits=waits), (
        f"{int(held.sum() + waits_comm.sum()):,} wait(s) for collectives go: the collectives overlap the compute "
        "available (DDP's bucketed all-reduce, FSDP's prefetch); their own time, a late peer's included, stays")


def skip_warmup(g, ctx):
    warm = (g.seg["flags"] & F_WARMUP) > 0
    if not warm.any():
        return None, "no warm-up call in the trace"
    # GPU work launched in warm-up time that waited for what the trace does not show (a kernel's module loading
    # on its first launch, cuDNN's first call) waited for the warm-up too: it is no longer held where it was.
    cold = _launched_in(g, warm) & (g.gpu["launch_seg"] >= 0)
    return _with(g, seg={"dur": np.where(warm, g.seg["steady"], g.seg["dur"])},
                 gpu={"base": np.where(cold, -np.inf, g.gpu["base"])}), (
        "warm-up calls and cold first steps cost their later median, and the GPU work they held waits no more: "
        "profile later steps (perfkit profile --wait 5)")


def skip_compile(g, ctx):
    compiling = (g.seg["flags"] & F_COMPILE) > 0
    if not compiling.any():
        return None, "no compile span"
    return _with(g, seg={"dur": np.where(compiling, 0.0, g.seg["dur"])}), (
        "compile spans cost nothing: compiled before the profiled steps, and no recompiles inside them "
        "(torch._dynamo.mark_dynamic, fixed shapes)")


def host_compute(g, ctx):
    flags = g.seg["flags"]
    own = ((flags & F_TRACED) > 0) & ((flags & F_ISSUING) == 0) & (g.seg["dur"] > 0) \
        & ((flags & (F_BLOCKING | F_LOADER | F_COMPILE | F_WARMUP)) == 0)
    if not own.any():
        return None, "no traced host work of its own"
    return _with(g, seg={"dur": np.where(own, 0.0, g.seg["dur"])}), (
        "the host's own traced work (ops that launch nothing, Python outside dense launches) takes no time: an "
        "upper bound on what moving it to the GPU or vectorizing it buys (untraced time is unknown, and left as it is)")


def _on_collectives(g, mask: np.ndarray) -> np.ndarray:
    """Segments of ``mask`` in a blocking call at least half of which a collective kernel ran through."""
    comm = g.gpu["kind"] == GPU_COMM
    out = np.zeros(len(mask), dtype=bool)
    if not comm.any() or not mask.any():
        return out
    cover = Coverage.of(g.gpu["start"][comm], g.gpu["end"][comm])
    calls = _call_ids(g, mask)
    idx = np.flatnonzero(mask)
    length = np.bincount(calls[idx], weights=(g.seg["end"] - g.seg["start"])[idx])
    under = np.bincount(calls[idx], weights=cover.within(g.seg["start"][idx], g.seg["end"][idx]))
    out[idx] = under[calls[idx]] >= 0.5 * length[calls[idx]]
    return out


def _launched_in(g, mask: np.ndarray) -> np.ndarray:
    """GPU events whose launch point lies in a segment of ``mask`` (a blocking launch releases its work at its
    start, inside its own segments)."""
    t = np.nan_to_num(g.gpu["launch_point"], nan=-np.inf)
    return Coverage.of(g.seg["start"][mask], g.seg["end"][mask]).covers(t) & np.isfinite(t)


def _call_ids(g, mask: np.ndarray) -> np.ndarray:
    """Per segment, a number for the contiguous stretch of ``mask`` it lies in (one call)."""
    start = mask & np.concatenate(([True], ~mask[:-1] | (g.seg["start"][1:] != g.seg["end"][:-1])))
    return np.cumsum(start) - 1


# The fixes in the order a tie between their savings goes (cheapest change first), with the cause each answers.
FIXES = (("skip_warmup", skip_warmup, "warm-up"), ("skip_compile", skip_compile, "compiling"),
         ("pin_copies", pin_copies, "sync-bound"), ("non_blocking", non_blocking, "sync-bound"),
         ("remove_syncs", remove_syncs, "sync-bound"), ("dataloader_workers", dataloader_workers, "input-bound"),
         ("cuda_graphs", cuda_graphs, "launch-bound"), ("amp", amp, "GPU-bound"),
         ("fuse_elementwise", fuse_elementwise, "GPU-bound"), ("overlap_comm", overlap_comm, "communication-bound"),
         ("host_compute", host_compute, "host-compute-bound"))
# Measures that name a cause but are no change a user can make: never the fix a verdict quotes, never in all_fixes.
MEASURES = ("host_compute",)
# Fixes that change the GPU's work; the others shorten the host's side of the step.
GPU_SIDE = ("amp", "fuse_elementwise", "overlap_comm")
