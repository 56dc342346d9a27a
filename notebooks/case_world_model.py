# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Case study 2: a world-model agent's replay sampling
# **The write-up.** A Dreamer-style agent sampled pixel sequences from a replay buffer every
# training step. The profile showed large totals of pageable host-to-device copies; the step's
# `## train/sample ##` annotation went from 529 to 358 ms once the work was compiled, every change
# was recorded in a dated performance log, and stacking sequences into preallocated storage
# (instead of `torch.stack` of a fresh list) removed the rest.
#
# **Here** the same story runs on perfkit's pixel replay pipeline (`perfkit.make_workload("replay")`):
# host-side `float32` conversion and `torch.stack` every step (`host_normalize`) against uint8
# gathered with one `index_select(out=...)` into a preallocated staging tensor, converted after
# the copy (`device_normalize`; pinned on CUDA). Each step is two `record_function` ranges,
# `## train/sample ##` and `## train/update ##`, so the sample phase compares by name between
# runs. `mode="trace"` reads the recorded traces; `mode="live"` records both variants now on
# `device`.

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path (before) and trace_path_b (after); "live": record both now
trace_path = "cpu/replay_host_normalize.json.gz"  # before: host float32 /255 and torch.stack per step
trace_path_b = "cpu/replay_device_normalize.json.gz"  # after: uint8 index_select into preallocated staging
device = "auto"  # live runs: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
threads = 0  # torch intra-op threads for live runs and harnesses: 0 leaves them; 1 gives stable CPU timings
overrides = {}  # replay config for live runs, e.g. {"frame_size": 84, "batch": 32, "seq_len": 16}
steps = 8  # live mode: profiled steps per variant (the range CI is over steps)
ab_min_time_s = 1.0  # live A/B of whole steps: seconds of timed work
ab_repeats = None  # live A/B: fixed rounds (None: fill ab_min_time_s)
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
import pandas as pd
from IPython.display import HTML, display

import perfkit
from perfkit.report import caserows, htod, pair, plots, prose, rows, sections
from perfkit.analysis import per_step
from perfkit.report.card import verdict_card
from perfkit.report.casestudy import WriteupFigure, closing_table, gpu_only, measured_ci
from perfkit.bench.ladder import Arm, arm_facts, variant_ab
from perfkit.notebook_setup import open_case
from perfkit.results import html_table
from perfkit.workloads.replay import SAMPLE_ANNOTATION

NAME = "case_world_model"
ARMS = (Arm("host normalize + torch.stack", "host_normalize"), Arm("preallocated uint8 staging", "device_normalize"))
before, after, subject, run_id, LABELS = open_case(mode, (trace_path, trace_path_b), workload="replay", arms=ARMS,
                                                   device=device, threads=threads, steps=steps, overrides=overrides,
                                                   run_label=run_label)
sample = per_step.range_change(before.trace, after.trace, SAMPLE_ANNOTATION)
logged = rows.log_rows(perf_log_path, caserows.range_rows(NAME, sample, subject=subject, device=after.device),
                       change=change, run_id=run_id)
verdict_card(NAME, perfkit.cpu_bound(after.trace), logged, subject=subject, device=after.device,
             verdict=per_step.range_text(sample),
             fix="Gather into preallocated (pinned, on CUDA) uint8 storage with index_select(out=...), copy with "
                 "non_blocking=True, convert to float on the device")

# %% [markdown]
# ## 1. Symptom: the sample phase of every step
# `record_function` ranges are the user's own markers in a trace; `perfkit.cpu_bound` lists each
# with its count and time per step. The sample range is the phase the write-up timed.

# %%
cpu_before, cpu_after = perfkit.cpu_bound(before.trace), perfkit.cpu_bound(after.trace)
display(HTML(html_table(cpu_before.annotations)))
display(plots.step_timeline(before.trace))

# %% [markdown]
# ## 2. Measurement: host-to-device copies, and the bytes behind them
# In a GPU trace `perfkit.htod` counts each host-to-device copy, its bytes and whether its source
# was pageable memory (a pageable copy is staged through a driver buffer and blocks the host). A
# CPU trace has no device copies at all: there the bytes each step *would* copy come from the
# pipeline itself (`bytes_per_batch`), 4x larger when frames are converted to float32 on the host.

# %%
copies = perfkit.htod(before.trace)
display(HTML(prose.prose(htod.htod_text(copies))))
if len(copies.to_frame()):
    display(HTML(html_table(copies.to_frame())))
facts = {a.label: arm_facts("replay", a, ("bytes_per_batch",), device=device, overrides=overrides) for a in ARMS}
display(HTML(html_table(pd.DataFrame([{"variant": k, "bytes copied per step": v["bytes_per_batch"],
                                       "skipped here": "; ".join(v["notes"])} for k, v in facts.items()]))))

# %% [markdown]
# ## 3. Diagnosis: what the sample phase does
# Before: a Python list of per-sequence slices, each converted with `astype(float32) / 255` on the
# host, then `torch.stack` into a fresh tensor every step (one allocation of the whole batch, in
# float32). The ops per step below show `aten::stack` before and `aten::index_select` after;
# `perfkit.diff` lines up every op.

