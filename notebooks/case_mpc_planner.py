# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Case study 1: an MPC planner that is CPU-bound
# **The write-up.** A TD-MPC-style agent planned each action with MPPI: sample action sequences,
# roll them out through a learned world model, reweight, repeat. Its profile showed CPU time 17x
# CUDA time and the GPU idle 94% of the time, with 62,700 `aten::linear` calls and 62,250 copies
# per action. The observation batch was built with `torch.FloatTensor(obs).to(device)` per sample;
# `torch.from_numpy` once, `inference_mode` and reused buffers fixed it. Changing sample counts
# recompiled the compiled rollout, and larger plans ran out of memory.
#
# **Here** the same story runs on perfkit's MPPI planner (`perfkit.make_workload("mppi")`), its
# naive port (`float_tensor`) against the fix (`from_numpy`): symptom, measurement, diagnosis,
# fix, an A/B with a confidence interval, perf-log rows, and a closing table of the write-up's
# figures against ours. `mode="trace"` reads the two recorded traces (`trace_path`,
# `trace_path_b`; a GPU recording of your own works the same); `mode="live"` records both variants
# now on `device`. The compile and memory sections run their harness on `device` in both modes:
# no trace holds them.

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path (before) and trace_path_b (after); "live": record both now
trace_path = "cpu/mppi_float_tensor.json.gz"  # before: FloatTensor per sample, no_grad, fresh buffers
trace_path_b = "cpu/mppi_from_numpy.json.gz"  # after: from_numpy once, inference_mode, reused buffers
device = "auto"  # live runs and harnesses: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
threads = 0  # torch intra-op threads for live runs and harnesses: 0 leaves them; 1 gives stable CPU timings
overrides = {}  # planner config for live runs and harnesses, e.g. {"samples": 512, "horizon": 12}
steps = 5  # live mode: profiled steps per variant
ab_min_time_s = 1.0  # live A/B and compile A/B: seconds of timed work
ab_repeats = None  # live A/B: fixed rounds (None: fill ab_min_time_s)
compile_backend = "eager"  # torch.compile backend for the recompile check ("inductor" times real code)
memory_samples = [128, 256, 512]  # planning memory: sample counts swept at each horizon
memory_horizons = [4, 8, 16]  # planning memory: horizons (3 or more)
memory_budget_gib = 0.0  # where the plan runs out: 0 means the memory free on the device now
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
import pandas as pd
from IPython.display import HTML, display

import perfkit
from perfkit.report import caserows, pair, plots, prose, rows, sections, tables
from perfkit.analysis import per_step
from perfkit.report.card import verdict_card
from perfkit.report.casestudy import WriteupFigure, closing_table, gpu_only, measured_ci
from perfkit.bench.ladder import Arm, variant_ab
from perfkit.notebook_setup import open_case
from perfkit.results import html_table

NAME = "case_mpc_planner"
ARMS = (Arm("FloatTensor per sample", "float_tensor"), Arm("from_numpy + inference_mode", "from_numpy"))
before, after, subject, run_id, LABELS = open_case(mode, (trace_path, trace_path_b), workload="mppi", arms=ARMS,
                                                   device=device, threads=threads, steps=steps, overrides=overrides,
                                                   run_label=run_label)
cpu_before, cpu_after = perfkit.cpu_bound(before.trace), perfkit.cpu_bound(after.trace)
comparison = perfkit.diff(before.trace, after.trace)
if mode == "live":
    ab = variant_ab("mppi", *ARMS, device=device, overrides=overrides, min_time_s=ab_min_time_s, repeats=ab_repeats)
    evidence = pair.from_ab(ab)
else:
    evidence = pair.from_diff(comparison, before, after, LABELS)
logged = rows.log_rows(perf_log_path, evidence.rows(NAME, subject, ("float_tensor_step_ms", "from_numpy_step_ms")),
                       change=change, run_id=run_id)
verdict_card(NAME, cpu_before, logged, subject=subject, device=evidence.device, verdict=evidence.verdict_line(),
             fix="Build the sample batch once: torch.from_numpy(obs).to(device, non_blocking=True), broadcast the "
                 "encoded latent, plan under torch.inference_mode() and reuse the sampling buffers")

