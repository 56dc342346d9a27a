# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Ranks: stragglers, waiting for peers, collective arrival
# Compares the ranks of a multi-rank run, one trace per rank: each rank's own work against the time
# its collectives waited for the others, which rank is the straggler in which steps and why, and how
# far apart the ranks reach each collective. The default input is a small synthetic 4-rank job
# shipped with perfkit (`data/traces/README.md`: rank 2's DataLoader is 2 ms slower); point
# `trace_path` at your `tensorboard_trace_handler` folder. Rules: `perfkit/analysis/ranks/stragglers.py`.

# %% tags=["parameters"]
trace_path = "ddp4_slow_dataloader"  # a folder of per-rank traces, a glob ("run/*.pt.trace.json.gz"), a shipped set
engine = "local"  # "local" (process pool on this machine) or "dask" (a dask.distributed cluster)
scheduler = ""  # dask: the scheduler address (tcp://host:8786); empty: $DASK_SCHEDULER_ADDRESS
workers = None  # local: processes (None: one per core; 1: in this process)
straggler_pct = 0.10  # a straggler's own step time exceeds the median rank's by this fraction (and the noise)
use_cache = True  # read and write the columnar trace cache
top = 20  # rows in the collective table
perf_log_path = ""  # empty: reports/perf_log.csv of the workbook
change = ""  # what changed since the last run (goes into the perf log)
run_label = ""  # set by perfkit run

# %%
# %matplotlib inline
from IPython.display import HTML, display

import perfkit
from perfkit.report import plots, prose, ranks, rows, sections
from perfkit.report.card import verdict_card
from perfkit.results import html_table
from perfkit import workbook

files = workbook.find_rank_traces(trace_path)
result = perfkit.ranks(list(files.paths), engine=engine, scheduler=scheduler or None, workers=workers,
                       straggler_pct=straggler_pct, use_cache=use_cache)
logged = rows.log_rows(perf_log_path, ranks.ranks_rows(result, files.subject), change=change, run_id=run_label)
verdict_card("ranks", result, logged, subject=files.subject, device=ranks.ranks_recorded_on(result))

# %% [markdown]
# ## Each rank's step
# Per rank, mean per step: its own work (the step less the time its collectives waited for a peer)
# and the waiting. In a synchronous job every rank's step is as long as the slowest's, so the ranks
# that wait have the longest raw steps: the straggler is the rank with the most *own* work.

# %%
display(HTML(prose.prose(ranks.ranks_text(result))))
display(plots.own_vs_wait(result))
display(HTML(html_table(ranks.per_rank_table(result.ranks), max_rows=64)))

# %% [markdown]
# ## Every rank and step
# Own step time as % over (red) or under (blue) the median rank's in the same step; framed cells
# are straggling (rank, step) pairs. A rank red in every step is a persistent straggler, a single
# red cell a noisy step.

# %%
display(plots.own_step_heatmap(result))
display(HTML(html_table(ranks.rank_files_table(result.steps).drop(columns=["start_us"]), max_rows=64)))

# %% [markdown]
# ## Arrival at each collective
# Collectives are matched across ranks by step, kernel name and order; the skew is the last rank's
# kernel start minus the first's: the time the first rank waited. The rank that is last most often
# is the one the others wait for.

# %%
display(plots.arrival_skew(result))
display(HTML(html_table(ranks.rank_files_table(result.collectives.sort_values("skew_us", ascending=False).head(top)),
                        empty="No collective kernel in these traces: there is no arrival to match across ranks.")))

# %% [markdown]
# ## Bandwidth of each collective
# Bytes as nccl-tests count them (the buffer for all-reduce, the full output for all-gather, the full
# input for reduce-scatter), from the sizes PyTorch records on each collective; bus bandwidth is bytes
# over the transfer (from the last rank's arrival to the end) times nccl-tests' factor (all-reduce
# 2(n-1)/n, all-gather and reduce-scatter (n-1)/n), comparable with the link's own figure. With one
# rank's trace the kernel's whole time is used, so the figure is a floor.

# %%
display(HTML(ranks.bandwidth_html(result, top)))

# %% [markdown]
# ## Stragglers
# A rank straggles in a step when its own step time is at least `straggler_pct` over the median
# rank's and more than twice the step-to-step noise; its cause is the part of its step (DataLoader,
# host ops, syncs, GPU compute, collective time beyond waiting) that exceeds the median rank's most.
# First per rank, then per step.

# %%
display(HTML(html_table(ranks.rank_files_table(result.straggling_ranks),
                        empty=f"No rank straggles: none is {straggler_pct:.0%} over the median rank and above the noise.")))
display(HTML(html_table(ranks.rank_files_table(result.stragglers), max_rows=64, empty="No straggling (rank, step) pair.")))

# %% [markdown]
# ## Findings
# Most severe first, each with its evidence, the fix and the threshold that fired.

# %%
sections.show_findings(result)

# %% [markdown]
# ## Performance log
# This run's rows, each against the previous run of this investigation on the same traces and device.

# %%
sections.show_log(logged, perf_log_path, "ranks", files.subject)

# %% [markdown]
# ## Machine that ran this notebook
# Not the machines that recorded the traces (see the device column of the per-rank table).

# %%
sections.show_machine(perfkit.environment_report())
