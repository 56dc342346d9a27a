"""The checks behind ``perfkit.validate``: each runs a reference workload whose truth is known
(a pathology and its fix) through one perfkit harness or detector and compares what perfkit
reports with what the workload must show.

Each check takes ``(device, sizes)`` and returns a :class:`Check`. ``status`` is "pass" or
"fail" against ``expected``; "inconclusive" where timing noise hid the answer (see
``timed_status``); "skipped" where the figure needs hardware this machine lacks (the
reason is in ``measured``); "measured" where the figure has no fixed expectation on this device
(bf16 step time on a CPU, say) and is reported as it is.
"""
from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.sync_points.find import syncs
from ..bench import htod  # the module: tests replace htod.htod_sweep with a fake sweep
from ..bench.amp_ab import amp_ab
from ..bench.compare import compare
from ..bench.compile_ab import compile_ab
from ..bench.leak import hunt_leak
from ..detect.runtime import detect_syncs
from ..device import is_cuda
from ..trace import load_trace
from ..workloads.mlp import mlp_problem
from ..workloads.record import record_trace
from ..workloads.registry import make_workload

# Pinned host memory must beat pageable by this factor on a GPU: a pageable copy is staged
# through a driver bounce buffer, a pinned one is a direct DMA (perfkit rule; H100 PCIe Gen5
# pageable copies reach about half of pinned bandwidth).
PINNED_MIN_GAIN = 1.2
# Loss curves of fp32 and bf16 autocast may differ by this much (relative) over a short run.
AMP_LOSS_RTOL = 0.05
# A timed check that finds "no change" fails only when its speedup CI is narrower than this
# (high / low): the machine measured precisely and saw no gain. A wider CI is timing noise (a
# busy or small machine) and the check is "inconclusive" (perfkit rule).
PRECISE_CI_RATIO = 1.2


@dataclass(frozen=True)
class Check:
    """One validated figure: what perfkit reported (``measured``) against what the workload
    must show (``expected``), and the call that produced it (``command``)."""

    name: str
    claim: str
    measured: str
    expected: str
    status: str
    command: str
    values: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Sizes:
    """Problem sizes and repeat counts. ``full`` fills an H100 for a few seconds per check;
    ``quick`` keeps a CPU run under a minute (tests, CI)."""

    htod_bytes: int = 256 * 2**20
    htod_repeats: int = 10
    detect_steps: int = 8
    trace_steps: int = 8
    ab_repeats: int | None = None
    ab_min_time_s: float = 2.0
    mppi: dict = field(default_factory=lambda: {"samples": 1024, "horizon": 12, "hidden": 256})
    replay: dict = field(default_factory=lambda: {"frame_size": 84, "batch": 32, "seq_len": 16})
    mlp: dict = field(default_factory=lambda: {"batch": 4096, "features": 512, "hidden": 2048, "layers": 4})
    compile_backend: str = "inductor"
    amp_steps: int = 20
    leak_steps: int = 300
    leak_warmup: int = 30
    leak_sample_every: int = 10


PRESETS = {
    "full": Sizes(),
    "quick": Sizes(htod_bytes=16 * 2**20, htod_repeats=3, detect_steps=4, trace_steps=4, ab_repeats=None,
                   ab_min_time_s=0.5, mppi={}, replay={}, mlp={"batch": 32, "features": 16, "hidden": 32,
                                                            "layers": 1},
                   compile_backend="aot_eager", amp_steps=4),
}


def _status(ok: bool) -> str:
    return "pass" if ok else "fail"


def timed_status(ab, *, also: bool = True) -> str:
    """"pass" when B is faster (and ``also``), "fail" when slower, when ``also`` is false, or
    when "no change" was measured precisely; "inconclusive" when noise hid the answer."""
    if ab.verdict == "faster" or ab.verdict == "slower" or not also:
        return _status(ab.verdict == "faster" and also)
    low, high = ab.speedup_ci
    precise = math.isfinite(low) and math.isfinite(high) and low > 0 and high / low < PRECISE_CI_RATIO
    return "fail" if precise and ab.verdict == "no change" else "inconclusive"


def _ci(ab) -> str:
    """The A/B's speedup: the median of its paired per-round ratios, with that CI and its verdict."""
    lo, hi = ab.speedup_ci
    return f"{ab.speedup:.2f}x [{lo:.2f}, {hi:.2f}] (median of paired ratios; {ab.verdict})"


