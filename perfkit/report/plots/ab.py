"""A/B comparisons (the compile_ab and amp_regression investigations): the samples and ratio CI
of an A/B timing, the loss curves of the two training arms, and what moved between two traces
(a trace ``diff``)."""
from __future__ import annotations

import math

import pandas as pd

from ..prose import ab_word
from .figure import label, message_figure, new_figure


def ab_distribution(result, *, title: str | None = None):
    """Left: every sample of both sides (violin + strip, ms per call). Right: the speedup of B over A
    (median(A)/median(B)) with its confidence interval against 1 (no change)."""
    import seaborn as sns

    frame = result.to_frame().assign(ms=lambda f: f["seconds"] * 1e3)
    shown, hidden, top = _without_outliers(frame)
    fig = new_figure(9.0, 3.6)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 1]})
    if len(shown):
        order = list(result.labels)
        sns.violinplot(data=shown, x="side", y="ms", order=order, ax=left, inner=None, cut=0, color="#dddddd")
        sns.stripplot(data=shown, x="side", y="ms", order=order, ax=left, size=3, jitter=0.2)
    left.set_ylabel("time per call (ms)")
    left.set_xlabel("")
    note = f"\n({hidden} slow outlier sample(s) above {top:.3g} ms not drawn)" if hidden else ""
    left.set_title(label(title or f"{result.labels[1]} vs {result.labels[0]}: {ab_word(result)}", 100) + note,
                   fontsize=10 if hidden else None)
    _speedup_panel(right, result)
    fig.tight_layout()
    return fig


# Samples beyond this multiple of the upper quartile (first calls, GC pauses) are left off the
# axis, so a 70 ms outlier does not squash 0.09 ms medians into one line; the title counts them.
OUTLIER_FACTOR = 3.0


def _without_outliers(frame: pd.DataFrame) -> tuple[pd.DataFrame, int, float]:
    """The samples to draw, how many were left off, and the cut-off (ms)."""
    if frame.empty:
        return frame, 0, 0.0
    q1, q3 = frame["ms"].quantile(0.25), frame["ms"].quantile(0.75)
    top = q3 + OUTLIER_FACTOR * max(q3 - q1, 0.05 * q3)
    keep = frame["ms"] <= top
    return frame[keep], int((~keep).sum()), float(top)


def _speedup_panel(ax, result) -> None:
    """The speedup of B over A (``ABResult.speedup``, the figure every card and table quotes) with its CI,
    against 1 (no change)."""
    a, b = result.labels
    ax.axhline(1.0, color="#888888", linestyle="--", linewidth=1)
    speedup, (low, high) = result.speedup, result.speedup_ci
    if math.isfinite(speedup):
        yerr = [[speedup - low], [high - speedup]] if math.isfinite(low) and math.isfinite(high) else None
        ax.errorbar([0], [speedup], yerr=yerr, fmt="o", capsize=6, color="#c44e52")
    else:
        ax.text(0.5, 0.5, "no speedup\n(not enough data)", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([0], [label(f"{b} vs {a}", 24)])
    ax.set_ylabel("speedup, above 1: B faster (CI)")
    ax.set_title(f"speedup {speedup:.3g}x", fontsize=9)


def loss_curves(result, *, title: str | None = None):
    """Loss per training step of both arms of an ``amp_ab`` result (fp32 and autocast) and
    their relative difference."""
    frame = result.to_frame()
    if frame.empty:
        return message_figure("Loss curves", "no training steps were run")
    fig = new_figure(9.0, 3.2)
    left, right = fig.subplots(1, 2)
    left.plot(frame["step"], frame["loss_fp32"], marker="o", markersize=3, label="fp32")
    left.plot(frame["step"], frame["loss_amp"], marker="x", markersize=3, label=f"{result.dtype} autocast")
    left.set_xlabel("step")
    left.set_ylabel("loss")
    left.legend(fontsize=7)
    right.plot(frame["step"], frame["rel_diff"], color="#c44e52")
    right.set_xlabel("step")
    right.set_ylabel("|loss_amp - loss_fp32| / |loss_fp32|")
    fig.suptitle(label(title or f"Training curves, fp32 vs {result.dtype} autocast on {result.device}", 100))
    fig.tight_layout()
    return fig


def diff_breakdown(result, *, top: int = 12, title: str = "Per-step time change, B - A"):
    """The ops (outermost calls, each counted once) and kernels of a trace ``diff`` whose per-step
    time moved most (us per step, B minus A): red bars got slower, green faster."""
    tables = [("op", result.top_ops), ("kernel", result.kernels)]
    rows = pd.concat([t.assign(name=[f"{kind}: {n}" for n in t["name"]]) for kind, t in tables if len(t)],
                     ignore_index=True) \
        if any(len(t) for _, t in tables) else pd.DataFrame(columns=["name", "delta_per_step_us"])
    rows = rows.dropna(subset=["delta_per_step_us"])
    rows = rows.loc[rows["delta_per_step_us"].abs().sort_values(ascending=False).index[:top]]
    fig = new_figure(8.0, 1.2 + 0.3 * max(len(rows), 1))
    ax = fig.add_subplot()
    if rows.empty:
        ax.text(0.5, 0.5, "no ops or kernels in either trace", ha="center", va="center", transform=ax.transAxes)
    delta = rows["delta_per_step_us"].to_numpy(dtype=float)
    ax.barh(range(len(rows)), delta, color=["#c44e52" if d > 0 else "#55a868" for d in delta])
    ax.set_yticks(range(len(rows)), [label(n) for n in rows["name"]], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(0, color="#888888", linewidth=1)
    ax.set_xlabel("change in time per step (us)")
    ax.set_title(label(title, 100))
    fig.tight_layout()
    return fig
