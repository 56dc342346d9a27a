"""The verdict's text (``perfkit.analysis.step.findings``) reads its thresholds from the evidence, never its own;
the findings below the verdict fire on each side of their thresholds (``rules``), on numbers built in the test."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.step import findings as sf
from perfkit.analysis.step import rules
from perfkit.analysis.step.findings import _title


def _evidence(busy: float, sync: float, gpu_bound_busy: float, sync_share: float) -> dict:
    return {"comm_exposed_share": 0.4, "gpu_busy_share": busy, "sync_share": sync,
            "threshold_gpu_bound_busy": gpu_bound_busy, "threshold_sync_share": sync_share}


_OVERALL = {"steps": 1, "comm_exposed_us": 4000.0, "comm_exposed_warmup_us": 0.0, "wall_us": 10_000.0,
            "warmup_us": 0.0, "gpu_busy_pct": 85.0}


@pytest.mark.parametrize("gpu_bound_busy, sync_share, mentions", [
    (0.90, 0.10, True),    # busy 85% is under a raised GPU-bound line: the host's waits are named
    (0.80, 0.10, False),   # over the default line: the GPU is busy, nothing to say of waits
    (0.90, 0.25, False),   # the waits (20%) under a raised sync line
])
def test_the_communication_title_follows_the_thresholds_in_force(gpu_bound_busy, sync_share, mentions):
    title = _title("communication-bound", _evidence(0.85, 0.20, gpu_bound_busy, sync_share), _OVERALL, {})
    assert ("host blocked in syncs 20%" in title) == mentions


def test_exposed_collectives_are_quoted_on_the_shares_time_base():
    overall = dict(_OVERALL, comm_exposed_us=6_000.0, comm_exposed_warmup_us=2_000.0, warmup_us=5_000.0)
    title = _title("communication-bound", _evidence(0.85, 0.0, 0.8, 0.1), overall, {})
    assert "take 4.00 ms of 5.00 ms" in title  # not 6 ms of 5 ms (120%)


# -- the finding thresholds (``rules``' second block), one row on each side of each --------------------------
_T = {"compile_share": rules.COMPILE_SHARE, "gpu_bound_busy": rules.GPU_BOUND_BUSY, "input_share": rules.INPUT_SHARE,
      "host_ahead_share": rules.HOST_AHEAD_SHARE, "sync_share": rules.SYNC_SHARE}
_WALL = 10_000.0  # us, one step


def _gpu_bound_result(**overall) -> tuple[dict, dict]:
    """A GPU-bound one-step result (fields and overall numbers) with nothing below the verdict, and ``overall``
    changed."""
    evidence = rules.decide({"wall_us": _WALL, "gpu_busy_us": 9_000.0, "launches": 40, "tiny_kernel_pct": 0.0,
                             "queue_delay_us": 10.0}, _T)[1]
    o = {"wall_us": _WALL, "gpu_busy_us": 9_000.0, "host_busy_us": 5_000.0, "compile_us": 0.0, "warmup_us": 0.0,
         "median_queue_delay_us": 10.0, "steps": 1, "gpu_busy_pct": 90.0, "kernels": 50, "tiny_kernels": 0,
         "tiny_kernel_pct": 0.0, "launches_per_step": 40.0, "mean_launch_us": 5.0, "dataloader_us": 0.0, **overall}
    r = {"verdict": "GPU-bound", "evidence": evidence, "compile": None, "has_gpu": True, "tiny_kernel_us": 10.0,
         "steps": pd.DataFrame({"compile_us": [o["compile_us"]]}),
         "ops": pd.DataFrame({"name": ["aten::copy_"], "cat": ["cpu_op"], "count": [3]})}
    return r, o


@pytest.mark.parametrize("overall, copy_us, title", [
    pytest.param({}, 0.0, None, id="nothing-below-the-verdict"),
    pytest.param({"kernels": 101, "tiny_kernels": 51}, 0.0, "of 101 kernels run under", id="TINY_KERNEL-both-above"),
    pytest.param({"kernels": 101, "tiny_kernels": 50}, 0.0, None, id="TINY_KERNEL_SHARE-at-half"),
    pytest.param({"kernels": 100, "tiny_kernels": 100}, 0.0, None, id="TINY_KERNEL_MIN_COUNT-at-100"),
    pytest.param({"dataloader_us": 501.0}, 0.0, "DataLoader takes", id="DATALOADER_NOTE_SHARE-above"),
    pytest.param({"dataloader_us": 500.0}, 0.0, None, id="DATALOADER_NOTE_SHARE-at"),
    pytest.param({}, 500.0, "copy/convert ops take", id="COPY_OPS_SHARE-at"),
    pytest.param({}, 499.0, None, id="COPY_OPS_SHARE-under"),
    pytest.param({"compile_us": 100.0}, 0.0, "torch.compile compiled", id="COMPILE_NOTE_SHARE-at"),
    pytest.param({"compile_us": 99.0}, 0.0, None, id="COMPILE_NOTE_SHARE-under"),
])
def test_findings_below_the_verdict(overall, copy_us, title):
    r, o = _gpu_bound_result(**overall)
    below = [f.title for f in sf.findings(r, o, copy_us)[1:]]
    assert len(below) == (0 if title is None else 1) and all(title in t for t in below)


@pytest.mark.parametrize("compile_us, severity", [
    pytest.param(1_000.0, "medium", id="COMPILE_SHARE-at"),
    pytest.param(999.0, "low", id="COMPILE_SHARE-under"),
])
def test_compile_finding_severity(compile_us, severity):
    r, o = _gpu_bound_result(compile_us=compile_us)
    assert [f.severity for f in sf._compile_finding("GPU-bound", o, r["steps"])] == [severity]


@pytest.mark.parametrize("gpu_busy_us, severity", [
    pytest.param(5_000.0, "medium", id="LOW_UTILIZATION-at"),
    pytest.param(4_999.0, "high", id="LOW_UTILIZATION-under"),
])
def test_verdict_severity_from_gpu_utilization(gpu_busy_us, severity):
    assert sf._severity("sync-bound", {"gpu_busy_share": gpu_busy_us / _WALL},
                        {"gpu_busy_us": gpu_busy_us, "wall_us": _WALL}) == severity


@pytest.mark.parametrize("copy_busy_us, bound", [
    pytest.param(5_000.0, True, id="COPY_BOUND_SHARE-at"),
    pytest.param(4_999.0, False, id="COPY_BOUND_SHARE-under"),
])
def test_a_gpu_busy_with_copies_gets_the_copy_fix(copy_busy_us, bound):
    assert sf.copy_bound(pd.DataFrame({"gpu_busy_us": [10_000.0], "copy_busy_us": [copy_busy_us]})) is bound


@pytest.mark.parametrize("sync_share, mentioned", [
    pytest.param(0.01, True, id="MENTION_SHARE-at"),
    pytest.param(0.0099, False, id="MENTION_SHARE-under"),
])
def test_host_ahead_fix_mentions_blocked_time_from_one_percent(sync_share, mentioned):
    e = {"sync_share": sync_share, "queue_delay_us": 2_000.0}
    fix = sf._fix("GPU-bound (host ahead)", e, {"gpu_busy_pct": 60.0}, {}, 0)
    assert ("host time blocked in syncs" in fix) is mentioned


@pytest.mark.parametrize("dataloader_share, mentioned", [
    pytest.param(0.05, True, id="DATALOADER_NOTE_SHARE-at"),
    pytest.param(0.049, False, id="DATALOADER_NOTE_SHARE-under"),
])
def test_cpu_only_fix_names_the_dataloader_from_five_percent(dataloader_share, mentioned):
    ops = pd.DataFrame({"name": ["aten::add"], "cat": ["cpu_op"], "self_pct": [50.0]})
    annotations = pd.DataFrame({"name": [], "total_us": [], "count": []})
    fix = sf._cpu_only_fix({"dataloader_share": dataloader_share}, ops, annotations)
    assert ("The DataLoader takes" in fix) is mentioned


def test_the_verdict_findings_evidence_leaves_out_the_shares_that_are_zero():
    """The findings table's evidence cell lists what there is, not every rule's 0 % share; the
    result's own evidence keeps them all."""
    r, o = _gpu_bound_result()
    finding = sf.verdict_finding(r["verdict"], r["evidence"], o, r)
    zero = [k for k, v in r["evidence"].items() if v == 0 and not k.startswith("threshold_")]
    assert zero and not set(zero) & set(finding.evidence)
    assert finding.evidence["gpu_busy_share"] == r["evidence"]["gpu_busy_share"] > 0