# %%
SAMPLE_OPS = ("aten::stack", "aten::index_select", "aten::div", "aten::div_", "aten::to", "aten::copy_")
display(HTML(html_table(per_step.ops_table(cpu_before, cpu_after, SAMPLE_OPS))))
comparison = perfkit.diff(before.trace, after.trace)
display(plots.diff_breakdown(comparison, title="Per-step time change, preallocated staging - host stacking"))

# %% [markdown]
# ## 4. The fix
# One `torch.index_select(frames, 0, index, out=staging)` gathers every sequence into a uint8
# tensor allocated once (pinned on CUDA, so `.to(device, non_blocking=True)` is a real asynchronous
# copy); the float conversion and `/255` run after the copy, on the device, on a quarter of the
# bytes.

# %% [markdown]
# ## 5. A/B with a confidence interval
# The sample range, compared by name between the two traces: median time per step before and
# after, and the ratio's 95% bootstrap CI over the profiled steps. Then whole steps: live, timed
# interleaved (`perfkit.compare`); trace, the step-time ratio of the two traces. On a CPU expect
# little: `.to("cpu")` copies nothing and both variants convert to float on the same host. The
# 4x bytes and the blocking pageable copy cost time only on a GPU (a GPU trace shows them).

# %%
display(HTML(prose.prose(per_step.range_text(sample))))
if mode == "live":
    evidence = pair.from_ab(variant_ab("replay", *ARMS, device=device, overrides=overrides, min_time_s=ab_min_time_s,
                                       repeats=ab_repeats))
else:
    evidence = pair.from_diff(comparison, before, after, LABELS)
display(HTML(prose.prose(evidence.text())))
if evidence.ab is not None:
    display(plots.ab_distribution(evidence.ab))

# %% [markdown]
# ## 6. The annotations of both runs, side by side
# `perfkit.diff` compares every `record_function` range of the two traces by name: count and mean
# time per step on each side and the change (a slow outlier step moves a mean; the A/B above
# compares medians). The comparison the write-up made by hand between two profiles.

# %%
display(HTML(html_table(comparison.annotations)))

# %% [markdown]
# ## 7. The dated performance log
# Each run of this case study appends its rows to the performance log, dated, with what changed
# (`change`); each row is judged against the previous run of the same subject on the same device.

# %%
more = evidence.rows(NAME, subject, ("host_normalize_step_ms", "device_normalize_step_ms"))
more += caserows.count_rows(NAME, {a.variant: facts[a.label]["bytes_per_batch"] for a in ARMS}, "bytes",
                            subject=f"replay copy size {overrides or 'defaults'}", device="any",
                            suffix="_htod_bytes_per_step")
logged = pd.concat([logged, rows.log_rows(perf_log_path, more, change=change, run_id=run_id)], ignore_index=True)
sections.show_log(logged, perf_log_path, NAME, subject)
history = rows.history(perf_log_path, NAME, subject)
display(HTML(html_table(history[["date", "run_id", "change", "metric", "value", "unit", "verdict"]], max_rows=30)))

# %% [markdown]
# ## The write-up's figures and ours

# %%
pageable = copies.to_frame()
no_copies = f"the trace was recorded on {before.device}: it has no host-to-device copies"
bytes_before, bytes_after = (facts[a.label]["bytes_per_batch"] for a in ARMS)
display(HTML(html_table(closing_table([
    WriteupFigure("pageable host-to-device copies per step", "large totals (count not given)",
                  gpu_only(per_step.pageable_htod_per_step(copies), before.trace.has_gpu_events, no_copies), "copies",
                  "each sampled batch is one copy; the write-up's totals add up a whole training run"),
    WriteupFigure("bytes copied host-to-device per step", "not given", bytes_after, "bytes", before=bytes_before,
                  why="computed from the pipeline's sizes: float32 on the host is 4x the uint8 bytes"),
    WriteupFigure(f"{SAMPLE_ANNOTATION} per step", "529 -> 358 ms (0.68x) under compile", sample["after_ms"], "ms",
                  before=sample["before_ms"],
                  why=f"the fix here is preallocated uint8 staging, not torch.compile, on {after.device} with "
                      f"{sample['n_a']} and {sample['n_b']} profiled steps; {sample['verdict']}"),
    WriteupFigure(f"{SAMPLE_ANNOTATION} after / before", "0.68", sample["ratio"], "x",
                  "the ratio's CI is a bootstrap over profiled steps", ci=measured_ci(sample["low"], sample["high"])),
    WriteupFigure("dated performance log", "kept by hand", float(history["run_id"].nunique()), "runs logged",
                  "runs of this case study on this subject in the perf log so far, each dated and judged"),
    WriteupFigure("stacking into preallocated storage", "the fix", per_step.ops_per_step(cpu_after, ["aten::stack"])
                  ["aten::stack"], "aten::stack per step", before=per_step.ops_per_step(cpu_before, ["aten::stack"])
                  ["aten::stack"], why="torch.stack of a fresh list every step, replaced by index_select(out=...)"),
]))))

# %% [markdown]
# ## Machine that ran this notebook
# Live figures ran here; trace figures come from where the traces were recorded.

# %%
sections.show_machine(perfkit.environment_report())
