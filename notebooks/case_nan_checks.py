# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Case study 3: a navigation agent full of NaN checks
# **The write-up.** A navigation agent guarded its forward pass with more than 50
# `if torch.isnan(x).any(): ...` checks. Each is a host-device sync: the host reads the flag back
# before it can queue the next kernel, so the GPU idled between them. Resets of finished episodes
# went through the one-argument `torch.where(done)` (a `nonzero`, another sync), and CPU memory
# grew by 4 GB over a run.
#
# **Here** the same story runs on perfkit's PPO gridworld (`perfkit.make_workload("ppo")`): the
# `sync_checks` variant plants four NaN checks and a data-dependent branch in the forward pass,
# `nonzero_reset=True` resets environments through `torch.where(done)[0]`, and the leaky trainer
# (`perfkit.make_workload("leaky")`) keeps a growing history. Each is found three ways: in a trace
# (`perfkit.syncs`), at run time with the source line (`perfkit.detect_syncs`), and in the source
# (`perfkit.scan`). On a CPU a sync waits for nothing, so the counts are the evidence; their cost
# shows in a GPU trace (pass one as `trace_path`).

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path (before) and trace_path_b (after); "live": record both now
trace_path = "cpu/ppo_sync_checks.json.gz"  # before: 4 NaN checks + a data-dependent branch per forward
trace_path_b = "cpu/ppo_batched_metrics.json.gz"  # after: no checks, unconditional clamp
device = "auto"  # live runs and the detector: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
threads = 0  # torch intra-op threads for live runs and harnesses: 0 leaves them; 1 gives stable CPU timings
overrides = {}  # PPO config for live runs and the detector, e.g. {"envs": 64}
steps = 3  # live mode: profiled steps per variant
detect_steps = 2  # run-time detector: steps run under perfkit.detect_syncs()
ab_min_time_s = 1.0  # live A/B: seconds of timed work
ab_repeats = None  # live A/B: fixed rounds (None: fill ab_min_time_s)
leak_steps = 300  # memory growth: measured steps of the leaky trainer
leak_warmup = 30  # memory growth: unmeasured steps first
leak_every = 10  # memory growth: sample every N steps
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
import pandas as pd
from IPython.display import HTML, display

import perfkit
from perfkit.bench import live
from perfkit.report import caserows, memory_leak, pair, plots, prose, rows, sections, tables
from perfkit.analysis import per_step
from perfkit.report.card import verdict_card
from perfkit.report.casestudy import WriteupFigure, closing_table, measured_ci
from perfkit.bench.ladder import Arm, variant_ab
from perfkit.notebook_setup import open_case
from perfkit.results import html_table

NAME = "case_nan_checks"
ARMS = (Arm("NaN checks + tensor branch", "sync_checks"), Arm("no checks, clamp", "batched_metrics"))
before, after, subject, run_id, LABELS = open_case(mode, (trace_path, trace_path_b), workload="ppo", arms=ARMS,
                                                   device=device, threads=threads, steps=steps, overrides=overrides,
                                                   run_label=run_label)
syncs = per_step.sync_change(before.trace, after.trace)
logged = rows.log_rows(perf_log_path, caserows.count_rows(
    NAME, {"sync_points_before": syncs["before_per_step"], "sync_points_after": syncs["after_per_step"]}, "syncs",
    subject=subject, device=after.device, suffix="_per_step"), change=change, run_id=run_id)
verdict_card(NAME, syncs["before"], logged, subject=subject, device=after.device, verdict=per_step.sync_text(syncs),
             fix="Take the checks off the hot path: torch.nan_to_num or an unconditional clamp, or accumulate "
                 "torch.isfinite(x).all() on the device and read it every N steps; three-argument torch.where")

# %% [markdown]
# ## 1. Symptom: the host stops at every check
# `perfkit.syncs` lists each Python-level call that may make the host wait for the device, by
# kind. `if torch.isnan(x).any():` is `aten::is_nonzero` (Python's `bool()` of a tensor) after
# `aten::isnan` and `aten::any`.

# %%
display(HTML(prose.prose(per_step.sync_text(syncs))))
display(HTML(html_table(syncs["before"].by_kind)))
CHECK_OPS = ("aten::isnan", "aten::any", "aten::is_nonzero", "aten::item", "aten::nonzero")
cpu_before, cpu_after = perfkit.cpu_bound(before.trace), perfkit.cpu_bound(after.trace)
display(HTML(html_table(per_step.ops_table(cpu_before, cpu_after, CHECK_OPS))))

# %% [markdown]
# ## 2. Measurement: each syncing line, at run time
# `perfkit.detect_syncs()` watches every tensor call and counts those that would make the host
# wait, keyed by source line (on a CPU it treats CPU tensors as device tensors:
# "cpu-as-device"). Three runs: the checks, the fixed forward pass, and the fixed forward pass
# with the one-argument `torch.where(done)` environment reset.

# %%
DETECT = {"NaN checks + tensor branch": ("sync_checks", {}), "no checks, clamp": ("batched_metrics", {}),
          "one-argument torch.where reset": ("batched_metrics", {"nonzero_reset": True})}
detected = {label: live.detect_workload_syncs("ppo", variant, device=device, steps=detect_steps,
                                                overrides={**overrides, **extra})
            for label, (variant, extra) in DETECT.items()}
display(HTML(html_table(tables.summary_table({f"{k}: syncs per step": r.total / detect_steps
                                              for k, r in detected.items()}))))
for label, report in detected.items():
    if report.total:
        display(HTML(f"<h4>{prose.prose(label)}</h4>" + html_table(tables.with_source(report.per_step(detect_steps)))))