# -- every verdict's finding: severity, title, fix and threshold, word for word -----------------------------
# One small two-step window (10 ms, GPU busy 30% unless a case says more); the texts are what a user reads.
def _decided(kind="gpu", **shares) -> tuple[str, dict]:
    r = {"wall_us": _WALL, "steps": 2, "launches": shares.pop("launches", 40), "tiny_kernel_pct": 0.0,
         "median_kernel_us": 5.0, "queue_delay_us": shares.pop("queue_delay_us", 10.0),
         "warmup_us": shares.pop("warmup", 0.0) * _WALL, "gpu_busy_us": shares.pop("gpu_busy", 0.3) * _WALL}
    r.update({f"{k}_us": v * _WALL for k, v in shares.items()})
    return rules.decide(r, _T, kind)


_O2 = {"wall_us": _WALL, "gpu_busy_us": 3_000.0, "host_busy_us": 6_000.0, "compile_us": 0.0, "warmup_us": 0.0,
       "median_queue_delay_us": 10.0, "steps": 2, "gpu_busy_pct": 30.0, "kernels": 50, "tiny_kernels": 0,
       "tiny_kernel_pct": 0.0, "launches_per_step": 20.0, "mean_launch_us": 5.0, "dataloader_us": 0.0, "launches": 40,
       "comm_exposed_us": 0.0, "python_us": 1_000.0, "untraced_us": 500.0}


