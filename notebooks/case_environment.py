# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Case study 5: an optimization guide's environment report
# **The write-up.** A guide to making training fast started from the machine, not the model: an
# environment report (versions, devices, threads, settings), defaults chosen for the hardware
# (dtype, DataLoader workers, pinned memory, compile mode), a small benchmark suite run on the CPU
# and on the GPU, and memory and system monitors beside every run.
#
# **Here** perfkit's versions of each: `perfkit.environment_report()`, `perfkit.hardware_defaults()`,
# `perfkit.op_suite()` (matmul, conv2d, elementwise add, a reduction and a copy, each timed with a
# CI and compared across devices when there are two, across dtypes, and across intra-op thread
# counts) and `perfkit.SystemMonitor` (CPU, RSS, and per-GPU utilization and memory through NVML)
# around the suite. `mode="trace"` also reads where a trace was recorded (`trace_path`, from its
# own metadata), beside this machine; `mode="live"` measures this machine only.

# %% tags=["parameters"]
mode = "trace"  # "trace": also show where trace_path was recorded; "live": this machine only
trace_path = "cpu/mppi_from_numpy.json.gz"  # trace mode: a trace whose recording machine to show
device = "auto"  # hardware defaults: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
preset = "quick"  # op suite sizes: "quick" (~1 ms per op on one CPU core) or "full" (GPU-sized)
ops = ["matmul", "conv2d", "add", "sum", "copy"]  # op suite: which ops
dtypes = ["float32", "bfloat16"]  # op suite: dtypes compared against float32
suite_threads = None  # op suite: CPU intra-op thread counts to compare (None: 1 and the current count)
monitor_interval_s = 0.1  # system monitor: seconds between samples
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import caserows, guide, plots, prose, rows, sections, tables
from perfkit.report.card import verdict_card
from perfkit.report.casestudy import WriteupFigure, closing_table, gpu_only
from perfkit.results import findings_frame, html_table, html_warnings
from perfkit.workbook import check_mode, trace_source

NAME = "case_environment"
check_mode(mode)
env = perfkit.environment_report()
with perfkit.SystemMonitor(monitor_interval_s) as monitor:
    suite = perfkit.op_suite(preset=preset, ops=ops, dtypes=dtypes, threads=suite_threads, environment=env)
usage = monitor.result()
subject = f"op_suite {suite.preset}"
logged = rows.log_rows(perf_log_path, caserows.opsuite_rows(NAME, suite, subject=subject), change=change,
                       run_id=run_label)
verdict_card(NAME, suite, logged, subject=subject, device=env.devices[0]["name"] if env.devices else "cpu",
             verdict=guide.opsuite_verdict(suite))

# %% [markdown]
# ## 1. Symptom: the same code, a different machine, a different speed
# Threads, dtypes, pinned memory and compile modes that suit one machine can be wrong on another.
# Before tuning the model, write down the machine.

# %% [markdown]
# ## 2. Measurement: the environment report
# Versions (Python, torch, CUDA, cuDNN, driver), devices, CPU cores (and how many this process may
# use), memory, performance-relevant settings and environment variables, with findings on each.

# %%
display(HTML(html_table(tables.machine_table(env), max_rows=60)))
display(HTML(html_table(findings_frame(env.findings))))
if mode == "trace":
    recorded = trace_source(trace_path)
    display(HTML(prose.prose(f"{recorded.subject} was recorded on {recorded.device}:")
                 + html_table(tables.recorded_on_table(recorded.trace))))

# %% [markdown]
# ## 3. Diagnosis: the op suite
# Each op is built once per setting and timed interleaved against the other setting of its
# comparison (`perfkit.compare`): a CI on the speed-up and a verdict that never defaults to
# "faster". Throughput is GFLOP/s for matmul and conv2d, GB/s (read + written) for the others.

# %%
display(HTML(html_table(suite.to_frame(), max_rows=60)))
display(HTML(html_table(suite.comparisons_frame(), max_rows=60)))
display(HTML(html_table(findings_frame(suite.findings))))

# %% [markdown]
# ## 4. The fix: defaults for this hardware
# `perfkit.hardware_defaults(device)` turns the report into settings, each with its reason.

# %%
defaults = perfkit.hardware_defaults(device)
display(HTML(html_table(defaults.to_frame())))

# %% [markdown]
# ## 5. A/B with a confidence interval
# The comparisons behind the defaults, each an interleaved A/B: the dtype (does bf16 pay off on
# this device?), the thread count (do more threads help, or is the machine shared?) and, with a
# GPU, the device (the comparisons table above holds each one with its CI). Below, every sample
# of the first comparison.

# %%
for c in suite.comparisons[:1]:
    display(plots.ab_distribution(c.ab, title=f"{c.op}: {c.b.label} vs {c.a.label}, {prose.ab_word(c.ab)}"))
display(HTML(html_warnings(suite.warnings)))

# %% [markdown]
# ## 6. Memory and system monitors
# `perfkit.SystemMonitor` sampled the process and the machine while the suite ran: CPU use (a
# process can exceed 100% on several cores), resident memory, and each GPU's utilization,
# memory, power and clocks through NVML (without a GPU it says why).

# %%
display(plots.monitor_timeline(usage, title="While the op suite ran"))
display(HTML(html_table(tables.monitor_table(usage))))

# %% [markdown]
# ## 7. Performance log
# Each comparison's speed-up and each op's throughput per setting, with their CIs, against the
# previous run on this machine.

# %%
sections.show_log(logged, perf_log_path, NAME, subject)

# %% [markdown]
# ## The write-up's figures and ours

# %%
stats = usage.summary().set_index("metric")
display(HTML(html_table(closing_table([
    WriteupFigure("hardware-aware defaults", "dtype, workers, pinned memory, compile", defaults.num_workers,
                  "DataLoader workers", f"{defaults.device}: dtype {defaults.dtype}, pin_memory {defaults.pin_memory}, "
                  f"compile {defaults.compile_mode}; {defaults.reasons['num_workers']}"),
    guide.throughput_figure(suite, "matmul", "cpu", "float32", "CPU benchmark: matmul", "measured",
                            f"{suite.preset} preset on {env.cpu_model}"),
    guide.comparison_figure(suite, "matmul", "device", "GPU benchmark: cuda against cpu", "measured",
                            "the same op interleaved on both devices"),
    guide.comparison_figure(suite, "matmul", "dtype", "bf16 against fp32", "a recommended default",
                            "bf16 pays off only with fast kernels (tensor cores, AMX)"),
    guide.comparison_figure(suite, "matmul", "threads", "more intra-op threads", "a recommended default",
                            "a shared or small machine gains little"),
    WriteupFigure("memory monitor: peak RSS", "monitored", stats.loc["rss_bytes", "max"] / 2**20, "MiB",
                  f"this process while the suite ran, {int(stats.loc['rss_bytes', 'samples'])} samples"),
    WriteupFigure("system monitor: process CPU", "monitored", stats.loc["cpu_process_percent", "mean"], "% (mean)",
                  f"{env.cpu_available} cores available to this process; above 100% is more than one core"),
    WriteupFigure("GPU utilization", "monitored",
                  gpu_only(stats["mean"].get("gpu0_util_percent"), usage.gpu_available, str(usage.gpu_reason)),
                  "% (mean)", "NVML samples of GPU 0 while the suite ran"),
]))))
