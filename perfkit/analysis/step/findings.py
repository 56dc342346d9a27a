"""Findings of ``cpu_bound``: the verdict read back as a fix the user can act on, and the notes
below it (compile time, tiny kernels, DataLoader share, copy ops). Each names its evidence and the
threshold that fired (``rules``)."""
from __future__ import annotations

import pandas as pd

from ...results import Finding
from ...trace.recorded import Machine
from ..classify import graph_launch_mask
from ..host_ops import COPY_OPS
from .rules import (COMPILE_NOTE_SHARE, COMPILE_SHARE, COPY_OPS_SHARE, DATALOADER_NOTE_SHARE, HOST_AHEAD_MIN_US,
    LOW_UTILIZATION, MENTION_SHARE, TINY_KERNEL_MIN_COUNT, TINY_KERNEL_SHARE)
from .host_work import host_compute_fix, top_host_work
from .intraop import cpu_fix_parts, threads_finding, workers_running
from .warmup import warmup_text

FIXES = {
    "GPU-bound": "Make the kernels faster: perfkit gpu-kernels says what their time calls for (FP32 matrix work "
                 "on the CUDA cores: mixed precision; memory-bound kernels: fuse them with torch.compile; GEMMs "
                 "below peak: their shapes and sizes); the top kernels in the trace are where the time goes.",
    "launch-bound": "Issue fewer, larger GPU operations per step: torch.compile (mode='reduce-overhead' "
                    "adds CUDA graphs), fuse small ops (foreach/fused optimizers), batch environments/samples.",
    "communication-bound": "Hide the collectives under compute: DDP overlaps gradient all-reduce with backward "
                           "(check bucket_cap_mb and that no hook or sync serializes them), accumulate gradients "
                           "with no_sync() to all-reduce less often, use a larger batch per rank; a collective "
                           "that waits for a slower peer shows as communication: profile every rank and run "
                           "`perfkit ranks` to see arrival skew.",
    "input-bound": "Feed the GPU in the background: DataLoader(num_workers>0, pin_memory=True, "
                   "persistent_workers=True, prefetch_factor=2+), or move preprocessing onto the GPU.",
    "sync-bound": "Remove host-device syncs from the step (run `perfkit sync-points TRACE` to find each one and its "
                  "source line): keep values on the GPU instead of .item()/.cpu()/print, use non_blocking copies.",
}
_COMPILED_LAUNCH_FIX = ("The model already runs torch.compile'd code ({regions} compiled region(s)), so 'use "
                        "torch.compile' is done: cut launches further with CUDA/HIP graphs (torch.compile("
                        "mode='reduce-overhead') or torch.cuda.graphs), remove graph breaks so more of the step "
                        "runs compiled (TORCH_LOGS=graph_breaks), and move per-step Python work out of the loop.")
_CPU_INPUT_FIX = ("Load data in the background: DataLoader(num_workers>0, persistent_workers=True, prefetch_factor=2+) "
                  "so the next batch is ready when the step needs it; make per-sample transforms cheaper or batch "
                  "them. (No GPU activity was recorded, so pin_memory does not apply.)")
_WORKERS_INPUT_FIX = ("The DataLoader already runs worker processes (_MultiProcessingDataLoaderIter), and the step still "
                      "waits for batches: raise num_workers (to the cores free), keep them alive "
                      "(persistent_workers=True) and ahead (prefetch_factor=4), make the per-sample transform or "
                      "collate cheaper (batch it, move it to the GPU), or preload a dataset that fits onto the GPU.")
# A GPU-bound step whose GPU time is mostly copies: the fix is about the copies, not the kernels (an A100
# step moving 154 MB pageable host-to-device and back, 0 kernels, was told "mixed precision, torch.compile").
COPY_FIX = ("{share:.0%} of the GPU's busy time is copies, not kernels: pin the host side (tensor.pin_memory(), "
            "DataLoader(pin_memory=True)) and copy with non_blocking=True so copies overlap compute, and copy less "
            "(keep tensors on the GPU between steps, copy once per step, in a compact dtype such as uint8 or bf16).")