def _tables(**changed) -> dict:
    from perfkit.analysis.step.warmup import COLUMNS
    tables = {
        "steps": pd.DataFrame({"compile_us": [0.0, 0.0], "verdict": ["launch-bound", "launch-bound"],
                               "gpu_busy_us": [1_500.0, 1_500.0], "copy_busy_us": [0.0, 0.0]}),
        "ops": pd.DataFrame({"name": ["aten::add", "aten::copy_"], "cat": ["cpu_op", "cpu_op"],
                             "self_pct": [40.0, 10.0], "count": [4, 2]}),
        "annotations": pd.DataFrame({"name": ["## fwd ##"], "total_us": [3_000.0], "count": [2]}),
        "devices": [{"name": "NVIDIA H100"}, {"name": "NVIDIA H100"}],
        "warmup": pd.DataFrame([{"label": 1, "rank": 0, "name": "aten::mm", "cat": "cpu_op", "ts_us": 0.0,
                                 "dur_us": 4_000.0, "later_median_us": 12.0, "later_calls": 5}], columns=COLUMNS),
        "host_ops": pd.DataFrame({"name": ["aten::add"], "total_us": [2_000.0]})}
    return tables | changed


_THRESHOLDS = ("; thresholds as shares of step wall time: compiling>=10% and the largest cause, GPU-bound>=80% busy, "
               "input>=10%, host ahead: median launch delay>=10% and >=100 us, sync>=10% (perfkit rules, see "
               "analysis/step/rules.py); busy<50% is 'low utilization' in torch-tb-profiler")

