"""Figures of the case studies: planning memory against samples x horizon, and a ladder of fixes."""
from __future__ import annotations

import math

import numpy as np

from .figure import label, message_figure, new_figure


def samples_horizon_memory(result, *, title: str = "Planning memory vs samples x horizon"):
    """Left: measured peak MiB of one planning step against samples, one colour per horizon, with
    the fitted model's lines. Right: the largest sample count that fits the budget per horizon,
    with its range from the slope's CI."""
    points = result.to_frame()
    if points.empty:
        return message_figure(title, "no sizes were measured")
    fig = new_figure(9.5, 3.6)
    left, right = fig.subplots(1, 2)
    for h, rows in points.groupby("horizon"):
        line = left.plot(rows["samples"], rows["peak_bytes"] / 2**20, "o", markersize=4, label=f"horizon {h}")
        grid = np.linspace(0, rows["samples"].max(), 20)
        left.plot(grid, [result.bytes_at(s, h) / 2**20 for s in grid], "-", color=line[0].get_color(), linewidth=1)
    left.set_xlabel("samples")
    left.set_ylabel("peak allocated (MiB)")
    left.legend(fontsize=7)
    left.set_title("measured (dots) and fitted (lines)", fontsize=9)
    limits = result.limits_frame()
    finite = limits[np.isfinite(limits["max_samples"])]
    if len(finite):
        right.errorbar(finite["horizon"], finite["max_samples"], capsize=4, fmt="o-",
                       yerr=[finite["max_samples"] - finite["ci_low"], _upper(finite)])
    right.set_xlabel("horizon")
    right.set_ylabel("largest sample count that fits")
    right.set_title(label(f"budget {result.budget_bytes / 2**30:,.3g} GiB ({result.budget_source})", 70), fontsize=9)
    fig.suptitle(label(title, 100))
    fig.tight_layout()
    return fig


def _upper(limits):
    high = limits["ci_high"].where(np.isfinite(limits["ci_high"]), limits["max_samples"])
    return high - limits["max_samples"]


def fix_ladder(result, *, title: str | None = None):
    """Rate of each rung of a ``speed_ladder`` (bars, 95% CI as error bars), each bar labelled
    with its speedup over the rung before and that comparison's verdict."""
    frame = result.to_frame()
    fig = new_figure(8.0, 1.4 + 0.45 * len(frame))
    ax = fig.add_subplot()
    rate = frame["rate"].to_numpy(dtype=float)
    err = np.vstack([rate - frame["rate_ci_low"].to_numpy(dtype=float),
                     frame["rate_ci_high"].to_numpy(dtype=float) - rate])
    ax.barh(range(len(frame)), rate, xerr=np.nan_to_num(np.clip(err, 0, None)), color="#4c72b0", capsize=3)
    ax.set_yticks(range(len(frame)), [label(n, 36) for n in frame["label"]], fontsize=8)
    ax.invert_yaxis()
    right = np.nanmax(np.append(frame["rate_ci_high"].to_numpy(dtype=float), rate))
    for i, rec in enumerate(frame.to_dict("records")):
        if i and math.isfinite(rec["speedup"]):
            ax.text(right * 1.02, i, f"{rec['speedup']:.2f}x vs above ({rec['verdict']})", va="center", fontsize=7)
    ax.set_xlim(0, right * 1.45)
    ax.set_xlabel(result.unit)
    ax.set_title(label(title or f"Ladder of fixes on {result.device}: {result.verdict}", 110), fontsize=9)
    fig.tight_layout()
    return fig
