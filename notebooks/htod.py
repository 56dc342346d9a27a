# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Host-to-device copies
# Which host<->device copies a step makes, from pageable or pinned memory, and whether the host
# waited after them; then this machine's copy bandwidth per size and mode.

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path; "live": record a reference workload now
# The default: a 64 MiB copy per step from pageable memory on an H200; gpu/copies_pinned is the fix.
trace_path = "gpu/copies_pageable.pt.trace.json.gz"  # a trace file or per-rank folder; shipped traces by name
workload = "replay"  # live mode: mppi, ppo, replay or leaky
variant = "host_normalize"  # live mode: a variant of the workload
device = "auto"  # "auto" (CUDA when present, else CPU), "cpu" or "cuda"
steps = 3  # live mode: profiled steps
warmup = 1  # live mode: profiler warm-up steps
overrides = {}  # live mode: workload config fields, e.g. {"batch": 4}
sweep_sizes = [4096, 65536, 1048576, 16777216]  # bytes per copy in the bandwidth sweep
sweep_repeats = 5  # timed copies per size and mode
interactive = False  # True in JupyterLab: show the trace explorer widget
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import htod, plots, prose, rows, sections
from perfkit.report.card import verdict_card
from perfkit.results import html_table
from perfkit.bench import live

source = live.load_source(mode, trace_path, workload=workload, variant=variant, device=device, steps=steps,
                            warmup=warmup, overrides=overrides)
trace = source.trace
result = perfkit.htod(trace)
sweep = perfkit.htod_sweep(sizes_bytes=sweep_sizes, repeats=sweep_repeats, device=device)
logged = rows.log_rows(perf_log_path, htod.htod_rows(result, trace, source.subject, source.device, sweep),
                       change=change, run_id=run_label)
verdict_card("htod", result, logged, subject=source.subject, device=source.device,
             verdict=None if len(result.to_frame()) else "no host-device copies in this trace (no GPU events)",
             prediction=perfkit.diagnose(trace).prediction)

# %% [markdown]
# ## Copies in the trace
# Per direction and host-memory kind (time in us, GB/s), then per issuing op and source line. The GPU side's
# GB/s hides a pageable copy's staging on the host; the effective GB/s counts the host's blocked time too.

# %%
display(HTML(prose.prose(htod.htod_text(result, sweep))))
display(plots.copy_kinds(result))
display(HTML(html_table(htod.with_sizes(result.to_frame()))))
display(HTML(html_table(htod.with_sizes(result.sites))))

# %% [markdown]
# ## Findings
# Of the trace analysis and of the sweep, most severe first, with fixes.

# %%
sections.show_findings(result, *trace.warnings, extra=[sweep])

# %% [markdown]
# ## Bandwidth on this machine
# GB/s of `dst.copy_(src)` per size and mode (1 GB = 1e9 bytes); without a GPU, only a host
# memcpy baseline.

# %%
display(plots.copy_bandwidth(sweep))
display(HTML(html_table(htod.sweep_table(sweep), max_rows=60)))

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
sections.show_log(logged, perf_log_path, "htod", source.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Live figures were measured here; a trace was recorded wherever "The trace" says.

# %%
sections.show_machine(perfkit.environment_report())