# Copies at or above this share of GPU busy time make the GPU-bound fix the copy fix.
COPY_BOUND_SHARE = 0.50
_COMPILED_GPU_FIX = ("The model already runs torch.compile'd code, so fusing by compiling is done: make the kernels "
                     "themselves faster (perfkit gpu-kernels lists the top ones): mixed precision (torch.autocast), larger "
                     "or better-shaped matmuls (multiples of 8/16), torch.compile(mode='max-autotune') for the GEMMs.")
_WARMUP = ("Profile after warm-up: let the compiled code run a few steps before the profiler records "
           "(torch.profiler.schedule(wait=1, warmup=3, active=5)), so the numbers measure the loop.")
_RECOMPILE = ("It compiled in {k} of {n} steps, so it is recompiling: run with TORCH_LOGS=recompiles to see which "
              "guard fails (shapes that change every step: torch._dynamo.mark_dynamic or dynamic=True; Python "
              "numbers or strings passed as arguments are baked into the graph).")


def findings(r: dict, o: dict, copy_us: float, machine: Machine = Machine()) -> list[Finding]:
    """All findings of a cpu_bound result: ``r`` its fields, ``o`` its overall numbers, ``copy_us``
    time in outermost copy/convert ops, ``machine`` the load the trace recorded (``trace.recorded``)."""
    compiled = (r["compile"] or {}).get("compiled_regions", 0)
    out = [verdict_finding(r["verdict"], r["evidence"], o, {**r, "machine": machine}, compiled)]
    out += threads_finding(r["verdict"], machine, r.get("annotations"))
    out += _compile_finding(r["verdict"], o, r["steps"])
    if r["has_gpu"] and o["kernels"] > TINY_KERNEL_MIN_COUNT and o["tiny_kernels"] > TINY_KERNEL_SHARE * o["kernels"]:
        out.append(Finding(
            "medium", f"{o['tiny_kernel_pct']:.0f}% of {int(o['kernels']):,} kernels run under {r['tiny_kernel_us']:g} us",
            {"tiny_kernels": int(o["tiny_kernels"]), "kernels": int(o["kernels"]),
             "launches_per_step": o["launches_per_step"], "mean_launch_us": o["mean_launch_us"]},
            "Fuse the small ops (torch.compile, foreach/fused optimizers, batched tensors) so each launch does more work.",
            f"more than {TINY_KERNEL_SHARE:.0%} of more than {TINY_KERNEL_MIN_COUNT} kernels are short "
            "(torch-tb-profiler short-kernel rule)"))
    return out + _dataloader_finding(r["verdict"], o) + _copy_finding(r["ops"], copy_us, o)


# What decided the verdict, not evidence: the finding's threshold text says it.
_DECIDING = ("rule", "decided_by", "share_verdict")


def verdict_finding(verdict: str, evidence: dict, o: dict, tables: dict, compiled_regions: int = 0) -> Finding:
    """The verdict as a finding: a title with the deciding number, its evidence, a fix that fits
    the trace (a compiled model is not told to use torch.compile) and the thresholds. ``tables``:
    the result's ``steps``, ``ops`` and ``annotations``. Its evidence leaves out the shares that are 0
    (no compile spans, no collectives, ...) and what decided (the threshold says it): the result's ``evidence`` keeps
    every one."""
    numbers = {k: v for k, v in evidence.items()
               if v is not None and not (isinstance(v, (int, float)) and v == 0) and not k.startswith("threshold_")
               and k not in _DECIDING}
    numbers.update(wall_us=o["wall_us"], gpu_busy_us=o["gpu_busy_us"], host_busy_us=o["host_busy_us"],
                   compile_us=o["compile_us"], median_queue_delay_us=o["median_queue_delay_us"])
    return Finding(_severity(verdict, evidence, o), _title(verdict, evidence, o, tables), numbers,
                   _fix(verdict, evidence, o, tables, compiled_regions), _threshold_text(evidence))


def copy_share(steps: pd.DataFrame) -> float:
    """Copies' share of the GPU's busy time over the full steps (``copy_busy_us`` / ``gpu_busy_us``)."""
    full = steps[steps["verdict"] != "partial step"] if "verdict" in steps else steps
    busy = float(full["gpu_busy_us"].sum())
    return float(full["copy_busy_us"].sum()) / busy if busy > 0 else 0.0


