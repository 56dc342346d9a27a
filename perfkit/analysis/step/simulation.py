"""``replay(trace)``: every full step run forward from its dependency graph (``graph``) with the recorded durations,
and how far that lands from what the trace measured.

A step's time, measured and replayed alike, is its window, or, where the host ran ahead of the GPU, the GPU time
its launches queued (``queued``: the union of that work's intervals), whichever is longer: a step of a long run
takes at least as long as the GPU needs for the work it queues (``analysis.queued``). The **replay error** of a
step is replayed / measured - 1. Where it is above ``TRUSTED_ERROR``, the prediction of every fix for that step
says so and names what the replay could not model there (``not_modeled``): GPU work that waited for something
the trace does not show, work queued before the profiler's window, collectives whose time is a peer rank's,
untraced host time. The graph holds the first two where they were and keeps the collectives' recorded length
(``graph`` module doc), so the replay of the recorded steps stays close while no fix moves them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...results import html_section, html_table, html_text, html_warnings
from ...text import jsonable
from ...trace import intervals
from .graph import rank_graphs
from .lanes import GPU_COMM
from .segments import F_TRACED

# A step replayed within this share of what was measured is one the model reproduces; past it, every
# prediction for the step says so (the 90th-percentile target).
TRUSTED_ERROR = 0.10
STEP_COLUMNS = ["rank", "step", "wall_us", "queued_us", "measured_us", "replay_us", "error"]


@dataclass(frozen=True)
class Timing:
    """One simulation of a rank's graph: ``run_start``, ``seg_start`` (per segment), ``gpu_start`` and
    ``gpu_end``, in us on the trace's clock."""

    run_start: np.ndarray
    seg_start: np.ndarray
    gpu_start: np.ndarray
    gpu_end: np.ndarray


def simulate(g) -> Timing:
    """Run graph ``g`` (a ``graph.RankGraph``, maybe transformed) forward: each node starts at the latest of its
    chain predecessor's end plus the gap, its dependencies plus their latencies, and its absolute start; it ends
    its length later."""
    seg, runs, gpu = g.seg, g.runs, g.gpu
    dur = seg["dur"]
    first = runs["first"]
    n_run = len(first)
    csum = np.concatenate(([0.0], np.cumsum(dur)))
    off = csum[:-1] - csum[first][seg["run"]]
    run_dur = np.diff(np.append(csum[first], csum[-1]))
    node_dur = np.concatenate([run_dur, gpu["dur"]])
    same = np.concatenate(([False], runs["thread"][1:] == runs["thread"][:-1]))
    prev = np.concatenate([np.where(same, np.arange(n_run) - 1, -1), np.where(gpu["prev"] >= 0, n_run + gpu["prev"], -1)])
    gap = np.concatenate([np.zeros(n_run), gpu["gap"]])
    base = np.concatenate([runs["base"], gpu["base"]])
    deps = _dependencies(g, off, n_run)
    start, end = _forward(g.order, prev, node_dur, gap, base, *deps)
    run_start = start[:n_run]
    return Timing(run_start=run_start, seg_start=run_start[seg["run"]] + off, gpu_start=start[n_run:],
                  gpu_end=end[n_run:])


def _dependencies(g, off: np.ndarray, n_run: int) -> tuple:
    """(source, destination, latency, from_end) of every dependency but the chains: a launch or a host point waits
    for a point of a run (its start plus an offset), a cross-stream or blocking wait for a GPU event's end."""
    seg, gpu, waits, hdeps = g.seg, g.gpu, g.waits, g.hdeps
    dur = seg["dur"]
    ls = gpu["launch_seg"]
    ok = np.flatnonzero(ls >= 0)
    point = off[ls[ok]] + np.where(gpu["launch_at_end"][ok], dur[ls[ok]], 0.0)
    crossed = np.flatnonzero(gpu["cross"] >= 0)
    hs = hdeps["seg"]
    src = [seg["run"][ls[ok]], n_run + gpu["cross"][crossed], n_run + waits["gpu"], seg["run"][hs]]
    dst = [n_run + ok, n_run + crossed, waits["run"], hdeps["run"]]
    lat = [point + gpu["launch_lat"][ok], gpu["cross_lat"][crossed], waits["lat"],
           off[hs] + np.where(hdeps["at_end"], dur[hs], 0.0) + hdeps["lat"]]
    from_end = [np.zeros(len(ok), bool), np.ones(len(crossed), bool), np.ones(len(waits["gpu"]), bool),
                np.zeros(len(hs), bool)]
    return (np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64),
            np.concatenate(lat).astype(np.float64), np.concatenate(from_end))


