# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Sync points
# Every point where the host waited for the GPU (`.item()`, `.cpu()`, `nonzero` on GPU tensors,
# blocking and pageable copies, explicit synchronizes), where it comes from and how long it blocked.
# A sync point is counted only when the trace shows the wait (a synchronize or copy call under it);
# `.item()`/`nonzero` on CPU tensors are host scalar reads, listed apart. On a CPU-only trace
# nothing waited on a GPU: scalar reads are listed as *possible* sync points.

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path; "live": record a reference workload now
# The default: .item() logging on an H200, two GPU-confirmed waits per step.
trace_path = "gpu/item_logging.pt.trace.json.gz"  # a trace file or per-rank folder; shipped traces by name
workload = "ppo"  # live mode: mppi, ppo, replay or leaky
variant = "sync_checks"  # live mode: a variant of the workload
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
steps = 3  # live mode: profiled steps
warmup = 1  # live mode: profiler warm-up steps
overrides = {}  # live mode: workload config fields, e.g. {"envs": 8}
detect_steps = 2  # live mode: steps run under the runtime sync detector
interactive = False  # True in JupyterLab: show the trace explorer widget
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import plots, prose, rows, sections, sync_points
from perfkit.report.card import verdict_card
from perfkit.results import html_table, html_warnings
from perfkit.bench import live

source = live.load_source(mode, trace_path, workload=workload, variant=variant, device=device, steps=steps,
                            warmup=warmup, overrides=overrides)
trace = source.trace
result = perfkit.syncs(trace)
detected = None
if mode == "live":
    detected = live.detect_workload_syncs(workload, variant, device=device, steps=detect_steps, overrides=overrides)
metrics = sync_points.sync_rows(result, trace, source.subject, source.device, detected=detected,
                                detected_steps=detect_steps)
logged = rows.log_rows(perf_log_path, metrics, change=change, run_id=run_label)
verdict_card("sync_points", result, logged, subject=source.subject, device=source.device,
             verdict=sync_points.sync_verdict(result), prediction=perfkit.diagnose(trace).prediction)

# %% [markdown]
# ## Sync points in the trace
# By kind, then by site ranked by blocked time: the user frame (file:line is where that function
# starts: the trace records no more; `perfkit detect SCRIPT` gives the exact line of each sync) and
# the innermost frame when it is library code. Host scalar reads that did not wait come last.

# %%
display(HTML(prose.prose(sync_points.sync_text(result, detected, detect_steps))))
sync_points.show_sync_sites(result)

# %% [markdown]
# ## Findings
# Most severe first, each with its evidence, the fix and the threshold that fired.

# %%
sections.show_findings(result, *trace.warnings)

# %% [markdown]
# ## Runtime detector (live mode)
# Syncing calls by source line, counted while the workload ran `detect_steps` steps. A trace has
# no process to watch: in trace mode the analysis above is all there is.

# %%
if detected is not None:
    display(HTML(html_table(detected.per_step(detect_steps))))
    display(HTML(html_warnings(detected.warnings)))

# %% [markdown]
# ## Timeline of the first step
# Long host ops followed by idle GPU lanes are syncs draining the queue.

# %%
display(plots.step_timeline(trace))

# %% [markdown]
# ## The trace
# Where it was recorded (from the trace itself) and its whole-file counts (times in us).

# %%
sections.show_trace(trace)

# %%
sections.show_explorer(interactive, trace_path)

# %% [markdown]
# ## Performance log
# This run's rows, each against the previous run of this investigation on the same subject and device.

# %%
sections.show_log(logged, perf_log_path, "sync_points", source.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Live figures were measured here; a trace was recorded wherever "The trace" says.

# %%
sections.show_machine(perfkit.environment_report())