_VERDICT_CASES = [
    pytest.param(
        ("unrecorded",), {}, {},
        ("high", "GPU activity not recorded: 40 kernel launches but no kernels; the trace lists NVIDIA H100 x2",
         "Record the GPU: the trace lists NVIDIA H100 x2 and the host launched work, but no kernel, copy or memset was "
         "recorded, so nothing can say whether the GPU or the host limits the step. Profile with "
         "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (CUPTI must be loadable: check that libcupti is on "
         "the library path and that no other profiler holds it).",
         "kernel launches or GPU-only ops but no GPU events: the profiler did not record the GPU"), id="unrecorded"),
    pytest.param(
        ("nohost", dict(gpu_busy=0.9)), {"gpu_busy_pct": 90.0}, {},
        ("high", "host activity not recorded: 50 kernels and no host event; GPU busy 90% of 2 window(s)",
         "Record the host: the trace holds the GPU's work but no host event (no op, runtime call or Python), so what "
         "the GPU waits for is unmeasured and nothing here can say whether the host limits the step. Profile with "
         "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] and schedule the steps with prof.step().",
         "GPU events but no host event: the profiler did not record the host"), id="nohost"),
    pytest.param(
        ("gpu", dict(warmup=0.6)), {"warmup_us": 6_000.0}, {},
        ("high", "warm-up: one-time work holds 6.0 ms of 10.0 ms (60%) over 2 step(s): aten::mm 4.0 ms (later calls: "
                 "median 12 us)",
         "Profile after warm-up: start recording once the first steps have run (perfkit profile --wait 5, or "
         "torch.profiler.schedule(wait=1, warmup=3, active=5)); what is set apart is one-time cost (CUDA context and "
         "module loading, cuBLAS/cuDNN handles and autotuning, model initialization, lazy initialization). The 2 "
         "step(s) after the warm-up: launch-bound 2.",
         "warm-up >= 50% of the window"), id="warm-up"),
    pytest.param(
        ("gpu", dict(gpu_busy=0.5, comm_exposed=0.3, sync=0.2)), {"comm_exposed_us": 3_000.0, "gpu_busy_pct": 50.0}, {},
        ("high", "communication-bound: collectives not hidden under compute take 3.00 ms of 10.00 ms (30%); GPU busy "
                 "50% of 2 step(s); host blocked in syncs 20%, waiting on them",
         sf.FIXES["communication-bound"],
         "collectives not overlapped by compute >= 10% of step and larger than every host cause (a collective waits "
         "for its slowest peer; a host blocked on one waits with it)"), id="communication-bound"),
    pytest.param(
        ("gpu", dict(launch_side_idle=0.5)), {}, {},
        ("high", "launch-bound: 20 launches per step, median kernel 5.0 us; the host issuing them holds 50% of the step "
                 "while the GPU idles (GPU busy 30%)",
         "Issue fewer, larger GPU operations per step: torch.compile (mode='reduce-overhead' adds CUDA graphs), fuse "
         "small ops (foreach/fused optimizers), batch environments/samples.",
         ">= 10 launches per step, the host issuing work (launching ops, the Python around them) >= its own work while "
         "the GPU idles, the largest host cause"), id="launch-bound"),
    pytest.param(
        ("gpu", dict(host_compute_idle=0.5)), {}, {},
        ("high", "host-compute-bound: CPU op aten::add 20% of the step while the GPU is busy 30% (20 launches per step)",
         "The host computes while the GPU waits; launching is not the cost (20 launches per step), so torch.compile's "
         "CUDA graphs or fusing kernels will not shorten the step. Move aten::add to the GPU (create its inputs with "
         "device='cuda'), vectorize per-sample work into batched tensor ops, or move it into DataLoader workers "
         "(num_workers>0) so it runs beside the GPU.",
         "GPU idle while the host computes (ops that launch nothing, Python, untraced code): the largest host cause"),
        id="host-compute-bound"),
    pytest.param(
        ("gpu", dict(compile=0.5)), {"compile_us": 5_000.0, "wall_us": 10_000_000.0}, {},
        ("high", "compiling: torch.compile compiled for 0.01 s of 10.00 s (50%) over 2 step(s)",
         "Profile after warm-up: let the compiled code run a few steps before the profiler records "
         "(torch.profiler.schedule(wait=1, warmup=3, active=5)), so the numbers measure the loop. Across runs, keep "
         "Inductor's on-disk caches (TORCHINDUCTOR_CACHE_DIR on persistent storage) so a restart compiles less.",
         "compile spans >= 10% of step and more than any other cause"), id="compiling"),
    pytest.param(
        ("cpu", dict(gpu_busy=0.0, host_compute_idle=0.5, dataloader=0.06, host_busy=0.6)), {}, {},
        ("medium", "CPU-only trace: no GPU activity; host busy 60% of 2 step(s)",
         "No GPU activity was recorded: the step is host time. The longest record_function ranges: ## fwd ## 3.0 ms in "
         "2 call(s). Speed up the host work where it goes (top ops by self time: aten::add 40%, aten::copy_ 10%): batch "
         "per-sample Python loops into tensor ops, time torch.set_num_threads(1) against the default with perfkit.compare "
         "(on shared cores fewer threads are often faster), move logging and bookkeeping out of the loop. The DataLoader takes 6% of the step: load in background workers "
         "(DataLoader(num_workers>0, persistent_workers=True)). If this job should use a GPU, check that the model and "
         "batches are on it (.to('cuda')) and profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA].",
         "no GPU events and no kernel launches: all step time is host time"), id="CPU-only"),
    pytest.param(
        ("gpu", dict(gpu_busy=0.5, queue_delay_us=2_500.0, sync=0.2)), {"gpu_busy_pct": 50.0}, {},
        ("medium", "GPU-bound (host ahead): kernels start a median 2.5 ms after their launch (50% of a step); GPU busy "
                   "50% of 2 step(s)",
         "The host is 2.5 ms ahead of the GPU: work is queued, so removing syncs or launch overhead will not shorten "
         "the step. The host time blocked in syncs (20% of the step) is the host waiting for that queue, not a cause. "
         "The GPU's idle time in the window (50%) lies at the window's edges or in GPU-side waits (streams waiting on "
         "each other, collectives, work issued before the profiler started): check the GPU timeline, then make the GPU "
         "work faster (the top kernels; mixed precision, fused kernels).",
         "median launch-to-kernel delay >= 10% of step and >= 100 us: GPU work is queued"), id="host-ahead"),
    pytest.param(
        ("gpu", dict(sync=0.4)), {}, {},
        ("high", "sync-bound: host blocked in syncs 40% of the step; GPU busy 30% of 2 step(s)", sf.FIXES["sync-bound"],
         "host blocked in syncs >= 10% of step and the largest host cause"), id="sync-bound"),
    pytest.param(
        ("gpu", dict(dataloader_idle=0.4, dataloader=0.4)), {}, {},
        ("high", "input-bound: DataLoader 40% of the step; GPU busy 30% of 2 step(s)", sf.FIXES["input-bound"],
         "DataLoader >= 10% of step and the largest host cause"), id="input-bound"),
    pytest.param(
        ("gpu", dict(gpu_busy=0.9)), {"gpu_busy_pct": 90.0, "gpu_busy_us": 9_000.0}, {},
        ("info", "GPU-bound: GPU busy 90% of 2 step(s)", sf.FIXES["GPU-bound"], "gpu busy >= 80% of step"),
        id="GPU-bound"),
]


@pytest.mark.parametrize("decided, overall, tables, expected", _VERDICT_CASES)
def test_each_verdicts_finding_word_for_word(decided, overall, tables, expected):
    kind, shares = (decided + ({},))[:2]
    verdict, evidence = _decided(kind, **shares)
    finding = sf.verdict_finding(verdict, evidence, _O2 | overall, _tables(**tables))
    severity, title, fix, rule = expected
    assert (finding.severity, finding.title) == (severity, title)
    assert finding.fix == fix
    assert finding.threshold == rule + _THRESHOLDS


