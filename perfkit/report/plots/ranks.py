"""Figures of the ranks investigation (a ``perfkit.ranks`` result): each rank's own step time
against the time it waited for peers, own step time per rank and step as a heatmap against the
median rank, and the arrival skew of each collective."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .figure import label, message_figure, new_figure

OWN_COLOR, WAIT_COLOR, STRAGGLER_COLOR = "#4c72b0", "#c8c8c8", "#c44e52"
MAX_COLLECTIVES = 40  # bars in the skew figure: the largest skews when there are more
ANNOTATE_CELLS = 160  # heatmap cells that still fit a number each


def rank_names(result) -> pd.Series:
    """"rank N" per rank file of ``result.ranks`` (with the file name when two files claim a rank)."""
    table = result.ranks
    shared = table["rank"].duplicated(keep=False)
    names = [f"rank {r}" + (f" ({label(f.rsplit('/', 1)[-1], 24)})" if dup else "")
             for r, f, dup in zip(table["rank"], table["file"], shared)]
    return pd.Series(names, index=table["file"].to_numpy())


def own_vs_wait(result, *, title: str = "Each rank's step: its own work and the time it waited for peers"):
    """Per rank file: mean own step time (step minus collective waits) and mean wait for peers per
    step (ms, stacked to the mean step), the median rank's own time as a dashed line; straggling
    ranks in red."""
    table = result.ranks
    if table.empty:
        return message_figure(title, "no profiler steps in these traces")
    per = table["steps"].clip(lower=1).to_numpy(dtype=float)
    wait = table["wait_us"].to_numpy(dtype=float) / per / 1e3
    own = table["wall_us"].to_numpy(dtype=float) / per / 1e3 - wait
    late = set(result.straggling_ranks["file"])
    colors = [STRAGGLER_COLOR if f in late else OWN_COLOR for f in table["file"]]
    fig = new_figure(9.0, 1.6 + 0.32 * len(table))
    ax = fig.add_subplot()
    y = np.arange(len(table))
    ax.barh(y, own, 0.7, color=colors, label="own work")
    ax.barh(y, wait, 0.7, left=own, color=WAIT_COLOR, label="waiting for peers")
    ax.axvline(float(np.median(own)), color="#222222", linestyle="--", linewidth=1, label="median rank's own work")
    names = rank_names(result)
    ax.set_yticks(y, [names[f] + (" (straggler)" if f in late else "") for f in table["file"]], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (mean over profiled steps)")
    ax.set_title(label(title, 120), fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if late:
        from matplotlib.patches import Patch

        at = labels.index("own work") + 1
        handles.insert(at, Patch(color=STRAGGLER_COLOR))
        labels.insert(at, "straggler's own work")
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def own_step_heatmap(result, *, title: str = "Own step time vs the median rank, per rank and step"):
    """Rank files x steps: own step time as % over (red) or under (blue) the median rank's in that
    step; straggling (rank, step) cells framed. Numbers in the cells while they fit."""
    steps = result.steps
    if steps.empty:
        return message_figure(title, "no profiler steps in these traces")
    median = steps.groupby("step")["own_us"].transform("median")
    pct = steps.assign(pct=100.0 * (steps["own_us"] - median) / median.where(median > 0))
    grid = pct.pivot_table(index="file", columns="step", values="pct", sort=False).reindex(result.ranks["file"])
    limit = max(10.0, float(np.nanmax(np.abs(grid.to_numpy()))) if np.isfinite(grid.to_numpy()).any() else 10.0)
    fig = new_figure(min(4.0 + 0.45 * grid.shape[1], 12.0), 1.8 + 0.3 * grid.shape[0])
    ax = fig.add_subplot()
    image = ax.imshow(grid.to_numpy(dtype=float), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    _frame_stragglers(ax, grid, result.stragglers)
    if grid.size <= ANNOTATE_CELLS:
        for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
            if np.isfinite(v):
                ax.text(j, i, f"{round(v):+d}" if round(v) else "0", ha="center", va="center", fontsize=7,
                        color="white" if abs(v) > 0.6 * limit else "#222222")
    names = rank_names(result)
    ax.set_yticks(range(grid.shape[0]), [names[f] for f in grid.index], fontsize=7)
    ax.set_xticks(range(grid.shape[1]), [str(s) for s in grid.columns], fontsize=7)
    ax.set_xlabel("profiler step")
    ax.set_title(label(title, 120), fontsize=10)
    fig.colorbar(image, ax=ax, label="% vs median rank (own time)", fraction=0.05, pad=0.02)
    fig.tight_layout()
    return fig


def _frame_stragglers(ax, grid: pd.DataFrame, stragglers: pd.DataFrame) -> None:
    from matplotlib.patches import Rectangle

    rows = {f: i for i, f in enumerate(grid.index)}
    cols = {s: j for j, s in enumerate(grid.columns)}
    for f, s in zip(stragglers["file"], stragglers["step"]):
        if f in rows and s in cols:
            ax.add_patch(Rectangle((cols[s] - 0.5, rows[f] - 0.5), 1, 1, fill=False, edgecolor="#111111", linewidth=1.6))


def arrival_skew(result, *, title: str = "Arrival skew of each collective: last rank's start minus the first's"):
    """One bar per matched collective (step, kernel, occurrence) in step order: the skew of the
    ranks' arrival (ms), coloured by the rank that arrived last. With more than
    ``MAX_COLLECTIVES``, the largest skews."""
    coll = result.collectives
    if coll.empty:
        return message_figure(title, "no NCCL/RCCL collectives matched across ranks: arrival skew is unknown")
    shown = coll if len(coll) <= MAX_COLLECTIVES else coll.nlargest(MAX_COLLECTIVES, "skew_us").sort_index()
    names = [f"step {s}: {label(_short(n), 28)} #{o}" for s, n, o in zip(shown["step"], shown["name"], shown["occurrence"])]
    last = shown["last_rank"].astype(int).to_numpy()
    palette = {r: f"C{i % 10}" for i, r in enumerate(sorted(set(last)))}
    fig = new_figure(9.0, 1.5 + 0.28 * len(shown))
    ax = fig.add_subplot()
    y = np.arange(len(shown))
    ax.barh(y, shown["skew_us"].to_numpy(dtype=float) / 1e3, 0.7, color=[palette[r] for r in last])
    from matplotlib.patches import Patch

    ax.legend([Patch(color=c) for c in palette.values()], [f"rank {r} last" for r in palette], fontsize=7,
              loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("arrival skew (ms): how long the first rank waited for the last")
    heading = title if len(shown) == len(coll) else f"{title} ({len(shown)} largest of {len(coll)})"
    ax.set_title(label(heading, 120), fontsize=10)
    fig.tight_layout()
    return fig


def _short(kernel: str) -> str:
    """``ncclKernel_AllReduce_RING_LL_Sum_float(...)`` -> ``AllReduce_RING_LL``: the collective and algorithm."""
    name = kernel.split("(", 1)[0]
    for prefix in ("ncclKernel_", "ncclDevKernel_", "rcclKernel_"):
        name = name.removeprefix(prefix)
    return "_".join(name.split("_")[:3])
