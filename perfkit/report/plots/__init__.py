"""Figures for the investigation notebooks and reports: each function takes a result (or a
``Trace``) and returns a ``matplotlib.figure.Figure``.

Figures are built with ``Figure`` + the Agg canvas, never through ``pyplot``: nothing is
registered globally, so batch runs do not accumulate open figures and the caller's backend
is untouched. In a notebook, ``%matplotlib inline`` then ``display(fig)`` shows them.
Functions only lay out numbers that a tested perfkit function computed; GPU-only figures
draw a "no GPU: <reason>" panel instead of failing. Names from traces are drawn as literal
text (a ``$`` does not start mathtext).

One module per investigation, all re-exported here: ``steps`` (step timeline, table bars, the
cpu_bound step split, the step each fix buys), ``htod`` (host-device copies), ``ab`` (compile_ab, amp_regression, trace diffs),
``memory`` (memory_leak, system monitor, CUDA memory snapshots, a trace's memory timeline), ``runs`` (perf
log trend, workload steps), ``anatomy`` (step_anatomy: icicle chart, critical path, GPU busy/idle),
``gpu_kernels`` (the roofline), ``ranks`` (ranks)
and ``cases`` (the case studies: planning memory, a ladder of fixes);
``figure`` holds what they share (canvas, labels, message figures, PNG bytes).
"""
from __future__ import annotations

# The figures, plus (outside __all__, importable from here as before) the shared helpers
# new_figure and label and the timeline's category colours.
from .ab import ab_distribution, diff_breakdown, loss_curves
from .anatomy import critical_path_bars, gpu_time_bars, icicle
from .cases import fix_ladder, samples_horizon_memory
from .figure import figure_png, label, message_figure, new_figure, no_gpu_figure
from .gpu_kernels import roofline
from .htod import copy_bandwidth, copy_kinds
from .memory import memory_growth, memory_over_time, monitor_timeline, snapshot_history, snapshot_series
from .ranks import arrival_skew, own_step_heatmap, own_vs_wait
from .runs import perf_log_trend, workload_steps
from .steps import (COLORS, DEVICE_CATEGORIES, HOST_CATEGORIES, breakdown, fix_steps, queue_delay, step_breakdown,
                    step_timeline)

__all__ = [
    "step_timeline", "breakdown", "step_breakdown", "queue_delay", "fix_steps", "copy_bandwidth", "copy_kinds", "ab_distribution",
    "loss_curves", "diff_breakdown", "memory_growth", "memory_over_time", "monitor_timeline", "snapshot_history",
    "snapshot_series",
    "perf_log_trend", "workload_steps",
    "message_figure", "no_gpu_figure", "figure_png", "icicle", "critical_path_bars", "gpu_time_bars", "own_vs_wait",
    "own_step_heatmap", "arrival_skew", "samples_horizon_memory", "fix_ladder", "roofline",
]