def copy_bound(steps) -> bool:
    return steps is not None and len(steps) > 0 and "copy_busy_us" in steps and copy_share(steps) >= COPY_BOUND_SHARE


def later_steps_text(steps: pd.DataFrame) -> str:
    """" The 2 steps after it: GPU-bound 1, launch-bound 1.": what the steps that are not warm-up say, for a
    warm-up verdict (the cause behind it); "" when every step is warm-up."""
    verdicts = steps["verdict"][~steps["verdict"].isin(("warm-up", "partial step"))] if len(steps) else steps
    if not len(verdicts):
        return ""
    counts = ", ".join(f"{v} {c}" for v, c in verdicts.value_counts().items())
    return f" The {len(verdicts)} step(s) after the warm-up: {counts}."


def _behind_text(e: dict) -> str:
    """" What is left of the window looks launch-bound: ..." from ``rules.decide``'s ``behind_warmup`` (its fix
    is not given: one-time work distorts what is left, and the first thing to do is profile later steps)."""
    behind = e.get("behind_warmup")
    if not behind or behind == "warm-up":
        return ""
    return f" What is left of the window looks {behind}: judge it on a profile of later steps."


def graph_launches(launches) -> int:
    """CUDA/HIP graph replays among a step table's launch calls (``cpu_bound``'s ``launches``)."""
    return 0 if launches is None or launches.empty else int(graph_launch_mask(launches["name"]).sum())


def _graphed_launch_fix(launches: pd.DataFrame, o: dict) -> str:
    """Launch-bound although the step replays CUDA graphs: what is left to capture is the launches outside
    the graphs, named by the op the user called around them."""
    n = max(o["steps"], 1)
    graphed = graph_launch_mask(launches["name"])
    outside = launches[~graphed]
    ops = outside["top_op"].astype(str)
    optimizer = ops.str.startswith(("aten::_foreach_", "aten::_fused_"))
    ops = ops.where(~optimizer, "the optimizer's foreach ops").replace("", "(no op)")
    tops = ops.value_counts().head(5)
    listed = ", ".join(f"{name} {count / n:.0f}" for name, count in tops.items())
    optimizer = bool(optimizer.any())
    return (f"The step already replays CUDA graphs ({graphed.sum() / n:.0f} graph launch(es) per step, as "
            f"torch.compile(mode='reduce-overhead') or torch.cuda.graphs make): the GPU waits on the "
            f"{len(outside) / n:.0f} launches per step outside them (by op, per step: {listed}) and the Python "
            "between them. Capture those too: move the ops listed into the compiled function"
            + (", compile the optimizer step (torch.compile(optimizer.step)) or use a fused optimizer "
               "(Adam/AdamW(fused=True): one launch per step)" if optimizer else "")
            + ", and give each launch more work (a larger batch).")


def _severity(verdict: str, evidence: dict, o: dict) -> str:
    if verdict == "GPU-bound":
        return "info"
    if verdict in ("compiling", "warm-up", "GPU activity not recorded", "host activity not recorded"):
        return "high"    # the window measures one-time work, or not the GPU: every other number in it misleads
    if evidence["gpu_busy_share"] is None or verdict == "GPU-bound (host ahead)":
        return "medium"  # no GPU events, or a GPU that is fed: the idle share is not the host's doing
    busy = o["gpu_busy_us"] / o["wall_us"] if o["wall_us"] else 0.0
    return "high" if busy < LOW_UTILIZATION else "medium"


