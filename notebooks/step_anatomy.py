# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Step anatomy: where each millisecond of the step goes
# One sentence for the mean step (Python hotspot, waiting for the GPU, GPU busy and idle, what bounds
# it), then the evidence: host time by call stack, the critical path of each step, why the GPU sat
# idle, and the time ranges to open in Perfetto. Record traces with `with_stack=True` for Python
# frames. Models: `perfkit/analysis/step/` (`anatomy.py`, `critical_path.py`, `gaps.py`, `hotspots.py`).

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path; "live": record a reference workload now
# The default: a small MLP on an H200 whose GPU idles while the host launches 3 us kernels.
trace_path = "gpu/small_mlp_eager.pt.trace.json.gz"  # a trace file or per-rank folder; shipped traces by name
workload = "mppi"  # live mode: mppi, ppo, replay or leaky
variant = "float_tensor"  # live mode: a variant of the workload (see its variants())
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
steps = 3  # live mode: profiled steps
warmup = 1  # live mode: profiler warm-up steps
overrides = {}  # live mode: workload config fields, e.g. {"samples": 256}
thread = "main"  # host thread(s) of the icicle chart: "main", "all" or a thread id
max_depth = 24  # call levels drawn in the icicle chart (below the frames every stack shares)
top = 10  # rows in the hotspot, gap and critical-path tables
annotated_path = ""  # trace mode: write the annotated trace here (.json.gz) for ui.perfetto.dev; empty: don't
interactive = False  # True in JupyterLab: show the trace explorer widget
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.export.annotate import write_annotated
from perfkit.report import plots, rows, sections, step_anatomy, tables
from perfkit.report.card import verdict_card
from perfkit.results import html_table, html_warnings
from perfkit.bench import live

source = live.load_source(mode, trace_path, workload=workload, variant=variant, device=device, steps=steps,
                            warmup=warmup, overrides=overrides)
trace = source.trace
anatomy = perfkit.step_anatomy(trace)
path = perfkit.critical_path(trace)
gaps = perfkit.gpu_gaps(trace)
spots = perfkit.hotspots(trace, thread=thread)
diagnosis = perfkit.diagnose(trace)  # the card's verdict and prediction; its findings lead the findings table
logged = rows.log_rows(perf_log_path, step_anatomy.step_anatomy_rows(path, gaps, source.subject, source.device),
                       change=change, run_id=run_label)
verdict_card("step_anatomy", gaps, logged, subject=source.subject, device=source.device, verdict=anatomy.sentence,
             fix=anatomy.fix, prediction=diagnosis.prediction)

# %% [markdown]
# ## Where the host time goes
# Icicle chart of the host thread's call stacks over the whole trace: each bar is a function in a
# call path, as wide as its time including what it calls; callees sit below their caller. Orange:
# your code; yellow: library Python (torch, site-packages); purple: `nn.Module` ranges; blue: host
# ops; grey: waiting. The frames every stack starts with are merged into the top bar, and
# `nn.Module`'s call-dispatch frames are left out. The table ranks functions by their own time.

# %%
display(plots.icicle(spots, max_depth=max_depth))
display(HTML(html_table(step_anatomy.hotspot_table(spots, top))))
display(HTML(html_table(tables.in_ms(spots.threads))))

# %% [markdown]
# ## What bounds each step: the critical path
# Per step, the chain of host work, launches, kernels, copies and sync waits that the step's end
# waited for (Holistic Trace Analysis's dependency model), by kind; the tick is the step's wall
# time. Shortening work off the path does not shorten the step. Below: the longest host, sync-wait,
# launch and idle stretches on the path, with the time range to look at.

# %%
display(plots.critical_path_bars(path))
display(HTML(html_table(tables.in_ms(path.to_frame()).drop(columns=["start_us", "end_us"]))))
stretches = step_anatomy.path_stretches(path, trace, top)
display(HTML(step_anatomy.table_or_note(stretches, "No host, sync or idle time on the path.")))

# %% [markdown]
# ## Why the GPU sat idle
# Every interval the compute stream ran nothing, classified by what the launching thread did
# meanwhile, with the function it was busy with: idle time per class and the longest gaps, each with
# its time range.

# %%
display(plots.gpu_time_bars(gaps))
display(HTML(step_anatomy.table_or_note(step_anatomy.gap_classes(gaps), step_anatomy.gap_note(gaps))))
display(HTML(step_anatomy.table_or_note(step_anatomy.top_gaps(gaps, trace, top), "")))

# %% [markdown]
# ## Findings
# The verdict's own findings (those of `perfkit diagnose`, the card's) and the GPU-gap findings, most
# severe first, each with the range to look at, its evidence, the fix and the threshold that fired. A
# gap's class is what the host was doing while the GPU idled: "host_python" includes the framework code
# issuing each kernel, so a launch-bound step's idle time shows there, its launch calls under "launch".

# %%
display(HTML(step_anatomy.table_or_note(step_anatomy.findings_table((*diagnosis.findings, *gaps.findings), trace),
                                  "No GPU-gap findings; the card's fix above names where the step's time goes.")))
display(HTML(html_warnings(tuple(dict.fromkeys(anatomy.warnings + spots.warnings + trace.warnings)))))

# %% [markdown]
# ## Memory over time
# For a trace recorded with `profile_memory=True` (`perfkit profile --memory`): allocated and reserved
# memory per device, the peak and the op that allocated at it, and the growth per step (a leak).

# %%
step_anatomy.show_memory_timeline(trace)

# %% [markdown]
# ## Open it in Perfetto
# `perfkit annotate` writes the trace plus perfkit's tracks (the critical path, the GPU gaps by
# class, an instant per step and per finding, GPU busy % and queue-length counters), to open in
# ui.perfetto.dev or chrome://tracing beside the original timeline.

# %%
display(step_anatomy.annotated_pointer(trace, mode, write_annotated(trace, mode, annotated_path, perf_log_path)))

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
sections.show_log(logged, perf_log_path, "step_anatomy", source.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Not necessarily the machine that recorded the trace (see "The trace" above).

# %%
sections.show_machine(perfkit.environment_report())