def test_the_fixes_named_in_the_table_are_the_modules():
    assert sf.FIXES["sync-bound"].startswith("Remove host-device syncs from the step (run `perfkit sync-points TRACE`")
    assert sf.FIXES["input-bound"].startswith("Feed the GPU in the background: DataLoader(num_workers>0, pin_memory")
    assert sf.FIXES["GPU-bound"].startswith("Make the kernels faster: perfkit gpu-kernels says what their time calls for")
    assert sf.FIXES["communication-bound"].startswith("Hide the collectives under compute: DDP overlaps gradient")


def test_the_verdict_findings_evidence_holds_the_overall_numbers():
    verdict, evidence = _decided(gpu_busy=0.9)
    numbers = sf.verdict_finding(verdict, dict(evidence, behind_warmup=None), _O2 | {"compile_us": 7.0}, _tables()).evidence
    assert numbers["wall_us"] == _WALL and numbers["gpu_busy_us"] == 3_000.0 and numbers["host_busy_us"] == 6_000.0
    assert numbers["compile_us"] == 7.0 and numbers["median_queue_delay_us"] == 10.0
    assert "behind_warmup" not in numbers and not any(k.startswith("threshold_") for k in numbers)
    assert "rule" not in numbers and numbers["launches"] == 40  # the threshold text says the rule


def test_a_communication_title_on_a_busy_gpu_says_nothing_of_syncs():
    verdict, e = _decided(gpu_busy=0.9, comm_exposed=0.5, sync=0.3)
    assert sf._title(verdict, e, _O2 | {"comm_exposed_us": 5_000.0}, {}) == (
        "communication-bound: collectives not hidden under compute take 5.00 ms of 10.00 ms (50%); GPU busy 30% of "
        "2 step(s)")


# -- the fixes that fit the trace --------------------------------------------------------------------------
_GRAPHED = pd.DataFrame({"name": ["cudaGraphLaunch"] * 2 + ["cudaLaunchKernel"] * 6,
                         "top_op": ["", "", "aten::add", "aten::add", "aten::add", "aten::_foreach_mul_",
                                    "aten::_fused_adam_", ""]})


@pytest.mark.parametrize("verdict, shares, tables, compiled, fix", [
    pytest.param("launch-bound", dict(launch_side_idle=0.5), dict(launches=_GRAPHED), 0,
                 "The step already replays CUDA graphs (1 graph launch(es) per step, as torch.compile(mode='reduce-"
                 "overhead') or torch.cuda.graphs make): the GPU waits on the 3 launches per step outside them (by op, "
                 "per step: aten::add 2, the optimizer's foreach ops 1, (no op) 0) and the Python between them. Capture "
                 "those too: move the ops listed into the compiled function, compile the optimizer step "
                 "(torch.compile(optimizer.step)) or use a fused optimizer (Adam/AdamW(fused=True): one launch per "
                 "step), and give each launch more work (a larger batch).", id="graphed-with-the-optimizer-outside"),
    pytest.param("launch-bound", dict(launch_side_idle=0.5), dict(launches=_GRAPHED.iloc[:5]), 2,
                 "The step already replays CUDA graphs (1 graph launch(es) per step, as torch.compile(mode='reduce-"
                 "overhead') or torch.cuda.graphs make): the GPU waits on the 2 launches per step outside them (by op, "
                 "per step: aten::add 2) and the Python between them. Capture those too: move the ops listed into the "
                 "compiled function, and give each launch more work (a larger batch).", id="graphed"),
    pytest.param("launch-bound", dict(launch_side_idle=0.5), dict(launches=_GRAPHED.iloc[2:]), 3,
                 "The model already runs torch.compile'd code (3 compiled region(s)), so 'use torch.compile' is done: "
                 "cut launches further with CUDA/HIP graphs (torch.compile(mode='reduce-overhead') or "
                 "torch.cuda.graphs), remove graph breaks so more of the step runs compiled (TORCH_LOGS=graph_breaks), "
                 "and move per-step Python work out of the loop.", id="compiled-launch-bound"),
    pytest.param("GPU-bound", dict(gpu_busy=0.9), {}, 2,
                 "The model already runs torch.compile'd code, so fusing by compiling is done: make the kernels "
                 "themselves faster (perfkit gpu-kernels lists the top ones): mixed precision (torch.autocast), larger "
                 "or better-shaped matmuls (multiples of 8/16), torch.compile(mode='max-autotune') for the GEMMs.",
                 id="compiled-GPU-bound"),
    pytest.param("GPU-bound", dict(gpu_busy=0.9), dict(steps=pd.DataFrame(
        {"compile_us": [0.0, 0.0], "gpu_busy_us": [1_000.0, 1_000.0], "copy_busy_us": [600.0, 400.0]})), 2,
                 "50% of the GPU's busy time is copies, not kernels: pin the host side (tensor.pin_memory(), "
                 "DataLoader(pin_memory=True)) and copy with non_blocking=True so copies overlap compute, and copy less "
                 "(keep tensors on the GPU between steps, copy once per step, in a compact dtype such as uint8 or "
                 "bf16).", id="copy-bound"),
    pytest.param("input-bound", dict(dataloader_idle=0.4), dict(annotations=pd.DataFrame(
        {"name": ["enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"], "total_us": [1.0], "count": [1]})),
                 0, "The DataLoader already runs worker processes (_MultiProcessingDataLoaderIter), and the step still "
                    "waits for batches: raise num_workers (to the cores free), keep them alive (persistent_workers=True) "
                    "and ahead (prefetch_factor=4), make the per-sample transform or collate cheaper (batch it, move it "
                    "to the GPU), or preload a dataset that fits onto the GPU.", id="input-bound-with-workers"),
])
def test_the_fix_fits_the_trace(verdict, shares, tables, compiled, fix):
    got, evidence = _decided(**shares)
    assert got == verdict
    assert sf._fix(verdict, evidence, _O2, _tables(**tables), compiled) == fix


