"""``hotspots(trace)``: host time by Python function, per thread, and folded stacks for flame graphs.

Built on the call trees of :mod:`perfkit.analysis.frames` (Python frames; host ops on threads
without them). Per (function, thread), all times in microseconds:

* ``self_us``: time in the function itself, not in a function it called. The self times of a
  thread partition its covered time (the union of its top-level frames).
* ``total_us``: time in the function including callees, a recursive call counted once (only the
  outermost frame of a function in a stack adds its time).
* ``calls``: number of frames; ``per_step_us``: the ``total_us`` that falls inside step windows,
  divided by the number of steps of the thread's rank.
* ``waiting``: the function is a waiting primitive (lock acquire, ``threading`` waits,
  ``time.sleep``, ``select``; see ``frames.is_waiting``): its self time is idle, not work.

The default thread is the main one: per trace file, the thread that launches the most GPU work,
or in a CPU-only trace the one with the most Python time.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import write_text_atomic
from ...errors import ParameterError
from ...results import html_section, html_table, html_text, html_warnings
from ...text import jsonable
from ...trace.intervals import Coverage
from ...trace.steps import full_step_windows
from ..frames import frame_table, subset
from ..timeline import thread_table

HOTSPOT_COLUMNS = ["function", "file", "line", "thread", "self_us", "total_us", "calls", "per_step_us", "waiting"]
# Also in ``HotspotsResult.table``: self_per_step_us (self time inside steps per step), self_pct.
THREAD_SUMMARY_COLUMNS = ["thread", "main", "python", "frames", "covered_us", "self_us", "waiting_us", "steps"]


@dataclass(frozen=True, eq=False, repr=False)
class HotspotsResult:
    """``table``: one row per (function, thread), ``HOTSPOT_COLUMNS`` plus ``self_pct`` (share of the
    thread's covered time), most self time first. ``threads``: per selected thread
    (``THREAD_SUMMARY_COLUMNS``): covered time, summed self time, waiting self time, steps.
    ``stacks``: folded stacks, columns ``stack`` (frame labels joined by ";") and ``self_us``."""

    table: pd.DataFrame
    threads: pd.DataFrame
    stacks: pd.DataFrame
    warnings: tuple

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def top(self, n: int = 20, *, waiting: bool | None = None) -> pd.DataFrame:
        """The ``n`` rows with the most self time; ``waiting=False`` leaves waiting primitives out."""
        rows = self.table if waiting is None else self.table[self.table["waiting"] == waiting]
        return rows.head(n).reset_index(drop=True)

    def collapsed(self) -> str:
        """Folded stacks (``a;b;c 1234`` per line, weights in whole microseconds of self time), the
        input format of speedscope, inferno and flamegraph.pl."""
        weights = np.rint(self.stacks["self_us"].to_numpy()).astype(np.int64)
        keep = weights > 0
        return "".join(f"{s} {w}\n" for s, w in zip(self.stacks["stack"].to_numpy()[keep], weights[keep]))

    def write_collapsed(self, path) -> Path:
        """Write :meth:`collapsed` to ``path`` atomically; returns the path."""
        path = Path(path)
        write_text_atomic(path, self.collapsed(), user_output=True)
        return path

    def to_json(self) -> dict:
        rows = self.table[HOTSPOT_COLUMNS].to_dict("records")
        for r in rows:
            r["file"], r["line"] = (r["file"] or None), (int(r["line"]) if r["line"] >= 0 else None)
        return jsonable({"threads": self.threads.to_dict("records"), "rows": rows, "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        head = self.table.iloc[0] if len(self.table) else None
        top = f", top {head['function']} {head['self_us'] / 1e3:.3f} ms self" if head is not None else ""
        return (f"<HotspotsResult {len(self.table)} rows over {len(self.threads)} threads{top}, "
                f"{len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        covered = self.threads["covered_us"].sum() / 1e3
        return html_section("Python hotspots", html_text(f"{covered:,.3f} ms of host time covered"),
                            html_table(self.threads), html_table(self.top(25)), html_warnings(self.warnings))


def hotspots(trace, *, thread: str = "main") -> HotspotsResult:
    """Host time by function (see the module doc) for ``thread``: "main" (default), "all", or a
    thread label as listed in ``HotspotsResult.threads`` (the tid). Raises ParameterError for an
    unknown thread; a trace without Python stacks gives rows of host ops, with a warning."""
    frames, keys = frame_table(trace)
    threads = thread_table(trace, _python_us(frames))
    chosen = _select_threads(threads, frames, thread)
    frames = subset(frames, frames["thread"].isin(chosen["thread"]).to_numpy())
    windows, stubs = full_step_windows(trace)
    n_steps = windows.groupby("rank").size()
    frames = _add_step_time(frames, windows)
    table = _aggregate(frames, keys, chosen, n_steps)
    summary = _thread_summary(frames, keys, chosen, n_steps)
    stacks = folded_stacks(frames, keys, chosen)
    return HotspotsResult(table=table, threads=summary, stacks=stacks, warnings=_warnings(trace, frames, summary) + stubs)


def _python_us(frames: pd.DataFrame) -> pd.Series:
    top = frames[(frames["parent"] < 0) & frames["python"]]
    return (top["end_us"] - top["start_us"]).groupby(top["thread"]).sum()


def _select_threads(threads: pd.DataFrame, frames: pd.DataFrame, which: str) -> pd.DataFrame:
    threads = threads[threads["thread"].isin(frames["thread"].unique())]
    if which == "main":
        return threads[threads["main"]]
    if which == "all":
        return threads
    chosen = threads[threads["label"] == str(which)]
    if chosen.empty:
        raise ParameterError(f"thread {which!r} not found: use 'main', 'all' or one of "
                             f"{', '.join(threads['label'].astype(str))}")
    return chosen


def _add_step_time(frames: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """``in_steps_us``: the part of each frame inside a step window of its rank; ``self_in_steps_us``:
    the same for its self time; ``outer``: the frame is not inside another frame of the same
    function (recursion is counted once)."""
    start, end = frames["start_us"].to_numpy(), frames["end_us"].to_numpy()
    inside = np.zeros(len(frames))
    ranks = frames["rank"].to_numpy()
    for rank, win in windows.groupby("rank"):
        rows = ranks == rank
        inside[rows] = Coverage.of(win["start_us"], win["end_us"]).within(start[rows], end[rows])
    parent = frames["parent"].to_numpy()
    child = parent >= 0
    self_inside = inside - np.bincount(parent[child], weights=inside[child], minlength=len(frames))
    return frames.assign(in_steps_us=inside, self_in_steps_us=np.clip(self_inside, 0.0, None), outer=_outermost(frames))


def _outermost(frames: pd.DataFrame) -> np.ndarray:
    """Frames that start after every earlier frame of the same function on the thread has ended."""
    if frames.empty:
        return np.zeros(0, dtype=bool)
    thread = pd.factorize(frames["thread"])[0].astype(np.int64)
    group = thread * (int(frames["key"].max()) + 1) + frames["key"].to_numpy()
    order = np.lexsort((frames["start_us"].to_numpy(), group))
    codes = group[order]
    running = pd.Series(frames["end_us"].to_numpy()[order]).groupby(codes, sort=False).cummax().to_numpy()
    prev = np.full(len(order), -np.inf)
    same = codes[1:] == codes[:-1]
    prev[1:][same] = running[:-1][same]
    out = np.empty(len(order), dtype=bool)
    out[order] = frames["start_us"].to_numpy()[order] >= prev
    return out


def _aggregate(frames: pd.DataFrame, keys: pd.DataFrame, chosen: pd.DataFrame, n_steps: pd.Series) -> pd.DataFrame:
    length = frames["end_us"] - frames["start_us"]
    work = pd.DataFrame({"thread": frames["thread"], "key": frames["key"], "self_us": frames["self_us"],
                         "total_us": length.where(frames["outer"], 0.0),
                         "in_steps": frames["in_steps_us"].where(frames["outer"], 0.0),
                         "self_in_steps": frames["self_in_steps_us"]})
    g = work.groupby(["thread", "key"], sort=False).agg(
        self_us=("self_us", "sum"), total_us=("total_us", "sum"), calls=("self_us", "size"),
        in_steps=("in_steps", "sum"), self_in_steps=("self_in_steps", "sum")).reset_index()
    info = chosen.set_index("thread")
    g = g.join(keys, on="key")
    covered = _covered(frames)
    steps = info["rank"].map(n_steps).reindex(g["thread"]).fillna(1).to_numpy()
    g["per_step_us"] = g["in_steps"] / steps
    g["self_per_step_us"] = g["self_in_steps"] / steps
    g["self_pct"] = 100.0 * g["self_us"] / covered.reindex(g["thread"]).clip(lower=1e-12).to_numpy()
    g["thread"] = info["label"].reindex(g["thread"]).to_numpy()
    g = g.sort_values(["self_us", "function"], ascending=[False, True], ignore_index=True)
    return g[HOTSPOT_COLUMNS + ["self_per_step_us", "self_pct"]]


def _covered(frames: pd.DataFrame) -> pd.Series:
    top = frames[frames["parent"] < 0]
    return (top["end_us"] - top["start_us"]).groupby(top["thread"]).sum()


def _thread_summary(frames: pd.DataFrame, keys: pd.DataFrame, chosen: pd.DataFrame, n_steps: pd.Series):
    waiting = keys["waiting"].to_numpy()[frames["key"].to_numpy()]
    by_thread = frames.assign(waiting_us=np.where(waiting, frames["self_us"], 0.0)).groupby("thread").agg(
        python=("python", "any"), frames=("self_us", "size"), self_us=("self_us", "sum"),
        waiting_us=("waiting_us", "sum"))
    info = chosen.set_index("thread")
    out = by_thread.join(info[["label", "main", "rank"]])
    out["covered_us"] = _covered(frames).reindex(out.index).fillna(0.0)
    out["steps"] = out["rank"].map(n_steps).fillna(0).astype(np.int64)
    out = out.rename(columns={"label": "thread"}).sort_values(["main", "covered_us"], ascending=False)
    return out.reset_index(drop=True)[THREAD_SUMMARY_COLUMNS]


# Frames below this depth are folded into one "[deeper frames]" entry: Python's default recursion
# limit is 1,000, and the text of N stacks each nested in the previous grows as N**2 (20,000 nested
# events would make GBs of stack text).
MAX_FOLDED_DEPTH = 1_000
_FOLDED = "[deeper frames]"


def folded_stacks(frames: pd.DataFrame, keys: pd.DataFrame, chosen: pd.DataFrame) -> pd.DataFrame:
    """Self time per distinct call stack: ``stack`` (labels root first, joined by ";"; prefixed by
    the thread when there are several; frames below MAX_FOLDED_DEPTH folded into one
    ``[deeper frames]``) and ``self_us``, sorted by stack."""
    if frames.empty:
        return pd.DataFrame({"stack": pd.Series(dtype=object), "self_us": pd.Series(dtype=float)})
    stack_id, parent_of, key_of = _stack_ids(frames)
    weight = np.bincount(stack_id, weights=frames["self_us"].to_numpy(), minlength=len(key_of))
    labels = [lbl.replace(";", ":").replace("\n", " ") for lbl in keys["label"]]
    roots = chosen.set_index("thread")["label"]
    text: list[str] = []
    depth: list[int] = []
    for sid in range(len(key_of)):
        up = parent_of[sid]
        depth.append(depth[up] + 1 if up >= 0 else 0)
        if depth[-1] > MAX_FOLDED_DEPTH:  # the same string object: no copy, however deep
            text.append(text[up])
            continue
        head = text[up] + ";" if up >= 0 else ""
        text.append(head + (labels[key_of[sid]] if depth[-1] < MAX_FOLDED_DEPTH else _FOLDED))
    out = pd.DataFrame({"stack": text, "self_us": weight, "root": _root_threads(frames, stack_id, len(key_of))})
    if len(chosen) > 1:
        out["stack"] = "thread " + roots.reindex(out["root"]).astype(str).to_numpy() + ";" + out["stack"]
    out = out[out["self_us"] > 0].groupby("stack", sort=True)["self_us"].sum().reset_index()
    return out


def _stack_ids(frames: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A stack id per frame (same id = same functions from the root down, on the same thread), and
    per id its parent id and key. Ids are numbered level by level, so a parent's id is smaller."""
    depth, parent = frames["depth"].to_numpy(), frames["parent"].to_numpy()
    key, thread = frames["key"].to_numpy(), pd.factorize(frames["thread"])[0].astype(np.int64)
    n_keys, n_threads = int(key.max()) + 1, int(thread.max()) + 1
    sid = np.full(len(frames), -1, dtype=np.int64)
    parents, keys_of = [], []
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_depth], np.arange(depth.max() + 2))
    for k in range(len(bounds) - 1):
        rows = by_depth[bounds[k]:bounds[k + 1]]
        # Roots hang under -1 - thread so that the same function on two threads is two stacks.
        up = sid[parent[rows]] if k else -1 - thread[rows]
        codes, uniques = pd.factorize((up + n_threads) * n_keys + key[rows])
        sid[rows] = codes + len(parents)
        parents.extend(np.maximum(uniques // n_keys - n_threads, -1).tolist())
        keys_of.extend((uniques % n_keys).tolist())
    return sid, np.asarray(parents, dtype=np.int64), np.asarray(keys_of, dtype=np.int64)


def _root_threads(frames: pd.DataFrame, stack_id: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    out[stack_id] = frames["thread"].to_numpy()
    return out


def _warnings(trace, frames: pd.DataFrame, summary: pd.DataFrame) -> tuple:
    out = list(trace.warnings)  # what the loader set aside, said in every command's output
    if not trace.has_python_stacks:
        out.append("no python_function events: rows are host ops (cpu_op, record_function ranges, runtime calls); "
                   "re-profile with torch.profiler.profile(with_stack=True) to see Python functions")
    else:
        bare = summary[~summary["python"]]
        if len(bare):
            out.append(f"threads {', '.join(bare['thread'].astype(str))} have no Python frames: their rows are "
                       "host ops")
    by_time = int(frames["by_time"].sum())
    if by_time:
        out.append(f"{by_time:,} Python frames had a parent id that is missing or contradicts the timestamps; "
                   "they were nested by time instead")
    return tuple(out)