def _title(verdict: str, e: dict, o: dict, tables: dict) -> str:
    n = o["steps"]
    if verdict == "GPU activity not recorded":
        return (f"GPU activity not recorded: {int(o['launches']):,} kernel launches but no kernels; the trace lists "
                f"{_devices_text(tables.get('devices', ()))}")
    if verdict == "host activity not recorded":
        return (f"host activity not recorded: {int(o['kernels']):,} kernels and no host event; GPU busy "
                f"{o['gpu_busy_pct']:.0f}% of {n} window(s)")
    if verdict == "warm-up":
        return (f"warm-up: one-time work holds {o['warmup_us'] / 1e3:,.1f} ms of {o['wall_us'] / 1e3:,.1f} ms "
                f"({e['warmup_share']:.0%}) over {n} step(s): {warmup_text(tables['warmup'], 2)}")
    if verdict == "communication-bound":
        exposed = o["comm_exposed_us"] - o.get("comm_exposed_warmup_us", 0.0)  # the share's own time base
        return (f"communication-bound: collectives not hidden under compute take {exposed / 1e3:,.2f} ms "
                f"of {_ms(o['wall_us'] - o['warmup_us'])} ({e['comm_exposed_share']:.0%}); GPU busy "
                f"{o['gpu_busy_pct']:.0f}% of {n} step(s)" + ("" if e["gpu_busy_share"] >= e["threshold_gpu_bound_busy"]
                else f"; host blocked in syncs {e['sync_share']:.0%}, waiting on them"
                if e["sync_share"] >= e["threshold_sync_share"] else ""))
    if verdict == "launch-bound":
        return (f"launch-bound: {e['launches_per_step']:,.0f} launches per step, median kernel "
                f"{_us(e['median_kernel_us'])}; the host issuing them holds {e['issuing_idle_share']:.0%} of the step "
                f"while the GPU idles (GPU busy {o['gpu_busy_pct']:.0f}%)")
    if verdict == "host-compute-bound":
        top = top_host_work(tables, o)
        return (f"host-compute-bound: {top['what']} {top['share']:.0%} of the step while the GPU is busy "
                f"{o['gpu_busy_pct']:.0f}% ({e['launches_per_step']:,.0f} launches per step)")
    if verdict == "compiling":
        return (f"compiling: torch.compile compiled for {o['compile_us'] / 1e6:.2f} s of {o['wall_us'] / 1e6:.2f} s "
                f"({e['compile_share']:.0%}) over {n} step(s)")
    if verdict == "CPU-only trace":
        # the share its bullet states ("host busy N% of the step"): of the step less its warm-up calls
        return f"CPU-only trace: no GPU activity; host busy {e['host_busy_share']:.0%} of {n} step(s)"
    if verdict == "GPU-bound (host ahead)":
        return (f"GPU-bound (host ahead): kernels start a median {e['queue_delay_us'] / 1e3:.1f} ms after their launch "
                f"({e['queue_delay_share']:.0%} of a step); GPU busy {o['gpu_busy_pct']:.0f}% of {n} step(s)")
    lead = {"sync-bound": ("host blocked in syncs", "sync_share"), "input-bound": ("DataLoader", "dataloader_share")}
    if verdict in lead:
        what, key = lead[verdict]
        return f"{verdict}: {what} {e[key]:.0%} of the step; GPU busy {o['gpu_busy_pct']:.0f}% of {n} step(s)"
    return f"{verdict}: GPU busy {o['gpu_busy_pct']:.0f}% of {n} step(s)"


