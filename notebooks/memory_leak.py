# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Memory leak hunt
# Does memory grow with steps? Live mode repeats a training step and fits the growth per 1,000
# steps (with a CI) of RSS, Python heap, objects and CUDA memory. A trace holds too few steps to
# see growth, so trace mode diffs a leaky loop's trace against the fixed one.

# %% tags=["parameters"]
mode = "live"  # "trace": diff trace_path against trace_path_b; "live": hunt the leak now
trace_path = "leaky_accumulating_callback.json.gz"  # trace mode: the leaky loop
trace_path_b = "leaky_clean.json.gz"  # trace mode: the fixed loop
workload = "leaky"  # live mode: the workload whose step() is repeated
variant = "keep_graph_losses"  # live mode: keep_graph_losses, unbounded_history, accumulating_callback, clean
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
overrides = {}  # live mode: workload config fields
leak_steps = 300  # live mode: measured steps
leak_warmup = 30  # live mode: steps before measuring
sample_every = 10  # live mode: steps between samples
monitor_interval_s = 0.1  # live mode: system monitor sampling interval
interactive = False  # True in JupyterLab: show the trace explorer widget (trace mode)
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import inputs, plots, prose, rows, sections
from perfkit.report.card import verdict_card
from perfkit.results import html_table

inputs.check_mode(mode)
hunt = comparison = None
if mode == "live":
    with inputs.live_workload(workload, variant, device, overrides) as trainer:
        with perfkit.SystemMonitor(interval_s=monitor_interval_s) as monitor:
            result = hunt = perfkit.hunt_leak(trainer.step, steps=leak_steps, warmup=leak_warmup,
                                              sample_every=sample_every, device=device)
    subject = inputs.live_subject(workload)
    metrics, recorded, verdict = rows.leak_rows(hunt, subject), hunt.device, None
else:
    before, after = inputs.load_source(mode, trace_path), inputs.load_source(mode, trace_path_b)
    result = comparison = perfkit.diff(before.trace, after.trace)
    subject, recorded = f"{before.subject} -> {after.subject}", after.device
    metrics = rows.diff_rows("memory_leak", comparison, after.trace, subject, recorded)
    verdict = prose.diff_verdict(comparison)
logged = rows.log_rows(perf_log_path, metrics, change=change, run_id=run_label)
verdict_card("memory_leak", result, logged, subject=subject, device=recorded, verdict=verdict)

# %% [markdown]
# ## Leak hunt (live mode)
# Growth per 1,000 steps of each series with its CI and threshold, the samples with the fitted
# line, the object types and allocation lines that grew, and the system monitor.

# %%
if hunt is not None:
    display(HTML(prose.prose(prose.leak_text(hunt))))
    display(plots.memory_growth(hunt))
    display(HTML(html_table(hunt.growth_frame())))
    display(HTML(html_table(hunt.types_frame())))
    display(HTML(html_table(hunt.lines_frame())))
    display(plots.monitor_timeline(monitor.result()))
    display(HTML(html_table(monitor.result().summary())))

# %% [markdown]
# ## Trace diff (trace mode)
# The before (`trace_path`) and after (`trace_path_b`) traces compared op by op
# (`perfkit.diff`); where each was recorded, from the traces themselves.

# %%
sections.show_diff(comparison, before.trace if comparison else None, after.trace if comparison else None)

# %% [markdown]
# ## Findings
# Most severe first, with recommended fixes.

# %%
sections.show_findings(result)

# %%
sections.show_explorer(interactive and mode == "trace", trace_path_b)

# %% [markdown]
# ## Performance log
# This run's rows, each against the previous run of this investigation on the same subject and device.

# %%
sections.show_log(logged, perf_log_path, "memory_leak", subject)

# %% [markdown]
# ## Machine that ran this notebook
# Live figures were measured here; traces were recorded wherever "The traces" says.

# %%
sections.show_machine()