def _forward(order, prev, dur, gap, base, src, dst, lat, from_end) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every node, visiting them in topological ``order`` (node ids)."""
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    p_prev = np.where(prev[order] >= 0, position[np.clip(prev[order], 0, None)], -1)
    by_dst = np.argsort(position[dst], kind="stable")
    d_pos, s_pos = position[dst][by_dst], position[src][by_dst]
    if len(s_pos) and (s_pos >= d_pos).any():
        raise OrderError("replay: a dependency points backwards in the graph's order")
    ptr = np.searchsorted(d_pos, np.arange(n + 1)).tolist()
    # A dependency on a node's end is coded as -1 - source, on its start as the source.
    S = np.where(from_end[by_dst], -1 - s_pos, s_pos).tolist()
    L = lat[by_dst].tolist()
    P, D, G, B = p_prev.tolist(), dur[order].tolist(), gap[order].tolist(), base[order].tolist()
    start, end = [0.0] * n, [0.0] * n
    for p in range(n):
        t = B[p]
        q = P[p]
        if q >= 0:
            c = end[q] + G[p]
            if c > t:
                t = c
        for k in range(ptr[p], ptr[p + 1]):
            s = S[k]
            v = (start[s] if s >= 0 else end[-1 - s]) + L[k]
            if v > t:
                t = v
        start[p] = t
        end[p] = t + D[p]
    out_start, out_end = np.empty(n), np.empty(n)
    out_start[order], out_end[order] = start, end
    return out_start, out_end


# --- step times --------------------------------------------------------------------------------------------

def step_times(g, t: Timing | None) -> pd.DataFrame:
    """Per window of ``g``: ``window_us`` (boundary to boundary on the main thread), ``queued_us`` (GPU time of
    the work launched in it) and ``step_us`` (the longer, and no shorter than the span to the end of its GPU work
    where some of that work is held where it was: ``_pinned``), recorded when ``t`` is None, else as simulated."""
    win = g.windows
    seg, gpu = g.seg, g.gpu
    if t is None:
        seg_start, run_start, g_start, g_end = seg["start"], None, gpu["start"], gpu["end"]
    else:
        seg_start, g_start, g_end = t.seg_start, t.gpu_start, t.gpu_end
    seg_dur = seg["end"] - seg["start"] if t is None else seg["dur"]
    bounds = []
    for side in ("start", "end"):
        s, at_end = win[f"{side}_seg"].to_numpy(), win[f"{side}_at_end"].to_numpy()
        ok = s >= 0
        value = np.where(ok, seg_start[np.clip(s, 0, None)] + np.where(at_end, seg_dur[np.clip(s, 0, None)], 0.0),
                         np.nan)
        bounds.append(value)
    start, end = bounds
    if np.isnan(start).any() or np.isnan(end).any():
        start, end = _widened(win, start, end, seg_start, seg_dur, g_start, g_end, seg)
    queued = _queued(gpu["window"], g_start, g_end, len(win))
    window = np.maximum(end - start, 0.0)
    pinned = _pinned(gpu, g_end, start, len(win))
    return pd.DataFrame({"rank": win["rank"].to_numpy(), "step": win["step"].to_numpy(), "window_us": window,
                         "queued_us": queued, "step_us": np.maximum(np.maximum(window, queued), pinned)})


def _pinned(gpu: dict, end: np.ndarray, start: np.ndarray, n: int) -> np.ndarray:
    """Per window: from its start to the end of the last GPU work launched in it that the graph holds where it was
    (a wait the trace does not explain), which no fix brings earlier; 0 where it launched none."""
    out = np.zeros(n)
    w = gpu["window"]
    held = (w >= 0) & (gpu["base"] > -np.inf)
    if not held.any():
        return out
    last = np.full(n, -np.inf)
    np.maximum.at(last, w[held], end[held])
    has = np.isfinite(last)
    out[has] = np.maximum(last[has] - start[has], 0.0)
    return out


def _widened(win, start, end, seg_start, seg_dur, g_start, g_end, seg) -> tuple[np.ndarray, np.ndarray]:
    """Boundaries outside the main thread's span (a window widened to GPU work): the span of the host's and the
    GPU's activity on that side."""
    main = seg["thread"] == 0
    host_first = float(seg_start[main].min()) if main.any() else np.inf
    host_last = float((seg_start + seg_dur)[main].max()) if main.any() else -np.inf
    first = min(host_first, float(g_start.min()) if len(g_start) else np.inf)
    last = max(host_last, float(g_end.max()) if len(g_end) else -np.inf)
    return np.where(np.isnan(start), first, start), np.where(np.isnan(end), last, end)