def _fix(verdict: str, e: dict, o: dict, tables: dict, compiled_regions: int) -> str:
    if verdict == "compiling":
        return _compile_fix(tables["steps"])
    if verdict == "CPU-only trace":
        return _cpu_only_fix(e, tables["ops"], tables["annotations"], tables.get("devices", ()),
                             tables.get("machine", Machine()))
    if verdict == "GPU-bound (host ahead)":
        blocked = (f" The host time blocked in syncs ({e['sync_share']:.0%} of the step) is the host waiting for "
                   "that queue, not a cause." if e["sync_share"] >= MENTION_SHARE else "")
        return (f"The host is {e['queue_delay_us'] / 1e3:.1f} ms ahead of the GPU: work is queued, so removing syncs "
                f"or launch overhead will not shorten the step.{blocked} The GPU's idle time in the window "
                f"({100 - o['gpu_busy_pct']:.0f}%) lies at the window's edges or in GPU-side waits (streams waiting "
                "on each other, collectives, work issued before the profiler started): check the GPU timeline, then "
                "make the GPU work faster (the top kernels; mixed precision, fused kernels).")
    if verdict == "input-bound" and workers_running(tables.get("annotations")):
        return _WORKERS_INPUT_FIX
    if verdict == "input-bound" and e["gpu_busy_share"] is None:
        return _CPU_INPUT_FIX
    if verdict == "GPU-bound" and copy_bound(tables.get("steps")):
        return COPY_FIX.format(share=copy_share(tables["steps"]))
    if verdict == "GPU-bound" and compiled_regions:
        return _COMPILED_GPU_FIX
    if verdict == "launch-bound" and graph_launches(tables.get("launches")):
        return _graphed_launch_fix(tables["launches"], o)
    if verdict == "launch-bound" and compiled_regions:
        return _COMPILED_LAUNCH_FIX.format(regions=compiled_regions)
    if verdict == "GPU activity not recorded":
        return (f"Record the GPU: the trace lists {_devices_text(tables.get('devices', ()))} and the host launched "
                "work, but no kernel, copy or memset was recorded, so nothing can say whether the GPU or the host "
                "limits the step. Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (CUPTI must "
                "be loadable: check that libcupti is on the library path and that no other profiler holds it).")
    if verdict == "host activity not recorded":
        return ("Record the host: the trace holds the GPU's work but no host event (no op, runtime call or Python), "
                "so what the GPU waits for is unmeasured and nothing here can say whether the host limits the step. "
                "Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] and schedule the steps with "
                "prof.step().")
    if verdict == "warm-up":
        return ("Profile after warm-up: start recording once the first steps have run (perfkit profile --wait 5, "
                "or torch.profiler.schedule(wait=1, warmup=3, active=5)); what is set apart is one-time cost "
                "(CUDA context and module loading, cuBLAS/cuDNN handles and autotuning, model initialization, "
                f"lazy initialization).{later_steps_text(tables['steps']) or _behind_text(e)}")
    if verdict == "host-compute-bound":
        return host_compute_fix(top_host_work(tables, o), e, tables.get("stacks", False))
    return FIXES[verdict]


def _compile_fix(steps: pd.DataFrame) -> str:
    k, n = int((steps["compile_us"] > 0).sum()), len(steps)
    text = _WARMUP
    if k >= 2:
        text += " " + _RECOMPILE.format(k=k, n=n)
    return text + (" Across runs, keep Inductor's on-disk caches (TORCHINDUCTOR_CACHE_DIR on persistent storage) "
                   "so a restart compiles less.")


def _cpu_only_fix(e: dict, ops: pd.DataFrame, annotations: pd.DataFrame, devices=(), machine: Machine = Machine()) -> str:
    top = ops[ops["cat"] == "cpu_op"].head(3)
    cpu_kernels = ops["name"].astype(str).str.startswith(CPU_KERNEL_PREFIXES) if len(ops) else pd.Series(dtype=bool)
    if devices and cpu_kernels.any():  # the machine has a GPU and the model's ops ran on the CPU's kernels
        return (f"The model ran on the CPU: the trace lists {_devices_text(devices)}, but its ops ran CPU kernels "
                f"({', '.join(ops['name'][cpu_kernels].astype(str).head(2))}) and launched nothing. Move the model and "
                "each batch to the GPU (model.to('cuda'), x.to('cuda', non_blocking=True)), then profile again.")
    listed = ", ".join(f"{n} {p:.0f}%" for n, p in zip(top["name"], top["self_pct"])) or "none recorded"
    ranges = "; ".join(f"{n} {t / 1e3:,.1f} ms in {c} call(s)" for n, t, c in
                       zip(annotations["name"].head(2), annotations["total_us"], annotations["count"]))
    ranges = f" The longest record_function ranges: {ranges}." if ranges else ""
    loader = f" The DataLoader takes {e['dataloader_share']:.0%} of the step" + (
        ", its workers already running: make each sample cheaper (batch the per-sample transforms); more workers "
        "on shared cores compete with the ops." if workers_running(annotations) else
        ": load in background workers (DataLoader(num_workers>0, persistent_workers=True)).")
    loader = loader if e["dataloader_share"] >= DATALOADER_NOTE_SHARE else ""
    compete, threads = cpu_fix_parts(machine, annotations)
    return (f"No GPU activity was recorded: the step is host time.{ranges}{compete} Speed up the host work where it "
            f"goes (top ops by self time: {listed}): batch per-sample Python loops into tensor ops{threads}, "
            f"move logging and bookkeeping out of the loop.{loader} If this job should use a GPU, "
            "check that the model and batches are on it (.to('cuda')) and profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA].")


