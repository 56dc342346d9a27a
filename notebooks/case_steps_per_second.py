# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Case study 4: from 50 to 29,000 steps per second
# **The write-up.** An RL training loop went from 50 to 29,000 environment steps per second in a
# series of fixes: no `.item()` logging inside the loop (metrics accumulated on the device and
# read in batches, asynchronously), warm-up excluded from the measurement, fused Adam, no
# `GradScaler` sync, mixed precision kept on (switching AMP off doubled the step), and no Python
# branch on a tensor's value inside the compiled model (it broke the graph).
#
# **Here** the same ladder runs on perfkit's PPO gridworld (`perfkit.make_workload("ppo")`), each
# rung timed against the one before with a confidence interval, plus what a CPU can show of the
# GPU-only costs: their counts. `.item()` reads and GradScaler's inf check are syncs (counted at
# run time and in the trace); AMP's gain on a GPU comes from tensor cores and half the bytes
# (counted: the activations saved for backward). Graph breaks and recompiles come from dynamo's
# own diagnostics, with the source line. A CPU run never claims a GPU's speed-up.
# `mode="trace"` reads the recorded traces; `mode="live"` records the pair now on `device`.

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path (before) and trace_path_b (after); "live": record both now
trace_path = "cpu/ppo_item_logging.json.gz"  # before: .item() per env step and per update
trace_path_b = "cpu/ppo_batched_metrics.json.gz"  # after: metrics on the device, read every 4 iterations
compiled_traces = ["cpu/ppo_tensor_branch.json.gz", "cpu/ppo_flag_flip.json.gz", "cpu/ppo_compiled.json.gz"]  # under compile
device = "auto"  # live runs and harnesses: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
threads = 0  # torch intra-op threads for live runs and harnesses: 0 leaves them; 1 gives stable CPU timings
overrides = {}  # PPO config for live runs and harnesses, e.g. {"envs": 64, "rollout": 32}
steps = 3  # live mode: profiled steps per variant
detect_steps = 2  # run-time detector: steps run under perfkit.detect_syncs()
warmup_steps = 6  # warm-up: steps of a fresh run, the first against the rest
ab_min_time_s = 1.0  # each ladder comparison and A/B: seconds of timed work
ab_repeats = None  # fixed rounds per comparison (None: fill ab_min_time_s)
compile_backend = "eager"  # torch.compile backend for the break/recompile checks ("inductor": real code)
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
from perfkit.bench.ladder import Arm, first_step_cost, ppo_env_steps, speed_ladder
from perfkit.report.perflog import new_run_id
from perfkit.results import format_number, html_table
from perfkit.bench import live

NAME = "case_steps_per_second"
RUNGS = (Arm(".item() logging", "item_logging", {"fused_adam": False}),
         Arm("batched metrics", "batched_metrics", {"fused_adam": False}),
         Arm("fused Adam", "batched_metrics"), Arm("bf16 autocast", "batched_metrics", {"amp": True}))
run_id = run_label or new_run_id()
live.use_threads(threads)
live.quiet_profiler_log()
ladder = speed_ladder("ppo", RUNGS, device=device, overrides=overrides, units=ppo_env_steps, unit="env steps/s",
                      min_time_s=ab_min_time_s, repeats=ab_repeats)
logged = rows.log_rows(perf_log_path, caserows.ladder_rows(NAME, ladder, subject="live ppo ladder"), change=change,
                       run_id=run_id)
verdict_card(NAME, ladder, logged, subject="live ppo ladder", device=ladder.device, verdict=ladder.verdict,
             fix="Read metrics from the device in batches, use fused Adam (no GradScaler sync), keep autocast on, "
                 "and keep Python branches on tensor values out of compiled code")

# %% [markdown]
# ## 1. Symptom: few environment steps per second
# The first rung is the loop as the write-up found it: `.item()` on every reward and loss, the
# default Adam. Its rate in environment steps per second (a PPO step is one iteration of
# `envs x rollout` environment steps), with a 95% CI over its timed steps.

# %%
display(HTML(html_table(ladder.to_frame().head(1)[["label", "rate", "rate_ci_low", "rate_ci_high", "unit",
                                                   "median_ms"]])))

# %% [markdown]
# ## 2. Measurement: what the loop waits for
# `.item()` copies a scalar to the host and waits for every queued kernel. The trace lists each
# scalar read; the run-time detector gives each syncing line and its count per step.

# %%
PAIR = (Arm(".item() logging", "item_logging"), Arm("batched metrics", "batched_metrics"))
before, after = live.load_pair(mode, (trace_path, trace_path_b), workload="ppo", arms=PAIR, device=device,
                               steps=steps, overrides=overrides)
subject = pair.pair_subject(mode, before, after, "ppo", tuple(a.label for a in PAIR))
syncs = per_step.sync_change(before.trace, after.trace)
display(HTML(prose.prose(per_step.sync_text(syncs))))
display(HTML(html_table(syncs["before"].to_frame()[["kind", "op", "file", "line", "count", "per_step"]])))
detected = {a.label: live.detect_workload_syncs("ppo", a.variant, device=device, steps=detect_steps,
                                                  overrides=overrides) for a in PAIR}