# %% [markdown]
# ## 1. Symptom: planning one action takes long, and the device waits
# Each profiler step is one planning call (one action). `perfkit.cpu_bound` splits it into host
# time and GPU busy time: a CPU-bound planner keeps the host busy while the GPU idles.

# %%
display(HTML(html_table(tables.summary_table({"median step (ms), before": cpu_before.steps["wall_us"].median() / 1e3,
                                              "verdict": cpu_before.verdict, "recorded on": before.device}))))
display(plots.step_breakdown(cpu_before, title="Before: where each planning step's time went"))

# %% [markdown]
# ## 2. Measurement: host against device, and the calls per action
# The write-up's two ratios need GPU events: a CPU trace has no GPU to be idle, and the table
# says "no GPU" rather than a number. Op counts per action are exact in any trace.

# %%
split = per_step.host_device_split(cpu_before)
display(HTML(html_table(per_step.host_device_frame(cpu_before))))
OPS = ("aten::linear", "aten::copy_", "aten::to", "aten::lift_fresh", "aten::stack")
op_counts = per_step.ops_table(cpu_before, cpu_after, OPS)
display(HTML(html_table(op_counts)))
display(plots.breakdown(cpu_before.top_ops(12), value="self_us", top=12, title="Before: host ops by self time"))

# %% [markdown]
# ## 3. Diagnosis: what the fix removes, and where it sits in the source
# `perfkit.diff` lines the two traces up op by op (outermost calls, time per step, before and after);
# `perfkit.scan` reads the planner's source for the patterns that cause it (the naive port's
# per-sample `torch.FloatTensor(obs)` is flagged as `legacy-tensor-ctor`).

# %%
display(plots.diff_breakdown(comparison, title="Per-step time change, fix - naive port"))
display(HTML(html_table(comparison.top_ops.head(10))))
from perfkit.workloads import mppi

scan_report = perfkit.scan(mppi.__file__)
display(HTML(html_table(scan_report.to_frame())))

# %% [markdown]
# ## 4. The fix
# `from_numpy(obs).to(device, non_blocking=True)` wraps the numpy observation without a copy and
# moves it once; the encoded latent is broadcast to every sample instead of encoding the same
# observation per sample. `torch.inference_mode()` drops autograd's version bookkeeping, and the
# noise, action and return buffers are allocated once (`out=` and in-place ops). The op counts
# above, "after" column, show what remains per action.

# %% [markdown]
# ## 5. A/B with a confidence interval
# Live: both variants' steps timed interleaved (`perfkit.compare`). Trace: the step-time ratio
# of the two traces with its bootstrap CI over their profiled steps.

# %%
display(HTML(prose.prose(evidence.text())))
if evidence.ab is not None:
    display(plots.ab_distribution(evidence.ab))

# %% [markdown]
# ## 6. Recompiles when the sample count changes
# `perfkit.compile_ab` compiles the dynamics MLP on one batch of samples, then feeds batches of
# 2x and 4x the samples, as a planner whose sample count changes between calls does. Dynamo
# guards on the batch size: the first new size recompiles, with its reason and line. Marking the
# dimension dynamic (`dynamic=True`) is the fix.

# %%
with perfkit.make_workload("mppi", device, variant="from_numpy", **overrides) as planner:
    compile_inputs = planner.compile_inputs()
recompiled = {dyn: perfkit.compile_ab(compile_inputs["model"], compile_inputs["example_inputs"],
                                      shape_variants=compile_inputs["shape_variants"], dynamic=dyn,
                                      backend=compile_backend, device=device, min_time_s=ab_min_time_s,
                                      steps=ab_repeats)
              for dyn in (None, True)}
display(HTML(html_table(tables.summary_table({f"recompiles, dynamic={d}": r.recompile_count
                                              for d, r in recompiled.items()}))))
display(HTML(html_table(recompiled[None].to_frame())))

