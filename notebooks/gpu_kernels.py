# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # What the GPU does with its time: kernels, Tensor Cores, FLOP/s against the device's peak
# When the GPU is busy, which kernels take its time, whether its GEMMs run on Tensor Cores and in which
# dtype, how close each op class gets to the device's peak (a roofline), and what to change. FLOPs and
# bytes need traces recorded with `record_shapes=True`; without shapes the kernel table still shows.
# Models: `perfkit/analysis/gpu_kernels/` (peaks: `devices.py`, each figure with its datasheet).

# %% tags=["parameters"]
# The default: a bf16 transformer block training on an H200; gpu/transformer_fp32 runs its GEMMs off the Tensor Cores.
trace_path = "gpu/transformer_bf16.pt.trace.json.gz"  # a trace file or per-rank folder; shipped traces by name
device = "auto"  # GPU whose peaks to use (e.g. "H100-SXM", "A100-80GB", "MI300X"); "auto": the trace's own
top = 15  # rows in the kernel and op tables
interactive = False  # True in JupyterLab: show the trace explorer widget
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import gpu_kernels, plots, rows, sections
from perfkit.report.card import verdict_card
from perfkit.report.gpu_kernels import kernel_rows
from perfkit.results import html_table, html_text
from perfkit.bench import live

source = live.load_source("trace", trace_path)
# "auto" (and the live notebooks' "cpu"/"cuda", which name no GPU model) use the trace's deviceProperties.
result = perfkit.kernels(source.trace, device=None if device in ("auto", "cpu", "cuda", "") else device)
logged = rows.log_rows(perf_log_path, kernel_rows(result, source.subject, source.device), change=change,
                       run_id=run_label)
verdict_card("gpu_kernels", result, logged, subject=source.subject, device=source.device,
             verdict=gpu_kernels.kernel_verdict(result),
             prediction=gpu_kernels.finding_prediction(result, perfkit.whatif(source.trace),
                                                       perfkit.diagnose(source.trace).prediction))

# %% [markdown]
# ## Where the GPU time goes, by kernel
# The kernels with the most GPU time: class, calls, time, share of GPU busy time (the union of kernels,
# copies and memsets per device), whether the name says it runs on Tensor Cores (cuBLAS `xmma`/`nvjet`,
# CUTLASS `tensorop`/`gmma`, AMD `MFMA`: yes; FP32 `sgemm`: no; "?" when the name does not say) and its
# dtype (from the name, else from the launching op's input types).

# %%
display(HTML(f"<p>{html_text(gpu_kernels.device_line(result))}</p>"))
if result.has_gpu:
    display(HTML(html_table(gpu_kernels.totals_table(result))))
    display(HTML(html_table(gpu_kernels.kernel_table(result, top), max_rows=top)))
    display(HTML(html_table(gpu_kernels.gemm_dtype_table(result))))
else:
    display(HTML("<p>No GPU kernels in this trace: nothing ran on a GPU while it was profiled (or the profiler "
                 "recorded only CPU activity).</p>"))

# %% [markdown]
# ## Per op: FLOPs, achieved TFLOP/s, % of peak, bound
# One row per (op, class, dtype) with its launched kernels' time (by correlation id): FLOPs and bytes
# from the op's input dims (GEMM 2·M·N·K, convolution, attention; bytes for elementwise, reductions
# and norms), achieved TFLOP/s and GB/s, % of the device's peak for that dtype on the unit it ran on
# (matrix: Tensor Cores; vector: CUDA cores), and whether its FLOP/byte puts it under the memory roof
# (memory-bound) or the compute roof. "-": no shapes recorded or no model for the op.

# %%
if result.has_gpu:
    display(HTML(html_table(gpu_kernels.op_table(result, top), max_rows=top)))

# %% [markdown]
# ## Roofline
# Achieved TFLOP/s against arithmetic intensity (FLOP per byte moved), one point per op class (area:
# its kernel time), under the device's memory roof, matrix roof(s) for the dtypes its ops use and the
# fp32 vector roof. A point far under its roof has room to gain; left of the ridge it is memory-bound.

# %%
display(plots.roofline(result))

# %% [markdown]
# ## Findings
# Most severe first, with the fix: FP32 GEMMs on CUDA cores of a GPU with TF32/BF16 Tensor Cores, GEMMs
# far below peak on shapes that are not multiples of 8, memory-bound elementwise chains to fuse,
# attention not on a fused kernel.

# %%
sections.show_findings(result)

# %% [markdown]
# ## The trace
# Where it was recorded (from the trace itself) and its whole-file counts (times in us).

# %%
sections.show_trace(source.trace)

# %%
sections.show_explorer(interactive, trace_path)

# %% [markdown]
# ## Performance log
# This run's rows (GEMM TFLOP/s, Tensor Core share of GEMM time, MFU), each against the previous run
# of this investigation on the same subject and device.

# %%
sections.show_log(logged, perf_log_path, "gpu_kernels", source.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Not necessarily the machine that recorded the trace (see "The trace" above).

# %%
sections.show_machine(perfkit.environment_report())