def _queued(window: np.ndarray, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n)
    ok = np.flatnonzero(window >= 0)
    if not len(ok):
        return out
    order = ok[np.argsort(window[ok], kind="stable")]
    rows, first = np.unique(window[order], return_index=True)
    for w, a, b in zip(rows, first, [*first[1:], len(order)]):
        out[w] = intervals.length(start[order[a:b]], end[order[a:b]])
    return out


# --- the result ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False, repr=False)
class ReplayResult:
    """``steps``: one row per full step (``STEP_COLUMNS``: the recorded window ``wall_us``, ``queued_us``,
    ``measured_us`` (the longer), ``replay_us`` and ``error`` = replay / measured - 1). ``not_modeled``:
    ``{(rank, step): [(what, us), ...]}`` for the steps replayed past ``TRUSTED_ERROR``, largest first.
    ``graphs`` and ``timings``: per rank, what the replay ran and how it ran."""

    steps: pd.DataFrame
    not_modeled: dict
    graphs: dict
    timings: dict
    warnings: tuple

    @property
    def error(self) -> dict:
        """``median``, ``p90`` and ``worst`` of |error| over the steps (NaN without steps)."""
        e = self.steps["error"].abs().dropna().to_numpy()
        if not len(e):
            return {"median": float("nan"), "p90": float("nan"), "worst": float("nan")}
        return {"median": float(np.median(e)), "p90": float(np.quantile(e, 0.9)), "worst": float(e.max())}

    def to_frame(self) -> pd.DataFrame:
        return self.steps.copy()

    def to_json(self) -> dict:
        steps = [{"rank": int(r["rank"]), "step": int(r["step"]), "wall_us": r["measured_us"],
                  "replay_us": r["replay_us"], "error": r["error"]} for r in self.steps.to_dict("records")]
        notes = [{"rank": r, "step": s, "not_modeled": [{"what": w, "us": us} for w, us in items]}
                 for (r, s), items in self.not_modeled.items()]
        return jsonable({"replay_error": self.error, "steps": steps, "not_modeled": notes,
                         "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        e = self.error
        return (f"<ReplayResult {len(self.steps)} steps, |error| median {100 * e['median']:.1f}%, "
                f"p90 {100 * e['p90']:.1f}%, worst {100 * e['worst']:.1f}%>")

    def _repr_html_(self) -> str:
        e = self.error
        return html_section("Replay", html_text(f"|error| median {100 * e['median']:.1f}%, p90 {100 * e['p90']:.1f}%,"
                                                f" worst {100 * e['worst']:.1f}%"),
                            html_table(self.steps), html_warnings(self.warnings))


class OrderError(RuntimeError):
    """A rank's graph has a dependency that runs backwards in its order: its recorded times contradict its links."""


def replay(trace) -> ReplayResult:
    """Replay every full step of ``trace`` (module doc), once per trace (shared). A trace without GPU events,
    without full steps, or whose steps launch no GPU work the trace links to its launch calls, replays nothing:
    ``steps`` is empty and a warning says why."""
    return trace.derived("replay", _replay)


def _replay(trace) -> ReplayResult:
    graphs = rank_graphs(trace) if trace.has_gpu_events else {}
    graphs = {rank: g for rank, g in graphs.items() if (g.gpu["window"] >= 0).any()}
    rows, notes, timings, skipped = [], {}, {}, []
    for rank, g in list(graphs.items()):
        try:
            t = simulate(g)
        except OrderError:
            skipped.append(rank)
            del graphs[rank]
            continue
        timings[rank] = t
        measured, replayed = step_times(g, None), step_times(g, t)
        frame = pd.DataFrame({"rank": measured["rank"], "step": measured["step"], "wall_us": measured["window_us"],
                              "queued_us": measured["queued_us"], "measured_us": measured["step_us"],
                              "replay_us": replayed["step_us"]})
        frame["error"] = frame["replay_us"] / frame["measured_us"].where(frame["measured_us"] > 0) - 1.0
        rows.append(frame)
        notes.update(_not_modeled(g, frame))
    steps = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=STEP_COLUMNS)
    warnings = tuple(f"rank {rank} is not replayed: its recorded times contradict the links between its events "
                     "(a dependency runs backwards), so no fix is predicted on it" for rank in skipped)
    warnings += () if graphs or skipped else (_why_not(trace),)
    return ReplayResult(steps=steps[STEP_COLUMNS], not_modeled=notes, graphs=graphs, timings=timings,
                        warnings=warnings)


def _why_not(trace) -> str:
    if not trace.has_gpu_events:
        return "no GPU events: there is nothing to replay; the verdict uses host time only"
    if trace.launches().empty:
        return ("no GPU event is linked to a launch call (no correlation ids or ac2g flows): the replay cannot tell "
                "which host work released which GPU work")
    return "no full step with host events launches GPU work: there is nothing to replay"


def _not_modeled(g, frame: pd.DataFrame) -> dict:
    """For each step replayed past ``TRUSTED_ERROR``: what in it the replay could not model, with its time."""
    out = {}
    gpu, seg = g.gpu, g.seg
    for w, row in frame.reset_index(drop=True).iterrows():
        if not (abs(row["error"]) > TRUSTED_ERROR):
            continue
        mine = gpu["window"] == w
        items = [("GPU work that waited for something the trace does not show", float(gpu["wait_lost"][mine].sum())),
                 ("GPU work queued before the profiler's window", _unlaunched_in(g, w)),
                 ("collectives, whose time is a peer rank's", float(gpu["dur"][mine & (gpu["kind"] == GPU_COMM)].sum())),
                 ("untraced host time", float((seg["end"] - seg["start"])[(seg["window"] == w) & (seg["thread"] == 0)
                                                                          & ((seg["flags"] & F_TRACED) == 0)].sum()))]
        out[(int(row["rank"]), int(row["step"]))] = sorted([i for i in items if i[1] > 0], key=lambda i: -i[1])
    return out


def _unlaunched_in(g, w: int) -> float:
    """GPU time of work with no launch call in the trace that ran inside window ``w``."""
    win = g.windows.iloc[w]
    gpu = g.gpu
    un = gpu["launch_seg"] < 0
    lo = np.maximum(gpu["start"][un], win["start_us"])
    hi = np.minimum(gpu["end"][un], win["end_us"])
    return float(np.clip(hi - lo, 0, None).sum())
