# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Mixed precision: faster, and still correct?
# Live mode trains the same small MLP in fp32 and under `torch.autocast` from one seed on the
# same batches: step-time A/B with a CI, loss-curve divergence, activation memory. Trace mode
# diffs two recorded traces (e.g. an fp32 and an AMP run of your job).

# %% tags=["parameters"]
mode = "live"  # "trace": diff trace_path against trace_path_b; "live": run the AMP A/B now
trace_path = "gpu/transformer_fp32.pt.trace.json.gz"  # trace mode: before (H200, fp32)
trace_path_b = "gpu/transformer_bf16.pt.trace.json.gz"  # trace mode: after (bf16)
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
dtype = "bfloat16"  # live mode: autocast dtype ("bfloat16"; "float16" needs CUDA)
optimizer = "adam"  # live mode: adam, adamw or sgd
batch = 64  # live mode: model sizes
features = 32
hidden = 128
layers = 2
train_steps = 10  # live mode: steps of each loss curve
ab_repeats = 20  # live mode: interleaved A/B rounds
interactive = False  # True in JupyterLab: show the trace explorer widget (trace mode)
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import amp_regression, gpu_kernels, plots, prose, sections, step_anatomy, tables, trace_diff
from perfkit.report.card import verdict_card
from perfkit.notebook_setup import open_ab
from perfkit.results import html_table
from perfkit.workloads.mlp import mlp_problem


def run_live():
    problem = mlp_problem(batch=batch, features=features, hidden=hidden, layers=layers)
    ab = perfkit.amp_ab(problem.make_model, problem.make_batch, problem.loss_fn, steps=train_steps,
                        device=device, dtype=dtype, optimizer=optimizer, repeats=ab_repeats)
    return ab, f"mlp b{batch} f{features} h{hidden} l{layers} {dtype} {optimizer} steps={train_steps}x{ab_repeats}"


case = open_ab("amp_regression", mode, (trace_path, trace_path_b), run_live, rows_of=amp_regression.amp_rows,
               what=f"autocast ({dtype})", perf_log_path=perf_log_path, change=change, run_label=run_label)
result, ab, pairing = case.result, case.ab, case.pairing
verdict_card("amp_regression", result, case.logged, subject=case.subject, device=case.device, verdict=case.verdict,
             fix=case.fix)

# %% [markdown]
# ## AMP A/B (live mode)
# fp32 (A) against autocast (B): step-time samples and ratio CI, then the two loss curves.

# %%
if ab is not None:
    display(HTML(prose.prose(amp_regression.amp_text(ab))))
    display(plots.ab_distribution(ab.timing))
    display(plots.loss_curves(ab))
    display(HTML(html_table(tables.ab_summary_table(ab))))

# %% [markdown]
# ## Trace diff (trace mode)
# The before (`trace_path`) and after (`trace_path_b`) traces compared per full step
# (`perfkit.diff`; partial steps at the profiler window's edges are dropped): the biggest movers,
# headline metrics, host waits on the GPU by kind, `record_function` ranges, both summaries and
# where the after trace was recorded.

# %%
trace_diff.show_diff(pairing)

# %% [markdown]
# ## GEMMs in each arm: dtype and Tensor Cores (trace mode)
# `perfkit.kernels` on each trace: the share of GEMM time on Tensor Cores and the GEMM time per dtype.
# An fp32 arm whose GEMMs run `sgemm` on CUDA cores (Tensor Cores "no") is what AMP, or TF32
# (`torch.set_float32_matmul_precision("high")`), moves onto Tensor Cores in the other arm.

# %%
if pairing is not None:
    arms = {"before": perfkit.kernels(pairing.before.trace), "after": perfkit.kernels(pairing.after.trace)}
    display(HTML(html_table(gpu_kernels.arms_summary(arms))))
    display(HTML(step_anatomy.table_or_note(gpu_kernels.arms_gemm_dtypes(arms), "Neither trace has GEMM kernels.")))

# %% [markdown]
# ## Findings
# Regressions and problems first, most severe first, with recommended fixes; then improvements
# and notes (severity info: a trace diff reports what got faster too, and a host wait that only
# moved between kinds); then warnings (a trace diff's dropped partial steps among them).

# %%
sections.show_findings(result, info="Improvements and notes (severity info)")

# %%
sections.show_explorer(interactive and mode == "trace", trace_path_b)

# %% [markdown]
# ## Performance log
# This run's rows, each against the previous run of this investigation on the same subject and device.

# %%
sections.show_log(case.logged, perf_log_path, "amp_regression", case.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Live figures were measured here; traces were recorded wherever "The traces" says.

# %%
sections.show_machine(perfkit.environment_report())
