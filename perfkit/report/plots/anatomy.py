"""Figures of the step_anatomy investigation: the icicle (flame) chart of a ``hotspots`` result's
call stacks, the critical path of each step stacked by kind, and each step's GPU time as busy
plus idle by gap class."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...analysis.frames import is_waiting
from ...analysis.stacks import is_library
from .figure import label, message_figure, new_figure, no_gpu_figure

KIND_COLORS = {"host": "#4c72b0", "launch": "#dd8452", "kernel": "#55a868", "comm": "#da8bc3", "memcpy": "#c44e52",
               "sync_wait": "#8172b3", "idle": "#c8c8c8"}
GAP_COLORS = {"input": "#8172b3", "launch": "#dd8452", "sync_wait": "#c44e52", "host_python": "#4c72b0",
              "compile": "#937860", "other_stream": "#da8bc3", "tail": "#8c8c8c"}
FRAME_COLORS = {"user": "#e8743b", "library": "#f2c14e", "module": "#b39ddb", "op": "#6b9bd1", "waiting": "#c8c8c8",
                "trunk": "#b0b0b0"}
# torch.nn.Module's call dispatch: two frames between every module and its forward that say
# nothing about where time goes; hidden so deep models keep their layers within max_depth.
DISPATCH_FRAMES = ("_call_impl (torch/nn/modules/module.py:", "_wrapped_call_impl (torch/nn/modules/module.py:")
ICICLE_COLUMNS = ["depth", "start_us", "width_us", "label", "kind"]
MAX_STEPS = 40  # bars per step figure; more steps would shrink each bar below a readable height


def icicle_layout(stacks: pd.DataFrame, *, max_depth: int = 24, min_share: float = 0.002,
                  hide: tuple = DISPATCH_FRAMES) -> tuple[pd.DataFrame, float]:
    """Rectangles of an icicle chart of folded stacks (``HotspotsResult.stacks``: ``stack``, frame
    labels root first joined by ";", and ``self_us``) and the total time (us).

    One row per call-tree node (``ICICLE_COLUMNS``): ``depth`` (0 = top), ``start_us`` and
    ``width_us`` (its total time: its own self time plus its callees'), ``label`` and ``kind``
    (``user``/``library`` Python frame, ``module`` (an ``nn.Module: Name`` range), host ``op``,
    ``waiting`` primitive, or ``trunk``). Callees sit below their caller, the largest first. The trunk
    (the frames every stack starts with) is one row at depth 0, so the chart starts where the stacks
    part. Frames starting with one of ``hide`` (torch.nn.Module's call dispatch) are left out of
    the paths, their time going to their callees; so are nodes narrower than ``min_share`` of the
    total and levels deeper than ``max_depth``."""
    tree: dict = {}
    for stack, us in zip(stacks["stack"], stacks["self_us"].to_numpy(dtype=float)):
        node = tree
        for frame in (f for f in stack.split(";") if not f.startswith(hide)):
            child = node.setdefault(frame, [0.0, {}])
            child[0] += us
            node = child[1]
    total = float(stacks["self_us"].sum())
    trunk, tree = _trunk(tree, min_share * total)
    rows = [(0, 0.0, total, _trunk_label(trunk), "trunk")] if trunk else []
    _place(tree, 1 if trunk else 0, 0.0, rows, max_depth, min_share * total)
    return pd.DataFrame(rows, columns=ICICLE_COLUMNS), total


def _trunk(tree: dict, min_us: float) -> tuple[list[str], dict]:
    """The frames every drawn stack starts with (siblings narrower than ``min_us`` are not drawn
    anyway), and the tree below them."""
    trunk: list[str] = []
    while True:
        wide = [(name, node) for name, node in tree.items() if node[0] >= min_us]
        if len(wide) != 1 or not wide[0][1][1]:
            return trunk, tree
        trunk.append(wide[0][0])
        tree = wide[0][1][1]


def _trunk_label(trunk: list[str]) -> str:
    names = [_function(f) for f in trunk]
    return " > ".join(names) if len(names) <= 3 else f"{names[0]} > ... ({len(names) - 2} frames) > {names[-1]}"


def _place(tree: dict, depth: int, start: float, rows: list, max_depth: int, min_us: float) -> None:
    if depth >= max_depth:
        return
    for name, (us, children) in sorted(tree.items(), key=lambda kv: -kv[1][0]):
        if us < min_us:
            break
        rows.append((depth, start, us, name, frame_kind(name)))
        _place(children, depth + 1, start, rows, max_depth, min_us)
        start += us


def frame_kind(frame: str) -> str:
    """``user`` or ``library`` for a Python frame label "func (file:line)" (``stacks.is_library``),
    ``waiting`` for a waiting primitive (``frames.is_waiting``), ``op`` for a host op."""
    function, file = _split(frame)
    if is_waiting(function, file):
        return "waiting"
    if not file:
        return "module" if function.startswith("nn.Module: ") else "op"
    return "library" if is_library(file) else "user"


def _split(frame: str) -> tuple[str, str]:
    """"func (file:line)" -> (func, file); a host op -> (name, "")."""
    if frame.endswith(")") and " (" in frame:
        function, where = frame[:-1].rsplit(" (", 1)
        return function, where.rsplit(":", 1)[0]
    return frame, ""


def _function(frame: str) -> str:
    return _split(frame)[0]


def icicle(hotspots, *, max_depth: int = 24, min_share: float = 0.002, title: str = ""):
    """Icicle (top-down flame) chart of a ``hotspots`` result's call stacks: one bar per function
    in a call path, as wide as its time including callees (ms), callees below their caller. Bars
    are coloured by what runs: user Python code, library Python code, nn.Module ranges, host ops,
    waiting. See ``icicle_layout`` for ``max_depth``, ``min_share`` and the hidden frames."""
    layout, total = icicle_layout(hotspots.stacks, max_depth=max_depth, min_share=min_share)
    heading = title or "Where host time goes, by call stack (icicle chart; whole trace)"
    if layout.empty:
        return message_figure(heading, "no host frames in this trace: nothing to draw")
    depth = int(layout["depth"].max()) + 1
    fig = new_figure(11.0, 1.4 + 0.3 * depth)
    ax = fig.add_subplot()
    for kind, rows in layout.groupby("kind", sort=False):
        ax.barh(rows["depth"], rows["width_us"] / 1e3, left=rows["start_us"] / 1e3, height=0.92,
                color=FRAME_COLORS[kind], edgecolor="white", linewidth=0.4, label=kind)
    _frame_texts(ax, layout, total)
    ax.set_ylim(depth - 0.5, -0.5)
    ax.set_xlim(0, total / 1e3)
    ax.set_yticks([])
    ax.set_ylabel("call depth (callers above)")
    ax.set_xlabel(f"host time (ms), {total / 1e3:,.1f} ms in all; bars narrower than {min_share:.1%} left out")
    ax.set_title(label(heading, 120), fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    fig.tight_layout()
    return fig


def _frame_texts(ax, layout: pd.DataFrame, total: float) -> None:
    """Each bar's function name, shortened to the characters that fit in it (~6.2 px each at 7 pt)."""
    width_px = ax.get_position().width * ax.figure.get_figwidth() * ax.figure.dpi
    for r in layout.itertuples(index=False):
        chars = int(r.width_us / total * width_px / 6.2)
        text = _function(r.label) if r.kind != "trunk" else r.label
        if chars >= 4:
            ax.text((r.start_us + r.width_us / 2) / 1e3, r.depth, label(text, chars), ha="center", va="center",
                    fontsize=7, clip_on=True)


def critical_path_bars(path, *, title: str = "Critical path of each step, by kind"):
    """Per step of a ``critical_path`` result: the path's time by kind (host, launch, kernel,
    memcpy, sync_wait, idle; ms) stacked, and the step's wall time as a tick."""
    steps = path.steps.head(MAX_STEPS)
    if steps.empty:
        return message_figure(title, "no step windows in this trace")
    fig = new_figure(10.0, 1.6 + 0.34 * len(steps))
    ax = fig.add_subplot()
    y = np.arange(len(steps))
    left = np.zeros(len(steps))
    for kind, color in KIND_COLORS.items():
        width = steps[f"{kind}_us"].to_numpy(dtype=float) / 1e3
        if width.any():
            ax.barh(y, width, 0.7, left=left, color=color, label=kind)
        left += width
    ax.plot(steps["wall_us"].to_numpy(dtype=float) / 1e3, y, "|", markersize=16, color="#222222", label="step wall")
    _step_axis(ax, steps, title if len(path.steps) <= MAX_STEPS else f"{title} (first {MAX_STEPS} steps)")
    fig.tight_layout()
    return fig


def gpu_time_bars(gaps, *, title: str = "GPU compute stream in each step: busy, and idle by cause"):
    """Per step of a ``gpu_gaps`` result: the compute stream's busy time (the step less its gaps)
    and its idle time by gap class (ms), stacked to the step's wall time; ``other_stream`` is idle
    compute stream while another stream (a copy, a collective) works. "no GPU" without a GPU timeline."""
    if not gaps.has_gpu:
        return no_gpu_figure("the trace has no kernels, copies or memsets, so there are no GPU gaps", title)
    steps = gaps.steps.head(MAX_STEPS)
    if steps.empty:
        return message_figure(title, "no step windows in this trace")
    fig = new_figure(10.0, 1.6 + 0.34 * len(steps))
    ax = fig.add_subplot()
    y = np.arange(len(steps))
    idle = {c: steps[f"{c}_us"].to_numpy(dtype=float) / 1e3 for c in GAP_COLORS}
    busy = steps["wall_us"].to_numpy(dtype=float) / 1e3 - sum(idle.values())
    ax.barh(y, busy, 0.7, color="#55a868", label="compute stream busy")
    left = busy.copy()
    for cls, width in idle.items():
        if width.any():
            ax.barh(y, width, 0.7, left=left, color=GAP_COLORS[cls], label=f"idle: {cls}")
        left += width
    _step_axis(ax, steps, title if len(gaps.steps) <= MAX_STEPS else f"{title} (first {MAX_STEPS} steps)")
    fig.tight_layout()
    return fig


def _step_axis(ax, steps: pd.DataFrame, title: str) -> None:
    many_ranks = steps["rank"].nunique() > 1
    names = [f"rank {r} step {s}" if many_ranks else f"step {s}" for r, s in zip(steps["rank"], steps["step"])]
    ax.set_yticks(np.arange(len(steps)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    ax.set_title(label(title, 120), fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