def test_an_input_bound_cpu_trace_is_not_told_to_pin_memory():
    verdict, e = _decided("cpu", gpu_busy=0.0, dataloader_idle=0.4)
    assert verdict == "input-bound"
    assert sf._fix(verdict, e, _O2, _tables(), 0) == (
        "Load data in the background: DataLoader(num_workers>0, persistent_workers=True, prefetch_factor=2+) so the "
        "next batch is ready when the step needs it; make per-sample transforms cheaper or batch them. (No GPU "
        "activity was recorded, so pin_memory does not apply.)")


def test_recompiling_in_several_steps_is_named():
    fix = sf._compile_fix(pd.DataFrame({"compile_us": [5.0, 3.0, 0.0]}))
    assert fix == (
        "Profile after warm-up: let the compiled code run a few steps before the profiler records "
        "(torch.profiler.schedule(wait=1, warmup=3, active=5)), so the numbers measure the loop. It compiled in 2 of 3 "
        "steps, so it is recompiling: run with TORCH_LOGS=recompiles to see which guard fails (shapes that change every "
        "step: torch._dynamo.mark_dynamic or dynamic=True; Python numbers or strings passed as arguments are baked into "
        "the graph). Across runs, keep Inductor's on-disk caches (TORCHINDUCTOR_CACHE_DIR on persistent storage) so a "
        "restart compiles less.")
    assert "recompiling" not in sf._compile_fix(pd.DataFrame({"compile_us": [5.0, 0.0, 0.0]}))


def test_a_model_on_the_cpu_of_a_gpu_machine_is_told_to_move():
    ops = pd.DataFrame({"name": ["aten::mkldnn_convolution", "aten::add", "mkldnn::linear"], "cat": ["cpu_op"] * 3,
                        "self_pct": [50.0, 30.0, 20.0], "count": [1, 1, 1]})
    annotations = _tables()["annotations"]
    assert sf._cpu_only_fix({"dataloader_share": 0.0}, ops, annotations, [{"name": "NVIDIA A100"}]) == (
        "The model ran on the CPU: the trace lists NVIDIA A100, but its ops ran CPU kernels (aten::mkldnn_convolution, "
        "mkldnn::linear) and launched nothing. Move the model and each batch to the GPU (model.to('cuda'), "
        "x.to('cuda', non_blocking=True)), then profile again.")
    # without a GPU in the trace, or without CPU kernels, the plain CPU-only fix
    assert sf._cpu_only_fix({"dataloader_share": 0.0}, ops, annotations).startswith("No GPU activity was recorded")
    plain = ops.assign(name=["aten::conv2d", "aten::add", "aten::linear"])
    assert sf._cpu_only_fix({"dataloader_share": 0.0}, plain, annotations, [{"name": "A100"}]).startswith("No GPU")


def test_a_cpu_only_fix_with_nothing_recorded():
    empty = pd.DataFrame({"name": [], "cat": [], "self_pct": [], "count": []})
    assert sf._cpu_only_fix({"dataloader_share": 0.0}, empty, pd.DataFrame({"name": [], "total_us": [], "count": []}),
                            [{"name": "A100"}]) == (
        "No GPU activity was recorded: the step is host time. Speed up the host work where it goes (top ops by self "
        "time: none recorded): batch per-sample Python loops into tensor ops, time torch.set_num_threads(1) against the "
        "default with perfkit.compare (on shared cores fewer threads are often faster), move logging and bookkeeping "
        "out of the loop. If this job should use a GPU, check that the model and "
        "batches are on it (.to('cuda')) and profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA].")


