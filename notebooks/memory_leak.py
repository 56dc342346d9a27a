# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Memory leak hunt
# Does memory grow from step to step? A leak is growth that repeats every step, so it takes many
# steps or several snapshots to see:
# - **live** mode repeats a training step and fits the growth per 1,000 steps (with a CI) of RSS,
#   Python heap, objects and CUDA memory;
# - **snapshot** mode reads CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`). One
#   snapshot shows only what its window allocated and kept ("growth within the window":
#   activations, optimizer state on a first step), never a leak; several, taken at the same point
#   of successive steps, are compared (`perfkit.snapshot_growth`: a leak grows in every interval
#   after the first);
# - **trace** mode: a profiler trace holds too few steps to fit growth over thousands of steps, so it
#   diffs a leaky loop's trace against the fixed one, and, when the traces hold `[memory]` events
#   (`perfkit profile --memory`), draws their memory timeline and the growth per step inside each.

# %% tags=["parameters"]
mode = "live"  # "live": hunt the leak now; "snapshot": read snapshot_paths; "trace": diff two traces
trace_path = "cpu/leaky_accumulating_callback.json.gz"  # trace mode: the leaky loop
trace_path_b = "cpu/leaky_clean.json.gz"  # trace mode: the fixed loop
snapshot_paths = []  # snapshot mode: CUDA memory snapshot files, in the order taken (one, or one per step)
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
from perfkit.report import memory_leak, plots, prose, rows, sections, tables, trace_diff
from perfkit.report.card import verdict_card
from perfkit.report.trace_diff import compare_traces
from perfkit.results import html_table
from perfkit.bench import live

memory_leak.check_mode(mode)
hunt = pairing = snaps = leak = None
if mode == "snapshot":
    snaps = memory_leak.load_snapshots(snapshot_paths)
    result, subject, recorded = snaps.result, snaps.subject, snaps.device
    metrics, verdict = memory_leak.snapshot_rows(snaps), memory_leak.snapshot_verdict(snaps)
elif mode == "live":
    with live.live_workload(workload, variant, device, overrides) as trainer:
        with perfkit.SystemMonitor(interval_s=monitor_interval_s) as monitor:
            result = hunt = perfkit.hunt_leak(trainer.step, steps=leak_steps, warmup=leak_warmup,
                                              sample_every=sample_every, device=device)
    subject = live.live_subject(workload)
    metrics, recorded, verdict = memory_leak.leak_rows(hunt, subject), hunt.device, None
else:
    pairing = compare_traces("memory_leak", mode, trace_path, trace_path_b)
    result, leak = pairing.diff, memory_leak.trace_leak(pairing)  # the verdict reads memory, not step times
    subject, recorded, metrics, verdict = pairing.subject, pairing.device, leak.rows + pairing.metrics, None
logged = rows.log_rows(perf_log_path, metrics, change=change, run_id=run_label)
verdict_card("memory_leak", leak or result, logged, subject=subject, device=recorded, verdict=verdict)

# %% [markdown]
# ## Leak hunt (live mode)
# Growth per 1,000 steps of each series with its CI and threshold, the samples with the fitted
# line, the object types and allocation lines that grew, and the system monitor.

# %%
if hunt is not None:
    display(HTML(prose.prose(memory_leak.leak_text(hunt))))
    display(plots.memory_growth(hunt))
    display(HTML(html_table(hunt.growth_frame())))
    display(HTML(html_table(hunt.types_frame(), empty="No object type grew in count between the first and last sample.")))
    display(HTML(html_table(hunt.lines_frame(), empty="No allocation line grew between the first and last sample (tracemalloc).")))
    display(plots.monitor_timeline(monitor.result()))
    display(HTML(html_table(tables.monitor_table(monitor.result()))))

# %% [markdown]
# ## CUDA memory snapshots (snapshot mode)
# One snapshot: its memory over the recorded window and the sites still holding memory at its end.
# Several: allocated and reserved memory at each, and the allocation sites that grew.

# %%
if snaps is not None:
    memory_leak.show_snapshots(snaps)

# %% [markdown]
# ## Trace diff (trace mode)
# The before (`trace_path`) and after (`trace_path_b`) traces compared per full step
# (`perfkit.diff`; partial steps at the profiler window's edges are dropped): the biggest movers,
# headline metrics, host waits on the GPU by kind, `record_function` ranges, both summaries and
# where the after trace was recorded.

# %%
trace_diff.show_diff(pairing)

# %% [markdown]
# ## Memory timeline (trace mode)
# Allocated and reserved memory over time per device from each trace's `[memory]` events (recorded
# with `profile_memory=True`, `perfkit profile --memory`), with the step boundaries: the peak with the
# op and Python function that allocated at it, the memory still held at each step's end and its
# growth per step (growth whose CI stays above zero is a leak inside one trace).

# %%
if leak is not None:
    for side, timeline in zip((pairing.before, pairing.after), leak.timelines):
        display(plots.memory_over_time(timeline, title=f"Memory timeline: {side.subject}"))
        display(timeline)

# %% [markdown]
# ## Findings
# Regressions and problems first, most severe first, with recommended fixes; then improvements
# and notes (severity info: a trace diff reports what got faster too, and a host wait that only
# moved between kinds); then warnings (a trace diff's dropped partial steps among them).

# %%
sections.show_findings(result, extra=(leak,) if leak else (), info="Improvements and notes (severity info)")

# %%
sections.show_explorer(interactive and mode == "trace", trace_path_b)

# %% [markdown]
# ## Performance log
# This run's rows, each against the previous run of this investigation on the same subject and device.

# %%
sections.show_log(logged, perf_log_path, "memory_leak", subject)

# %% [markdown]
# ## Machine that ran this notebook
# Live figures were measured here; traces and snapshots were recorded elsewhere.

# %%
sections.show_machine(perfkit.environment_report())