for label, report in detected.items():
    display(HTML(prose.prose(f"{label}: {report.total / detect_steps:g} syncing calls per step ({report.mode})")))
    if report.total:
        display(HTML(html_table(tables.with_source(report.per_step(detect_steps)))))

# %% [markdown]
# ### Warm-up
# The first step of a fresh run pays one-time costs (allocations, lazy initialization, cuDNN
# autotuning, and most of all compilation). A benchmark that includes it measures set-up; every
# perfkit harness runs warm-up rounds first. Here a fresh `torch.compile`d PPO run, its first step
# against the rest.

# %%
warm = first_step_cost("ppo", Arm("torch.compile", "compiled", {"compile_backend": compile_backend}),
                       steps=warmup_steps, device=device, overrides=overrides)
display(HTML(html_table(tables.summary_table(warm.summary()))))
display(plots.workload_steps(warm.run))

# %% [markdown]
# ## 3. Diagnosis and fixes, one rung at a time
# Each rung adds one fix to the one above and is timed against it, interleaved
# (`perfkit.compare`): the speed-up column is the like-for-like comparison; rates move with the
# machine's load between comparisons. On a CPU, removing a sync saves only its own work (there is
# no device to wait for), and bf16 autocast is usually slower without AMX: the GPU figures of the
# write-up are not claimed here.

# %%
display(plots.fix_ladder(ladder))
display(ladder)

# %% [markdown]
# ## 4. GradScaler's sync, and how fused Adam removes it
# With fp16 autocast, `GradScaler.step` checks the gradients for inf/NaN; with a default Adam it
# reads the flag with `.item()` every step. A fused Adam takes the flag as a tensor and skips the
# step on the device. Counted by the run-time detector (on a CPU: where a GPU would wait).

# %%
from perfkit.bench.gradscaler import gradscaler_syncs

scaler = gradscaler_syncs(steps=detect_steps, device=device)
display(HTML(html_table(scaler)))

# %% [markdown]
# ## 5. Mixed precision: what a CPU can count
# Switching autocast off doubled the write-up's step on its GPU. A CPU has no tensor cores, so its
# bf16 timing says nothing about a GPU; the activations autograd saves for backward are exact
# everywhere, and bf16 halves them. `perfkit.amp_ab` also checks the two loss curves agree.

# %%
from perfkit.workloads.mlp import mlp_problem
from perfkit.bench import live
from perfkit.report import amp_regression
from perfkit.report import cpu_bound

problem = mlp_problem(batch=64, features=32, hidden=128, layers=2)
amp = perfkit.amp_ab(problem.make_model, problem.make_batch, problem.loss_fn, steps=4, device=device,
                     compare_fused=False, min_time_s=ab_min_time_s, repeats=ab_repeats)
display(HTML(prose.prose(amp_regression.amp_text(amp))))

# %% [markdown]
# ## 6. A Python branch on a tensor breaks the compiled graph
# `if (h.abs() > 6).any(): h = h.clamp(-6, 6)` reads a tensor's value: dynamo cannot trace
# through it, so it splits the forward pass into two graphs with a sync between them.
# `perfkit.compile_ab` reports each break with dynamo's reason and the source line. The fix
# clamps unconditionally (same math, one graph).

# %%
def compiled(variant: str):
    with perfkit.make_workload("ppo", device, variant=variant, **overrides) as w:
        spec = w.compile_inputs()
    return perfkit.compile_ab(spec["model"], spec["example_inputs"], shape_variants=spec["shape_variants"],
                              backend=compile_backend, device=device, min_time_s=ab_min_time_s, steps=ab_repeats)


compiles = {v: compiled(v) for v in ("tensor_branch", "flag_flip", "compiled")}
display(HTML(html_table(pd.DataFrame([{"variant": v, "graph breaks": r.graph_break_count,
                                       "recompiles": r.recompile_count} for v, r in compiles.items()]))))
display(HTML(html_table(cpu_bound.compile_sites(compiles["tensor_branch"]))))

# %% [markdown]
# ## 7. A Python flag that flips between calls recompiles
# `forward(obs, record_stats)` with `record_stats=True` on the last rollout step only: dynamo
# guards on the flag's value, so the first flip compiles a second graph (and a frame that flips
# often hits the recompile limit and falls back to eager).

# %%
display(HTML(html_table(cpu_bound.compile_sites(compiles["flag_flip"]))))
sections.show_findings(compiles["flag_flip"])

# %% [markdown]
# ### The same, in recorded traces
# A trace recorded under `torch.compile` names each compiled graph `Torch-Compiled Region: F/C`:
# two frames per forward pass are a graph break, one more compile id than the fix is a recompile.

# %%
for name in compiled_traces:
    regions = per_step.compiled_regions(live.load_source("trace", name).trace)
    display(HTML(prose.prose(f"{name}: {regions['frame'].nunique()} frame(s), {len(regions)} graph(s)")
                 + html_table(regions)))