# Ops that are CPU kernels by name: oneDNN (mkldnn) convolutions and linear layers, and their quantized forms.
CPU_KERNEL_PREFIXES = ("aten::mkldnn_", "mkldnn::", "aten::_mkldnn", "onednn::", "quantized::")


def _threshold_text(e: dict) -> str:
    if e.get("decided_by") == "replay":
        return f"{e['rule']} (each fix replayed on the steps' dependency graph: perfkit whatif)"
    return (f"{e['rule']}; thresholds as shares of step wall time: compiling>={e['threshold_compile_share']:.0%} "
            f"and the largest cause, GPU-bound>={e['threshold_gpu_bound_busy']:.0%} busy, "
            f"input>={e['threshold_input_share']:.0%}, host ahead: median launch delay>="
            f"{e['threshold_host_ahead_share']:.0%} and >={HOST_AHEAD_MIN_US:g} us, sync>={e['threshold_sync_share']:.0%} (perfkit rules, see "
            f"analysis/step/rules.py); busy<{LOW_UTILIZATION:.0%} is 'low utilization' in torch-tb-profiler")


def _compile_finding(verdict: str, o: dict, steps: pd.DataFrame) -> list[Finding]:
    """Compile time that did not decide the verdict but is in the window."""
    share = o["compile_us"] / o["wall_us"] if o["wall_us"] else 0.0
    if verdict == "compiling" or share < COMPILE_NOTE_SHARE:
        return []
    k = int((steps["compile_us"] > 0).sum())
    return [Finding("medium" if share >= COMPILE_SHARE else "low",
                    f"torch.compile compiled for {o['compile_us'] / 1e6:.2f} s in {k} of {o['steps']} step(s) "
                    f"({share:.0%} of wall time)",
                    {"compile_us": o["compile_us"], "share": share, "steps_with_compile": k},
                    _compile_fix(steps), f">= {COMPILE_NOTE_SHARE:.0%} of wall time (perfkit rule)")]


def _dataloader_finding(verdict: str, o: dict) -> list[Finding]:
    share = o["dataloader_us"] / o["wall_us"] if o["wall_us"] else 0.0
    if verdict in ("input-bound", "CPU-only trace") or share <= DATALOADER_NOTE_SHARE:
        return []
    return [Finding("low", f"DataLoader takes {share:.1%} of step time",
                    {"dataloader_us_per_step": o["dataloader_us"] / max(o["steps"], 1), "share": share},
                    FIXES["input-bound"], f"> {DATALOADER_NOTE_SHARE:.0%} of step time (torch-tb-profiler)")]


def _copy_finding(ops: pd.DataFrame, copy_us: float, o: dict) -> list[Finding]:
    if not o["host_busy_us"] or copy_us < COPY_OPS_SHARE * o["host_busy_us"]:
        return []
    copies = ops[ops["name"].isin(COPY_OPS) & (ops["cat"] == "cpu_op")]
    return [Finding("low", f"copy/convert ops take {copy_us / o['host_busy_us']:.0%} of host busy time",
                    {f"{n}_count": int(c) for n, c in zip(copies["name"], copies["count"])} | {"time_us": copy_us},
                    "Create tensors on the target device and dtype (torch.zeros(..., device=...)) instead of "
                    "converting every step; convert once outside the loop.",
                    f">= {COPY_OPS_SHARE:.0%} of host busy time (perfkit rule)")]


def _devices_text(devices) -> str:
    names = [str(d.get("name") or "?") for d in devices if isinstance(d, dict)]
    if not names:
        return "no GPUs in deviceProperties"
    counts = {n: names.count(n) for n in dict.fromkeys(names)}
    return ", ".join(f"{n} x{c}" if c > 1 else n for n, c in counts.items())


def _ms(us: float) -> str:
    return f"{us / 1e3:,.2f} ms"


def _us(us: float) -> str:
    return "-" if us != us else f"{us / 1e3:,.2f} ms" if us >= 1e3 else f"{us:,.1f} us"