# %% [markdown]
# ## 3. Diagnosis: the patterns in the source
# `perfkit.scan` reads the workload's source without running it. `check-in-forward` flags a NaN
# check (or `.any().item()`) inside `forward` or a helper `forward` calls, `tensor-condition` the
# data-dependent branch, `where-nonzero` the one-argument `torch.where`. (The reference workload
# holds pathology and fix behind switches, so the lines are there either way.)

# %%
from perfkit.workloads import ppo

scan_report = perfkit.scan(ppo.__file__)
display(HTML(html_table(tables.with_source(scan_report.to_frame())[["line", "rule", "severity", "code", "fix"]])))

# %% [markdown]
# ## 4. The fix
# No check inside the step: clamp unconditionally (`h.clamp(-6, 6)` does the same math as the
# branch, with no read-back), repair with `torch.nan_to_num`, or accumulate
# `torch.isfinite(x).all()` into a device flag and read it every N steps; debug with
# `torch.autograd.set_detect_anomaly(True)` only while debugging. Reset environments with the
# three-argument `torch.where(done, new, old)`, which keeps shapes fixed.

# %% [markdown]
# ## 5. A/B with a confidence interval
# Live: both variants' steps timed interleaved. Trace: the step-time ratio of the two traces with
# its bootstrap CI over the profiled steps. On a CPU this is only the checks' own compute; the
# waits they cause exist only on a GPU.

# %%
comparison = perfkit.diff(before.trace, after.trace)
if mode == "live":
    evidence = pair.from_ab(variant_ab("ppo", *ARMS, device=device, overrides=overrides, min_time_s=ab_min_time_s,
                                       repeats=ab_repeats))
else:
    evidence = pair.from_diff(comparison, before, after, LABELS)
display(HTML(prose.prose(evidence.text())))
if evidence.ab is not None:
    display(plots.ab_distribution(evidence.ab))

# %% [markdown]
# ## 6. CPU memory that keeps growing
# The write-up's agent grew by 4 GB of CPU memory. `perfkit.hunt_leak` runs a step function,
# samples the Python heap (tracemalloc), the process RSS and live objects every few steps and
# fits their growth per 1,000 steps with a CI: here the leaky trainer that appends each step's
# inputs to a list it never trims (`unbounded_history`), against the fixed loop (`clean`).

# %%
hunts = {}
for variant in ("unbounded_history", "clean"):
    with perfkit.make_workload("leaky", device, variant=variant) as trainer:
        hunts[variant] = perfkit.hunt_leak(trainer.step, steps=leak_steps, warmup=leak_warmup,
                                           sample_every=leak_every, device=device)
display(HTML(prose.prose(*(f"{v}: " + memory_leak.leak_text(h) for v, h in hunts.items()))))
display(plots.memory_growth(hunts["unbounded_history"]))
display(HTML(html_table(hunts["unbounded_history"].lines_frame(), max_rows=5)))

# %% [markdown]
# ## 7. Performance log
# Sync points per step (logged with the card), the run-time detector's syncs per step, the
# A/B, and the memory growth per 1,000 steps with its CI.

# %%
more = evidence.rows(NAME, subject, ("sync_checks_step_ms", "batched_metrics_step_ms"))
more += caserows.count_rows(NAME, {k: r.total / detect_steps for k, r in detected.items()}, "syncs",
                            subject=f"live ppo detect_syncs on {device}", device=device, suffix="_detected_per_step")
more += caserows.relabel(memory_leak.leak_rows(hunts["unbounded_history"], "live leaky unbounded_history"), NAME)
logged = pd.concat([logged, rows.log_rows(perf_log_path, more, change=change, run_id=run_id)], ignore_index=True)
sections.show_log(logged, perf_log_path, NAME, subject)

# %% [markdown]
# ## The write-up's figures and ours

# %%
leak = hunts["unbounded_history"].series("tracemalloc_bytes")
counts = per_step.ops_table(cpu_before, cpu_after, CHECK_OPS).set_index("op")
display(HTML(html_table(closing_table([
    WriteupFigure("NaN checks per forward pass", "50+", scan_report.counts_by_rule.get("check-in-forward", 0),
                  "check sites", "the planted forward pass has 4 checks at one helper call site (scan counts the "
                  "site; the trace counts each call) and a data-dependent branch"),
    WriteupFigure("isnan(x).any() checks per step", "50+ per forward x forwards per step",
                  counts.loc["aten::isnan", "after"], "aten::isnan", before=counts.loc["aten::isnan", "before"],
                  why="one call per check per forward pass; a PPO step here runs the policy many times "
                      "(rollout, bootstrap value, updates)"),
    WriteupFigure("syncs from the checks per step", "one per check", syncs["after_per_step"], "sync points",
                  before=syncs["before_per_step"],
                  why=("counted in a CPU trace: where a GPU would wait, not the wait itself" if syncs["cpu_only"]
                       else "GPU-confirmed sync points in the trace")),
    WriteupFigure("one-argument torch.where(mask) sync", "one per reset",
                  detected["one-argument torch.where reset"].total / detect_steps, "syncs per step",
                  f"run-time detector ({detected['one-argument torch.where reset'].mode}), one reset per "
                  "environment step; 0 with the three-argument form"),
    WriteupFigure("CPU memory growth", "4 GB over the run", leak.per_1000 / 2**20, "MiB per 1,000 steps",
                  f"Python heap (tracemalloc) of the leaky trainer, {hunts['unbounded_history'].verdict}; the fixed "
                  f"loop: {hunts['clean'].verdict}. The write-up's run was far longer and its history larger",
                  ci=measured_ci(leak.ci_low / 2**20, leak.ci_high / 2**20)),
]))))

# %% [markdown]
# ## Machine that ran this notebook
# Live figures and the detector ran here; trace figures come from where the traces were recorded.

# %%
sections.show_machine(perfkit.environment_report())
