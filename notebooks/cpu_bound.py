# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Is the step CPU-bound?
# Splits each profiler step into GPU busy time and what the host did (DataLoader, torch.compile
# compiling, blocking syncs, other host work), then names what limits it. Where the trace has GPU work linked
# to its launches, every fix perfkit knows is applied to each step's dependency graph and the step replayed
# (`perfkit whatif`): the fix that saves most (5% of a step or more) decides the verdict, and the card says
# the step it buys. Otherwise (no GPU events, nothing to replay, no fix saving 5%) the share rules decide, in
# this order (`rules.decide`): **GPU activity not recorded** (kernel launches but no GPU events), **warm-up**
# (first calls hold the window), **compiling** (compile spans are the largest share of the step),
# **GPU-bound** (GPU busy >= 80%; **communication-bound** when collectives not under compute hold half of
# that), **input-bound** (DataLoader), **CPU-only trace** (no GPU events and no launches),
# **communication-bound** (collectives not under compute outweigh every host cause), **GPU-bound (host
# ahead)** (kernels start long after their launch: the GPU has queued work), then the largest of
# **sync-bound** (host blocked in syncs), **launch-bound** (many launches per step: the host issuing them
# is the cost) and **host-compute-bound** (CPU ops or Python doing work that launches nothing).
# Every threshold and its source: `perfkit/analysis/step/rules.py` and `whatif.py`; the replay:
# docs/whatif.md.

# %% tags=["parameters"]
mode = "trace"  # "trace": analyze trace_path; "live": record a reference workload now
# The default: an H200 step that waits on a DataLoader with num_workers=0; gpu/dataloader_workers4 is the fix.
trace_path = "gpu/dataloader_workers0.pt.trace.json.gz"  # a trace file or per-rank folder; shipped traces by name
workload = "mppi"  # live mode: mppi, ppo, replay or leaky
variant = "float_tensor"  # live mode: a variant of the workload (see its variants())
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
steps = 3  # live mode: profiled steps
warmup = 1  # live mode: profiler warm-up steps
overrides = {}  # live mode: workload config fields, e.g. {"samples": 256}
top = 15  # rows in op tables and bars in breakdowns
interactive = False  # True in JupyterLab: show the trace explorer widget
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import cpu_bound, plots, prose, rows, sections
from perfkit.report.card import verdict_card
from perfkit.results import html_table
from perfkit.bench import live

source = live.load_source(mode, trace_path, workload=workload, variant=variant, device=device, steps=steps,
                            warmup=warmup, overrides=overrides)
trace = source.trace
result = perfkit.cpu_bound(trace)
diagnosis = perfkit.diagnose(trace)
logged = rows.log_rows(perf_log_path, cpu_bound.cpu_bound_rows(result, source.subject, source.device), change=change,
                       run_id=run_label)
verdict_card("cpu_bound", result, logged, subject=source.subject, device=source.device, verdict=diagnosis.verdict,
             fix=diagnosis.fix, prediction=diagnosis.prediction)

# %% [markdown]
# ## Where each step's time went
# Per step: host time (DataLoader, compiling, syncs, other host work) beside GPU busy time, against
# wall time. A trace without GPU events gets host bars only.

# %%
display(HTML(prose.prose(cpu_bound.cpu_bound_text(result))))
display(plots.step_breakdown(result))
display(HTML(html_table(cpu_bound.cpu_bound_steps(result))))

# %% [markdown]
# ## What the verdict rests on
# Each cause as a share of the step against the threshold of its rule, then what the verdict calls
# for: compile time and compiled regions for a torch.compile trace, the launch-to-kernel delay
# against the step when the host runs ahead.

# %%
cpu_bound.show_verdict_evidence(result)

# %% [markdown]
# ## What each fix buys
# Every fix perfkit knows, applied to each step's dependency graph and replayed (`perfkit whatif`): the step it
# predicts, what it saves, and what the transform assumed. The fix that saves most decides the verdict.

# %%
cpu_bound.show_whatif(perfkit.whatif(trace))

# %% [markdown]
# ## Findings
# Most severe first, each with its evidence, the fix and the threshold that fired.

# %%
sections.show_findings(result, *trace.warnings)

# %% [markdown]
# ## Next: which code, what bounds the step, why the GPU idles
# This notebook says *whether* the host is the problem. The step anatomy notebook
# (`notebooks/step_anatomy.py`; its report is [step_anatomy.html](step_anatomy.html) in the same run's
# folder) explains the step in milliseconds on the same trace: the Python functions that burn the
# host time (icicle chart), the critical path of each step, the cause and code behind every GPU gap,
# and the time ranges to open in Perfetto. Run it alone with
# `perfkit run step_anatomy -p trace_path <this trace>`.

# %% [markdown]
# ## Timeline of the first step
# Host ops on thread lanes, kernels and copies on stream lanes: GPU gaps while the host is busy
# are the launch-bound signature.

# %%
display(plots.step_timeline(trace))

# %% [markdown]
# ## Host ops by self time
# Time in the op itself, children excluded.

# %%
display(plots.breakdown(result.top_ops(top), value="self_us", top=top, title="Top host ops by self time"))
display(HTML(html_table(result.top_ops(top))))

# %% [markdown]
# ## `record_function` ranges
# The ranges the code marks (`torch.profiler.record_function`, ProfilerStep excluded): count and
# time in us, per step too; none when the code marks none.

# %%
display(HTML(html_table(result.annotations, empty="No record_function ranges in this trace.")))

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
sections.show_log(logged, perf_log_path, "cpu_bound", source.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Not necessarily the machine that recorded the trace (see "The trace" above).

# %%
sections.show_machine(perfkit.environment_report())
