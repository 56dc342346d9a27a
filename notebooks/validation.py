# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Does perfkit see what this machine does?
# Runs the reference workloads, each pathology and its fix, through the harness or detector that
# must tell them apart, and checks each figure against what the workload must show
# (`perfkit.validate`). Rows needing a GPU this machine lacks say "skipped" and why.

# %% tags=["parameters"]
device = "auto"  # "auto" (CUDA when present, else CPU), "cpu" or "cuda"
preset = "auto"  # "auto" (full on CUDA, quick on CPU), "full" or "quick"
only = None  # a list of check names to run, or None for all
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import prose, rows, sections, validation
from perfkit.report.card import verdict_card
from perfkit.results import html_table

report = perfkit.validate(device, preset=preset, only=only)
logged = rows.log_rows(perf_log_path, validation.validation_rows(report), change=change, run_id=run_label)
failed = ", ".join(c.name for c in report.failed)
verdict_card("validation", report, logged, subject=f"validate preset={report.preset}",
             device=report.environment["gpu"], verdict=f"{len(report.checks)} checks: {report.counts_text()}",
             fix=f"investigate the failed checks: {failed}" if failed else "")

# %% [markdown]
# ## Checks
# One row per check: status, what perfkit measured, what the workload must show, the claim; then
# the call that produced each figure.

# %%
display(HTML(prose.prose(validation.validation_text(report))))
display(HTML(html_table(report.to_frame()[["check", "status", "measured", "expected", "claim"]], max_rows=50)))
display(HTML(html_table(report.to_frame()[["check", "command"]], max_rows=50)))

# %% [markdown]
# ## Performance log
# A check that stops passing is flagged "regressed" against the previous run.

# %%
sections.show_log(logged, perf_log_path, "validation", f"validate preset={report.preset}")

# %% [markdown]
# ## Machine that ran this notebook

# %%
sections.show_machine(perfkit.environment_report())
