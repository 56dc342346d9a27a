# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # torch.compile A/B
# Is `torch.compile` worth it for this model? Live mode times eager and compiled steps interleaved
# (speedup with a CI, compile time, break-even, graph breaks) on a small policy MLP; trace mode
# diffs two recorded traces (e.g. an eager and a compiled run of your job).

# %% tags=["parameters"]
mode = "live"  # "trace": diff trace_path against trace_path_b; "live": run the compile A/B now
trace_path = "gpu/small_mlp_eager.pt.trace.json.gz"  # trace mode: before (H200, eager)
trace_path_b = "gpu/small_mlp_reduce_overhead.pt.trace.json.gz"  # trace mode: after (torch.compile reduce-overhead)
device = "auto"  # live mode: "auto" (CUDA when present, else CPU), "cpu" or "cuda"
backend = "inductor"  # live mode: torch.compile backend ("inductor", "aot_eager", "eager")
compile_mode = "default"  # live mode: torch.compile mode
batch = 64  # live mode: model sizes
features = 32
hidden = 128
layers = 2
ab_steps = 30  # live mode: interleaved A/B rounds
interactive = False  # True in JupyterLab: show the trace explorer widget (trace mode)
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import compile_ab, plots, prose, sections, tables, trace_diff
from perfkit.report.card import verdict_card
from perfkit.notebook_setup import open_ab
from perfkit.results import html_table
from perfkit.workloads.mlp import mlp_problem


def run_live():
    problem = mlp_problem(batch=batch, features=features, hidden=hidden, layers=layers)
    ab = perfkit.compile_ab(problem.make_model(), problem.example_inputs, backend=backend,
                            mode=compile_mode, steps=ab_steps, device=device)
    return ab, f"mlp b{batch} f{features} h{hidden} l{layers} {backend}/{compile_mode} steps={ab_steps}"


case = open_ab("compile_ab", mode, (trace_path, trace_path_b), run_live, rows_of=compile_ab.compile_rows,
               what=f"torch.compile ({backend})", perf_log_path=perf_log_path, change=change, run_label=run_label)
result, ab, pairing = case.result, case.ab, case.pairing
verdict_card("compile_ab", result, case.logged, subject=case.subject, device=case.device, verdict=case.verdict,
             fix=case.fix)

# %% [markdown]
# ## Compile A/B (live mode)
# Eager (A) against compiled (B): every sample, the ratio CI, compile cost and break-even.

# %%
if ab is not None:
    display(HTML(prose.prose(compile_ab.compile_text(ab))))
    display(plots.ab_distribution(ab.timing))
    display(HTML(html_table(tables.ab_summary_table(ab))))
    display(HTML(html_table(ab.to_frame(), empty="No graph break and no recompile: torch.compile captured the "
                                                  "model as one graph and compiled it once")))

# %% [markdown]
# ## Trace diff (trace mode)
# The before (`trace_path`) and after (`trace_path_b`) traces compared per full step
# (`perfkit.diff`; partial steps at the profiler window's edges are dropped): the biggest movers,
# headline metrics, host waits on the GPU by kind, `record_function` ranges, both summaries and
# where the after trace was recorded.

# %%
trace_diff.show_diff(pairing)

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
sections.show_log(case.logged, perf_log_path, "compile_ab", case.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Live figures were measured here; traces were recorded wherever "The traces" says.

# %%
sections.show_machine(perfkit.environment_report())