def _steps(ab) -> str:
    """Both arms' median steps, and their ratio named as such: it need not equal the paired speedup (``_ci``)."""
    a, b = ab.median_a * 1e3, ab.median_b * 1e3
    ratio = f" (ratio of the medians {a / b:.2f}x)" if b > 0 else ""
    return f"median step {a:.2f} -> {b:.2f} ms{ratio}"


def _ab_kw(sizes: Sizes, device: str) -> dict:
    return {"repeats": sizes.ab_repeats, "min_time_s": sizes.ab_min_time_s, "device": device}


def htod_pinned(device: str, sizes: Sizes) -> Check:
    modes = ("pageable", "pinned", "pinned_non_blocking")
    sweep = htod.htod_sweep(sizes_bytes=(sizes.htod_bytes,), modes=modes, repeats=sizes.htod_repeats,
                            device=device, host_baseline=False)
    command = (f"perfkit.htod_sweep(sizes_bytes=({sizes.htod_bytes},), modes={modes}, "
               f"repeats={sizes.htod_repeats}, device={device!r})")
    claim, expected = "pinned host memory copies faster than pageable", f"pinned >= {PINNED_MIN_GAIN}x pageable GB/s"
    if not sweep.available:
        return Check("htod_pinned_vs_pageable", claim, sweep.reason, expected, "skipped", command)
    gbps = dict(zip(sweep.to_frame()["mode"], sweep.to_frame()["gbps"]))
    gain = gbps["pinned"] / gbps["pageable"]
    measured = ", ".join(f"{m} {gbps[m]:.1f} GB/s" for m in modes) + f"; pinned/pageable {gain:.2f}x"
    return Check("htod_pinned_vs_pageable", claim, measured, expected, _status(gain >= PINNED_MIN_GAIN),
                 command, {**{f"{m}_gbps": gbps[m] for m in modes}, "pinned_gain": gain})


SYNC_VARIANTS = ("item_logging", "batched_metrics")
SYNC_EXPECTED = ("a sync in every step for item_logging; for batched_metrics only in the steps that read the "
                 "metrics (1 in metrics_every)")


def _sync_check(name: str, claim: str, steps: dict, metrics_every: int, detail: str, command: str) -> Check:
    """``steps``: variant -> syncs counted in each step. Passes when every item_logging step
    syncs and batched_metrics syncs in at most ceil(steps / metrics_every) steps."""
    synced = {v: sum(n > 0 for n in counts) for v, counts in steps.items()}
    allowed = math.ceil(len(steps["batched_metrics"]) / metrics_every)
    ok = synced["item_logging"] == len(steps["item_logging"]) and synced["batched_metrics"] <= allowed
    measured = "; ".join(f"{v}: syncs in {synced[v]} of {len(c)} steps ({sum(c) / len(c):.1f}/step)"
                         for v, c in steps.items()) + (f" ({detail})" if detail else "")
    values = {**{f"{v}_per_step": list(c) for v, c in steps.items()}, "metrics_every": metrics_every}
    return Check(name, claim, measured, SYNC_EXPECTED, _status(ok), command, values)


def runtime_syncs(device: str, sizes: Sizes) -> Check:
    steps, modes, every = {}, set(), 1
    for variant in SYNC_VARIANTS:
        steps[variant], mode, every = _detect_each_step(device, variant, sizes.detect_steps)
        modes.add(mode)
    return _sync_check("runtime_syncs_ppo", "the run-time detector finds the per-step .item() syncs, and only "
                       "the metrics reads after the fix", steps, every, f"detector mode {', '.join(sorted(modes))}",
                       f"perfkit.detect_syncs() around each of {sizes.detect_steps} steps of make_workload('ppo', "
                       f"{device!r}, variant=VARIANT) after one warm-up step")


def _detect_each_step(device: str, variant: str, steps: int) -> tuple[list[int], str, int]:
    counts, mode = [], ""
    with make_workload("ppo", device, variant=variant) as workload:
        workload.step()
        for _ in range(steps):
            with detect_syncs() as detector:
                workload.step()
            counts.append(detector.report.total)
            mode = detector.report.mode
        return counts, mode, workload.config.metrics_every