def test_the_cpu_only_fix_lists_the_top_three_ops_and_two_ranges():
    ops = pd.DataFrame({"name": ["a", "b", "gpu", "c", "d"], "cat": ["cpu_op", "cpu_op", "kernel", "cpu_op", "cpu_op"],
                        "self_pct": [40.0, 30.0, 20.0, 10.0, 5.0], "count": [1] * 5})
    annotations = pd.DataFrame({"name": ["x", "y", "z"], "total_us": [3_000.0, 2_000.0, 1_000.0], "count": [1, 2, 3]})
    fix = sf._cpu_only_fix({"dataloader_share": 0.0}, ops, annotations)
    assert "ranges: x 3.0 ms in 1 call(s); y 2.0 ms in 2 call(s)." in fix and "(top ops by self time: a 40%, b 30%, c 10%)" in fix


def test_a_replayed_verdict_says_how_it_was_decided():
    assert sf._threshold_text({"decided_by": "replay", "rule": "removing the syncs saves 30%"}) == (
        "removing the syncs saves 30% (each fix replayed on the steps' dependency graph: perfkit whatif)")


def test_the_warm_up_fix_names_what_is_behind_it_when_no_later_step_says():
    verdict, e = _decided(warmup=0.6)
    steps = pd.DataFrame({"verdict": ["warm-up"], "compile_us": [0.0]})
    fix = sf._fix(verdict, dict(e, behind_warmup="sync-bound"), _O2, _tables(steps=steps), 0)
    assert fix.endswith("lazy initialization). What is left of the window looks sync-bound: judge it on a profile of "
                        "later steps.")


@pytest.mark.parametrize("verdicts, text", [
    (["warm-up", "GPU-bound", "partial step", "launch-bound", "GPU-bound"],
     " The 3 step(s) after the warm-up: GPU-bound 2, launch-bound 1."),
    (["warm-up", "partial step"], ""),
    ([], ""),
])
def test_later_steps_text(verdicts, text):
    assert sf.later_steps_text(pd.DataFrame({"verdict": verdicts}, dtype=object)) == text


@pytest.mark.parametrize("behind, text", [
    (None, ""), ("warm-up", ""),
    ("sync-bound", " What is left of the window looks sync-bound: judge it on a profile of later steps."),
])
def test_behind_text(behind, text):
    assert sf._behind_text({"behind_warmup": behind}) == text
    assert sf._behind_text({}) == ""