# %% [markdown]
# ## 8. Performance log
# The ladder (logged with the card), the sync counts of the pair, GradScaler's syncs per step
# and the graph breaks and recompiles, each against the previous run.

# %%
more = caserows.count_rows(NAME, {"syncs_before": syncs["before_per_step"], "syncs_after": syncs["after_per_step"]},
                           "syncs", subject=subject, device=after.device, suffix="_per_step")
more += caserows.count_rows(NAME, dict(zip(scaler["setup"], scaler["syncs_per_step"])), "syncs",
                            subject=f"live mlp GradScaler on {device}", device=device, suffix="_syncs_per_step")
more += caserows.count_rows(NAME, {f"{v}_graph_breaks": r.graph_break_count for v, r in compiles.items()}
                            | {f"{v}_recompiles": r.recompile_count for v, r in compiles.items()}, "count",
                            subject=f"live ppo compile {compile_backend}", device=device)
logged = pd.concat([logged, rows.log_rows(perf_log_path, more, change=change, run_id=run_id)], ignore_index=True)
sections.show_log(logged, perf_log_path, NAME, "live ppo ladder")

# %% [markdown]
# ## The write-up's figures and ours

# %%
table = ladder.to_frame().set_index("label")
first, last = table.iloc[0], table.iloc[-1]
on_gpu = ladder.device.startswith("cuda")
per_setup = scaler.set_index("setup")["syncs_per_step"]
display(HTML(html_table(closing_table([
    WriteupFigure("environment steps per second", "50 -> 29,000", last["rate"], ladder.unit, before=first["rate"],
                  why=f"first rung -> last ({table.index[-1]}), medians over their timed steps on {ladder.device}"
                      + ("" if on_gpu else "; on a CPU the fixes aimed at GPU waits cannot show and bf16 autocast "
                                           "usually costs time"),
                  ci=measured_ci(last["rate_ci_low"], last["rate_ci_high"])),
    WriteupFigure("speed-up, first fix to last", "580x", ladder.overall.speedup, "x",
                  "interleaved A/B of the first and last rung" + ("" if on_gpu else "; a CPU figure, not a GPU's"),
                  ci=measured_ci(*ladder.overall.speedup_ci)),
    WriteupFigure(".item() syncs per step", "one per logged value", detected[PAIR[1].label].total / detect_steps,
                  "syncs", before=detected[PAIR[0].label].total / detect_steps,
                  why=f"run-time detector ({detected[PAIR[0].label].mode}); after the fix only the metrics read "
                      "every metrics_every iterations remains"),
    WriteupFigure("batched, asynchronous metrics", "the fix", table.loc["batched metrics", "speedup"], "x",
                  "interleaved against the .item() rung" + ("" if on_gpu else " on a CPU, where a sync waits for "
                                                                              "nothing: only the read's own cost"),
                  ci=measured_ci(table.loc["batched metrics", "ci_low"], table.loc["batched metrics", "ci_high"])),
    WriteupFigure("warm-up excluded", "first steps dropped", warm.ratio, "x the steady step",
                  f"a fresh torch.compile ({compile_backend}) run: first step {format_number(warm.first_ms, 3)} ms "
                  f"against the median of the next {warmup_steps - 1}"),
    WriteupFigure("fused Adam", "the fix", table.loc["fused Adam", "speedup"], "x",
                  "interleaved against the rung above (default Adam)",
                  ci=measured_ci(table.loc["fused Adam", "ci_low"], table.loc["fused Adam", "ci_high"])),
    WriteupFigure("GradScaler sync per step", "one per step", per_setup.iloc[2], "syncs",
                  before=per_setup.iloc[1], why=f"fp16 + GradScaler, default -> fused Adam ({scaler['mode'][0]})"),
    WriteupFigure("AMP off doubles the step", "2x", gpu_only(table.loc["bf16 autocast", "speedup"], on_gpu,
                                                             "a CPU has no tensor cores; bf16 here is no GPU figure"),
                  "x", f"saved activations fp32 {amp.saved_bytes['fp32']:,} -> bf16 {amp.saved_bytes['amp']:,} bytes "
                  "(exact on any device)"),
    WriteupFigure("a tensor branch breaks torch.compile", "graph break", compiles["tensor_branch"].graph_break_count,
                  "graph breaks", f"dynamo's reason and line above; {compiles['compiled'].graph_break_count} after "
                                  "the unconditional clamp"),
    WriteupFigure("a flipping Python flag recompiles", "not in the write-up", compiles["flag_flip"].recompile_count,
                  "recompiles",
                  f"dynamo guards on record_stats; {compiles['compiled'].recompile_count} without the flag"),
]))))

# %% [markdown]
# ## Machine that ran this notebook
# The ladder, detector and compile checks ran here; trace figures come from where the traces were
# recorded.

# %%
sections.show_machine(perfkit.environment_report())