def trace_syncs(device: str, sizes: Sizes) -> Check:
    claim = "a GPU trace shows GPU-confirmed syncs in every step with .item() logging, and only in metrics steps after the fix"
    command = (f"perfkit.syncs(load_trace(record_trace(make_workload('ppo', {device!r}, variant=VARIANT), "
               f"PATH, steps={sizes.trace_steps}))): events with gpu_confirmed, by step")
    if not is_cuda(device):
        return Check("trace_syncs_ppo", claim, "skipped: a CPU trace has no CUDA runtime calls to confirm a "
                     "sync (run with device='cuda')", SYNC_EXPECTED, "skipped", command)
    steps, every = {}, 1
    for variant in SYNC_VARIANTS:
        steps[variant], every = confirmed_syncs_by_step(device, variant, sizes.trace_steps)
    return _sync_check("trace_syncs_ppo", claim, steps, every, "", command)


def confirmed_syncs_by_step(device: str, variant: str, steps: int) -> tuple[list[int], int]:
    """Record ``steps`` profiled steps of the PPO ``variant`` and count the GPU-confirmed sync
    points (a blocking CUDA runtime call seen inside) in each; also returns metrics_every."""
    with tempfile.TemporaryDirectory(prefix="perfkit-validate-") as tmp, \
            make_workload("ppo", device, variant=variant) as workload:
        path = record_trace(workload, Path(tmp) / f"ppo_{variant}.json.gz", steps=steps)
        trace = load_trace(path, use_cache=False)
        every = workload.config.metrics_every
    events = syncs(trace).events
    confirmed = events.loc[events["gpu_confirmed"], "step"]
    return [int((confirmed == step).sum()) for step in trace.steps["step"]], every


def _workload_ab(name: str, variants: tuple[str, str], device: str, sizes: Sizes, overrides: dict):
    with make_workload(name, device, variant=variants[0], **overrides) as a, \
            make_workload(name, device, variant=variants[1], **overrides) as b:
        return compare(a.step, b.step, labels=variants, **_ab_kw(sizes, device))


def from_numpy_speedup(device: str, sizes: Sizes) -> Check:
    ab = _workload_ab("mppi", ("float_tensor", "from_numpy"), device, sizes, sizes.mppi)
    return Check("mppi_from_numpy", "torch.from_numpy + inference_mode beats torch.FloatTensor(x).to(device) "
                 "in the MPPI planner", f"from_numpy speedup {_ci(ab)}, {_steps(ab)}", "faster (speedup CI above 1)",
                 timed_status(ab),
                 f"perfkit.compare(mppi float_tensor.step, mppi from_numpy.step, overrides={sizes.mppi}, "
                 f"device={device!r})", ab.summary())


def replay_pipeline(device: str, sizes: Sizes) -> Check:
    ab = _workload_ab("replay", ("host_normalize", "device_normalize"), device, sizes, sizes.replay)
    cuda = is_cuda(device)
    measured = f"device_normalize speedup {_ci(ab)}, {_steps(ab)}"
    return Check("replay_device_normalize", "normalizing on the device from a pinned staging buffer beats "
                 "host normalization", measured, "faster on a GPU" if cuda else "no expectation on a CPU",
                 timed_status(ab) if cuda else "measured",
                 f"perfkit.compare(replay host_normalize.step, replay device_normalize.step, "
                 f"overrides={sizes.replay}, device={device!r})", ab.summary())


def compile_break_even(device: str, sizes: Sizes) -> Check:
    problem = mlp_problem(**sizes.mlp)
    ab = compile_ab(problem.make_model(), problem.example_inputs, backend=sizes.compile_backend, device=device,
                    steps=sizes.ab_repeats, min_time_s=sizes.ab_min_time_s)
    even = "never (no established saving)" if math.isinf(ab.break_even_steps) else f"{ab.break_even_steps:.0f} steps"
    measured = (f"speedup {_ci(ab.timing)}, compile {ab.compile_time_s:.2f} s, break-even {even}, "
                f"{ab.graph_break_count} graph breaks, {ab.recompile_count} recompiles")
    ok = ab.graph_break_count == 0 and ab.recompile_count == 0
    return Check("compile_ab_mlp", "compile A/B on a static-shape MLP: timing, break-even, and no false graph "
                 "breaks or recompiles", measured, "0 graph breaks and 0 recompiles", _status(ok),
                 f"perfkit.compile_ab(mlp_problem(**{sizes.mlp}).make_model(), ..., backend="
                 f"{sizes.compile_backend!r}, device={device!r})", ab.summary())