# %% [markdown]
# ## 7. Planning memory against samples x horizon, and where it runs out
# The gap the write-up left: how much memory a plan needs. `planning_memory` measures the peak
# bytes one planning step allocates (torch's allocator, CPU or CUDA) for several sample counts
# at several horizons, and fits `peak = fixed + samples * (per_sample + per_sample_step * horizon)`.
# The budget (`memory_budget_gib`, default: memory free on the device now) gives the largest
# sample count per horizon before the plan runs out.

# %%
from perfkit.bench.planning import planning_memory

budget = memory_budget_gib * 2**30 if memory_budget_gib else None
memory = planning_memory(memory_samples, memory_horizons, variant="from_numpy", device=device, overrides=overrides,
                         budget_bytes=budget)
display(plots.samples_horizon_memory(memory))
display(memory)

# %% [markdown]
# ## 8. Performance log
# The A/B (logged with the card above), the op counts per action after the fix (exact), the
# fitted memory per sample and per sample-step, each against the previous run of this case
# study on the same subject and device.

# %%
more = caserows.count_rows(NAME, per_step.ops_per_step(cpu_after, OPS), "calls", subject=subject, device=after.device,
                           suffix="_per_step")
more += caserows.planning_rows(NAME, memory, subject="live mppi from_numpy planning memory")
more += caserows.count_rows(NAME, {"recompiles": recompiled[None].recompile_count}, "recompiles",
                            subject=f"live mppi dynamics compile {compile_backend}", device=recompiled[None].device)
logged = pd.concat([logged, rows.log_rows(perf_log_path, more, change=change, run_id=run_id)], ignore_index=True)
sections.show_log(logged, perf_log_path, NAME, subject)

# %% [markdown]
# ## The write-up's figures and ours

# %%
gpu_why = f"the trace was recorded on {before.device}: no GPU events, so no GPU to be idle"
counts = op_counts.set_index("op")
limits = memory.limits_frame([max(memory_horizons)]).iloc[0]
display(HTML(html_table(closing_table([
    WriteupFigure("CPU time / CUDA time", "17x", gpu_only(split["cpu_gpu_ratio"], split["has_gpu"], gpu_why), "x",
                  "a small planner recorded without a GPU: all of its time is host time"),
    WriteupFigure("GPU idle", "94%", gpu_only(split["gpu_idle_pct"], split["has_gpu"], gpu_why), "%",
                  "as above: only a GPU trace (trace_path from a CUDA run) has this figure"),
    WriteupFigure("aten::linear per action", "62,700", counts.loc["aten::linear", "before"], "calls",
                  "4 MLPs x (1 encode + iterations x horizon rollout steps) instead of the write-up's larger "
                  "plan; the count does not change with the fix"),
    WriteupFigure("copies per action", "62,250", counts.loc["aten::copy_", "after"], "aten::copy_",
                  "one FloatTensor copy per sample (aten::lift_fresh) in the naive port; on a CPU .to(device) is "
                  "a no-op, so the device copies themselves only show in a GPU trace",
                  before=counts.loc["aten::copy_", "before"]),
    WriteupFigure("FloatTensor -> from_numpy + inference_mode", "the fix", evidence.speedup, "x faster",
                  f"{evidence.method} on {evidence.device}: "
                  + ("a GPU figure" if evidence.on_gpu else "a CPU figure, not a GPU speed-up"),
                  ci=measured_ci(*evidence.speedup_ci)),
    WriteupFigure("recompiles on changing sample counts", "yes (count not given)", recompiled[None].recompile_count,
                  "recompiles",
                  f"one new sample count fed after the first compile ({compile_backend} backend); "
                  f"dynamic=True: {recompiled[True].recompile_count}"),
    WriteupFigure("out of memory while planning", "ran out (size not given)", limits["max_samples"], "samples",
                  f"largest sample count at horizon {limits['horizon']:g} that fits "
                  f"{memory.budget_bytes / 2**30:,.3g} GiB "
                  f"({memory.budget_source}), fitted from {len(memory.to_frame())} measured points",
                  ci=measured_ci(limits["ci_low"], limits["ci_high"])),
]))))

# %% [markdown]
# ## Machine that ran this notebook
# Live figures and the harnesses ran here; trace figures come from where the traces were recorded.

# %%
sections.show_machine(perfkit.environment_report())