@pytest.mark.parametrize("annotations, running", [
    (None, False),
    (pd.DataFrame({"name": []}), False),
    (pd.DataFrame({"name": ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]}), False),
    (pd.DataFrame({"name": ["x", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"]}), True),
])
def test_workers_running(annotations, running):
    assert bool(sf.workers_running(annotations)) is running


def test_copy_share_is_over_the_full_steps():
    steps = pd.DataFrame({"verdict": ["partial step", "GPU-bound", "GPU-bound"], "gpu_busy_us": [100.0, 1_000.0, 1_000.0],
                          "copy_busy_us": [100.0, 300.0, 200.0]})
    assert sf.copy_share(steps) == 0.25
    assert sf.copy_share(steps.drop(columns="verdict")) == pytest.approx(600 / 2_100)
    assert sf.copy_share(steps.assign(gpu_busy_us=0.0)) == 0.0
    assert not sf.copy_bound(None) and not sf.copy_bound(steps.iloc[:0])
    assert not sf.copy_bound(steps.drop(columns="copy_busy_us"))


def test_graph_launches_counts_graph_replays():
    assert sf.graph_launches(None) == 0 and sf.graph_launches(_GRAPHED.iloc[:0]) == 0
    assert sf.graph_launches(_GRAPHED) == 2


@pytest.mark.parametrize("verdict, evidence, overall, severity", [
    ("compiling", {"gpu_busy_share": 0.9}, {}, "high"),
    ("warm-up", {"gpu_busy_share": 0.9}, {}, "high"),
    ("GPU activity not recorded", {"gpu_busy_share": None}, {}, "high"),
    ("host activity not recorded", {"gpu_busy_share": 0.9}, {}, "high"),
    ("input-bound", {"gpu_busy_share": None}, {}, "medium"),
    ("GPU-bound (host ahead)", {"gpu_busy_share": 0.1}, {}, "medium"),
    ("sync-bound", {"gpu_busy_share": 0.0}, {"wall_us": 0.0, "gpu_busy_us": 0.0}, "high"),
])
def test_severity_table(verdict, evidence, overall, severity):
    assert sf._severity(verdict, evidence, {"gpu_busy_us": 9_000.0, "wall_us": _WALL} | overall) == severity


# -- the findings below the verdict, word for word ---------------------------------------------------------
def test_the_compile_finding():
    finding, = sf._compile_finding("GPU-bound", _O2 | {"compile_us": 1_500.0},
                                   pd.DataFrame({"compile_us": [100.0, 0.0]}))
    assert (finding.severity, finding.title) == ("medium", "torch.compile compiled for 0.00 s in 1 of 2 step(s) (15% "
                                                           "of wall time)")
    assert finding.evidence == {"compile_us": 1_500.0, "share": 0.15, "steps_with_compile": 1}
    assert finding.fix == sf._compile_fix(pd.DataFrame({"compile_us": [100.0, 0.0]}))
    assert finding.threshold == ">= 1% of wall time (perfkit rule)"
    assert sf._compile_finding("compiling", _O2 | {"compile_us": 5_000.0}, pd.DataFrame({"compile_us": [1.0]})) == []
    assert sf._compile_finding("GPU-bound", _O2 | {"wall_us": 0.0}, pd.DataFrame({"compile_us": [1.0]})) == []


def test_the_dataloader_finding():
    finding, = sf._dataloader_finding("GPU-bound", _O2 | {"dataloader_us": 800.0})
    assert (finding.severity, finding.title) == ("low", "DataLoader takes 8.0% of step time")
    assert finding.evidence == {"dataloader_us_per_step": 400.0, "share": 0.08}
    assert finding.fix == sf.FIXES["input-bound"] and finding.threshold == "> 5% of step time (torch-tb-profiler)"
    assert sf._dataloader_finding("GPU-bound", _O2 | {"dataloader_us": 800.0, "steps": 0})[0].evidence[
        "dataloader_us_per_step"] == 800.0
    for verdict in ("input-bound", "CPU-only trace"):
        assert sf._dataloader_finding(verdict, _O2 | {"dataloader_us": 800.0}) == []
    assert sf._dataloader_finding("GPU-bound", _O2 | {"wall_us": 0.0, "dataloader_us": 800.0}) == []


def test_the_copy_finding():
    ops = pd.DataFrame({"name": ["aten::copy_", "aten::to", "aten::add", "aten::copy_"],
                        "cat": ["cpu_op", "cpu_op", "cpu_op", "python_function"], "count": [3, 2, 9, 4]})
    finding, = sf._copy_finding(ops, 1_200.0, _O2)
    assert (finding.severity, finding.title) == ("low", "copy/convert ops take 20% of host busy time")
    assert finding.evidence == {"aten::copy__count": 3, "aten::to_count": 2, "time_us": 1_200.0}
    assert finding.fix == ("Create tensors on the target device and dtype (torch.zeros(..., device=...)) instead of "
                           "converting every step; convert once outside the loop.")
    assert finding.threshold == ">= 10% of host busy time (perfkit rule)"
    assert sf._copy_finding(ops, 1_200.0, _O2 | {"host_busy_us": 0.0}) == []


def test_the_tiny_kernel_finding():
    verdict, e = _decided(gpu_busy=0.9)
    r = {"verdict": verdict, "evidence": e, "compile": {"compiled_regions": 2}, "has_gpu": True, "tiny_kernel_us": 10.0,
         "steps": pd.DataFrame({"compile_us": [0.0]}), "ops": pd.DataFrame({"name": [], "cat": [], "count": []})}
    out = sf.findings(r, _O2 | {"kernels": 2_000, "tiny_kernels": 1_500, "tiny_kernel_pct": 75.0}, 0.0)
    assert out[0].fix == sf._COMPILED_GPU_FIX  # the compiled regions reach the verdict's fix
    tiny = out[1]
    assert (tiny.severity, tiny.title) == ("medium", "75% of 2,000 kernels run under 10 us")
    assert tiny.evidence == {"tiny_kernels": 1_500, "kernels": 2_000, "launches_per_step": 20.0, "mean_launch_us": 5.0}
    assert tiny.fix == ("Fuse the small ops (torch.compile, foreach/fused optimizers, batched tensors) so each launch "
                        "does more work.")
    assert tiny.threshold == "more than 50% of more than 100 kernels are short (torch-tb-profiler short-kernel rule)"
    assert len(sf.findings(dict(r, has_gpu=False), _O2 | {"kernels": 2_000, "tiny_kernels": 1_500}, 0.0)) == 1


@pytest.mark.parametrize("devices, text", [
    ([], "no GPUs in deviceProperties"),
    (["not a dict"], "no GPUs in deviceProperties"),
    ([{"name": None}, "x", {"name": "A"}, {"name": "B"}, {"name": "A"}], "?, A x2, B"),
])
def test_devices_text(devices, text):
    assert sf._devices_text(devices) == text


def test_number_texts():
    assert [sf._us(float("nan")), sf._us(999.0), sf._us(1_000.0), sf._us(12_345.0)] == [
        "-", "999.0 us", "1.00 ms", "12.35 ms"]
    assert sf._ms(1_234.0) == "1.23 ms" and sf._ms(1_234_567.0) == "1,234.57 ms"


def test_what_decided_the_verdict_is_its_threshold_text_not_its_evidence():
    r, o = _gpu_bound_result()
    evidence = dict(r["evidence"], rule="amp saves most: 40% of the median step (>= 5%)", decided_by="replay",
                    share_verdict="GPU-bound")
    finding = sf.verdict_finding(r["verdict"], evidence, o, r)
    assert not {"rule", "decided_by", "share_verdict"} & set(finding.evidence)
    assert finding.threshold.startswith("amp saves most: 40% of the median step (>= 5%)")