def amp_bf16(device: str, sizes: Sizes) -> Check:
    result = _amp(device, sizes, "bfloat16")
    cuda = is_cuda(device)
    peak = result.peak_bytes
    measured = (f"bf16 speedup {_ci(result.timing)}, {_steps(result.timing)}, peak {peak['fp32'] / 2**20:.1f} -> "
                f"{peak['amp'] / 2**20:.1f} MiB ({result.memory_method}), loss max rel diff "
                f"{result.loss_max_rel_diff:.3g}")
    loss_ok = result.loss_max_rel_diff <= AMP_LOSS_RTOL
    expected = f"loss within {AMP_LOSS_RTOL:.0%} of fp32" + ("; bf16 faster" if cuda else "")
    status = timed_status(result.timing, also=loss_ok) if cuda else _status(loss_ok)
    return Check("amp_bf16_step", "bf16 autocast against fp32: step time, peak memory, same loss", measured,
                 expected, status, _amp_command(device, sizes, "bfloat16"), result.summary())


def gradscaler_syncs(device: str, sizes: Sizes) -> Check:
    claim = "GradScaler's inf check syncs the host every step under fp16; fp32 does not"
    expected = ">= 1 sync per step with the scaler, 0 in fp32"
    if not is_cuda(device):
        return Check("gradscaler_syncs", claim, "skipped: float16 autocast with GradScaler and "
                     "torch.cuda.set_sync_debug_mode need CUDA", expected, "skipped",
                     _amp_command(device, sizes, "float16"))
    result = _amp(device, sizes, "float16")
    per_step = result.syncs_per_step or {}
    measured = f"fp32 {per_step.get('fp32', math.nan):.1f}/step, fp16 + GradScaler {per_step.get('amp', math.nan):.1f}/step"
    ok = per_step.get("amp", 0) >= 1 and per_step.get("fp32", 1) == 0
    return Check("gradscaler_syncs", claim, measured, expected, _status(ok), _amp_command(device, sizes, "float16"),
                 result.summary())


def _amp(device: str, sizes: Sizes, dtype: str):
    problem = mlp_problem(**sizes.mlp)
    return amp_ab(problem.make_model, problem.make_batch, problem.loss_fn, steps=sizes.amp_steps, dtype=dtype,
                  compare_fused=False, **_ab_kw(sizes, device))


def _amp_command(device: str, sizes: Sizes, dtype: str) -> str:
    return (f"perfkit.amp_ab(*mlp_problem(**{sizes.mlp}), steps={sizes.amp_steps}, dtype={dtype!r}, "
            f"device={device!r})")


def leak_slope(device: str, sizes: Sizes) -> Check:
    hunts = {v: _hunt(device, sizes, v) for v in ("keep_graph_losses", "clean")}
    leaky = hunts["keep_graph_losses"]
    series = "cuda_allocated_bytes" if is_cuda(device) else leaky.decided_by
    growth = leaky.series(series)
    slope = f"{growth.per_1000:,.4g} [{growth.ci_low:,.4g}, {growth.ci_high:,.4g}] {growth.unit}" if growth else "n/a"
    measured = (f"keep_graph_losses: {leaky.verdict} ({series} {slope} per 1,000 steps); clean: "
                f"{hunts['clean'].verdict}")
    ok = leaky.verdict == "leak" and hunts["clean"].verdict == "no leak"
    return Check("leak_slope", "the leak hunt calls the trainer that keeps its loss graphs a leak, and the fixed "
                 "one clean", measured, "leak for keep_graph_losses, no leak for clean", _status(ok),
                 f"perfkit.hunt_leak(make_workload('leaky', {device!r}, variant=VARIANT).step, "
                 f"steps={sizes.leak_steps}, warmup={sizes.leak_warmup})",
                 {"series": series, "per_1000": growth.per_1000 if growth else math.nan,
                  **{f"{v}_verdict": h.verdict for v, h in hunts.items()}})


def _hunt(device: str, sizes: Sizes, variant: str):
    with make_workload("leaky", device, variant=variant) as trainer:
        return hunt_leak(trainer.step, steps=sizes.leak_steps, warmup=sizes.leak_warmup,
                         sample_every=sizes.leak_sample_every, device=device)


CHECKS = {
    "htod_pinned_vs_pageable": htod_pinned,
    "runtime_syncs_ppo": runtime_syncs,
    "trace_syncs_ppo": trace_syncs,
    "mppi_from_numpy": from_numpy_speedup,
    "replay_device_normalize": replay_pipeline,
    "compile_ab_mlp": compile_break_even,
    "amp_bf16_step": amp_bf16,
    "gradscaler_syncs": gradscaler_syncs,
    "leak_slope": leak_slope,
}
