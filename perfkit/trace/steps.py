"""Profiler steps: the windows that per-step numbers are computed over.

Where the trace has them, steps are the ``ProfilerStep#N`` events that ``prof.step()`` writes.
Fallbacks, in order, for traces recorded without a profiler schedule:

1. ``dataloader``: each ``enumerate(DataLoader)...`` annotation starts a step that lasts until the
   next one starts (the last ends at the end of the host activity of its rank);
2. ``optimizer``: each ``Optimizer.step#...`` annotation ends a step that began where the previous
   one ended (the first begins at the first host event);
3. ``whole trace``: one step spanning all events of the rank, with a warning that per-step numbers
   are whole-trace numbers.

``ProfilerStep#`` events that are short markers (the legacy profiler's, and some exporters': all of them together
under ``MARKER_SHARE`` of the rank's host activity) mark where each step starts: a step then lasts until the next
marker (the last until the rank's last host event), with a warning.

GPU work belongs to the step that launched it. Work launched before the profiler's window (``before_window``:
no launch call in the trace, ahead of the first launched work on its GPU) is the previous step's tail, which
no step counts as its own: ``perfkit gpu-kernels`` leaves it out of every figure and the critical path does
not run through it (``before_window_events``). ``launch_windows`` gives each GPU event the window of the step
that launched it (a DDP rank whose GPU runs a step behind its host runs the last step's all-reduces after that
step's window has closed: they are still that step's).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..text import us_text
from .names import starts_with
from .schema import GPU_CATEGORIES, NESTED_CATEGORIES

STEP_PREFIX = "ProfilerStep#"
# ProfilerStep# ranges that together hold under this share of the host's activity are markers, not steps: a loop's
# steps cover most of its host time (perfkit rule; a 20 us marker per 10 ms step holds 0.2%).
MARKER_SHARE = 0.01
STEP_COLUMNS = ["rank", "step", "start_us", "end_us", "dur_us", "source"]
_HOST_CATS = (*NESTED_CATEGORIES, "python_function")


def file_steps(ev: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Steps of one rank's events (columns STEP_COLUMNS without ``rank``) and a fallback warning."""
    complete = (ev["ph"] == "X").to_numpy()
    ts, end = ev["ts_us"].to_numpy(), (ev["ts_us"] + ev["dur_us"]).to_numpy()
    marked = complete & starts_with(ev["name"], "ProfilerStep#") & ev["cat"].isin(["cpu_op", "user_annotation"]).to_numpy()
    host = complete & ev["cat"].isin(_HOST_CATS).to_numpy()
    if marked.any():
        numbers = ev["name"][marked].astype(str).str.slice(len("ProfilerStep#")).map(_step_number)
        table = _table(numbers, ts[marked], end[marked], "ProfilerStep")
        if len(table) >= 2 and host.any() and table["dur_us"].sum() < MARKER_SHARE * (end[host].max() - ts[host].min()):
            return _from_markers(table, float(end[host].max()))
        return table, overlap_note(table)
    if not host.any():
        return _empty(), "no host events, so no steps"
    first, last = ts[host].min(), end[host].max()
    loader = host & starts_with(ev["name"], "enumerate(DataLoader)")
    if loader.sum() >= 2:
        starts = np.sort(ts[loader])
        return _table(range(len(starts)), starts, np.append(starts[1:], last), "dataloader"), (
            "no ProfilerStep# events: steps start at each enumerate(DataLoader) annotation; "
            "record with a torch.profiler schedule and prof.step() for exact steps")
    optim = host & starts_with(ev["name"], "Optimizer.step#")
    if optim.sum() >= 2:
        ends = np.sort(end[optim])
        return _table(range(len(ends)), np.insert(ends[:-1], 0, first), ends, "optimizer"), (
            "no ProfilerStep# events: steps end at each Optimizer.step; "
            "record with a torch.profiler schedule and prof.step() for exact steps")
    return _table([0], [first], [last], "whole trace"), (
        "no ProfilerStep# events and no DataLoader/Optimizer.step annotations: the whole trace is one step; "
        "call prof.step() once per training step when profiling")


def _from_markers(markers: pd.DataFrame, last: float) -> tuple[pd.DataFrame, str]:
    """Steps from ``ProfilerStep#`` markers: each from its marker to the next, the last to ``last`` (us)."""
    starts = markers["start_us"].to_numpy()
    table = _table(markers["step"], starts, np.append(starts[1:], max(last, starts[-1])), "ProfilerStep markers")
    return table, (f"the {len(markers)} ProfilerStep# ranges last {markers['dur_us'].sum() / 1e3:,.3f} ms together, "
                   f"under {MARKER_SHARE:.0%} of the host's activity: they are markers, so each step runs from one to "
                   "the next (the last to the trace's last host event)")


def overlap_note(table: pd.DataFrame) -> str:
    """A warning when ``ProfilerStep#`` windows repeat a number or overlap the next window ("" when neither):
    per-step figures then count the shared time in more than one step."""
    repeated = table["step"][table["step"].duplicated()].unique()
    overlapping = int((table["start_us"].to_numpy()[1:] < table["end_us"].to_numpy()[:-1]).sum())
    if not len(repeated) and not overlapping:
        return ""
    parts = ([f"{overlapping} ProfilerStep# window(s) overlap the next"] if overlapping else []) + (
        [f"ProfilerStep#{int(repeated[0])} appears more than once"] if len(repeated) else [])
    return (f"{' and '.join(parts)}: steps should follow one another, so per-step figures count the shared time in "
            "more than one step; was prof.step() called from two threads, or a profiler started inside another? "
            "Read per-step numbers with care")


def _step_number(text: str) -> int:
    """N of ``ProfilerStep#N``; -1 when it is not a whole number in int64 (``#99999999999999999999999``)."""
    try:
        number = int(text)
    except ValueError:
        return -1
    return number if 0 <= number <= 2**63 - 1 else -1


def _table(numbers, starts, ends, source: str) -> pd.DataFrame:
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    order = np.argsort(starts, kind="stable")
    frame = pd.DataFrame({
        "step": np.asarray(list(numbers), dtype=np.int64)[order],
        "start_us": starts[order],
        "end_us": ends[order],
    })
    frame["dur_us"] = frame["end_us"] - frame["start_us"]
    frame["source"] = source
    return frame.reset_index(drop=True)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({"step": pd.Series(dtype=np.int64), "start_us": pd.Series(dtype=np.float64),
                         "end_us": pd.Series(dtype=np.float64), "dur_us": pd.Series(dtype=np.float64),
                         "source": pd.Series(dtype=object)})


def locate(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Position of the window [start, end) holding each time of ``t``, -1 outside every window.
    ``starts`` must be sorted and the windows must not overlap (as steps never do); times in us."""
    t = np.asarray(t, dtype=np.float64)
    if len(starts) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    pos = np.clip(np.searchsorted(starts, t, side="right") - 1, 0, None)
    inside = (t >= starts[pos]) & (t < ends[pos])
    return np.where(inside, pos, -1).astype(np.int64)


def window_index(windows: pd.DataFrame, ts_us: pd.Series, rank: pd.Series) -> np.ndarray:
    """Row label of ``windows`` (``rank``, ``start_us``, ``end_us``) holding each timestamp of the same
    rank, -1 outside every window. For events that have no ``step`` column value (GPU-side events)."""
    out = np.full(len(ts_us), -1, dtype=np.int64)
    t_all, r_all = ts_us.to_numpy(dtype=np.float64), rank.to_numpy()
    for r, grp in windows.groupby("rank", sort=False):
        mask = r_all == r
        if mask.any():
            grp = grp.sort_values("start_us", kind="stable")
            where = locate(grp["start_us"].to_numpy(), grp["end_us"].to_numpy(), t_all[mask])
            out[np.flatnonzero(mask)] = np.where(where >= 0, grp.index.to_numpy()[np.clip(where, 0, None)], -1)
    return out


def step_windows(trace) -> pd.DataFrame:
    """Step windows (rank, step, start_us, end_us, dur_us) to compute per-step numbers over.

    ``trace.steps``, except that a "whole trace" fallback step (which spans host events only) is
    widened to the rank's GPU activity too, so GPU work that ends after the last host call counts.
    A trace with no steps at all gets one window per rank spanning its events (step -1).
    """
    return trace.derived("step_windows", _step_windows).copy()


def _step_windows(trace) -> pd.DataFrame:
    steps = trace.steps
    if len(steps):
        windows = steps[["rank", "step", "start_us", "end_us"]].reset_index(drop=True)
        whole = (steps["source"] == "whole trace").to_numpy()
        span = _activity_span(trace) if whole.any() else None
        if whole.any() and len(span):
            bounds = span.set_index("rank").reindex(windows["rank"])
            windows.loc[whole, "start_us"] = np.fmin(windows["start_us"], bounds["start_us"].to_numpy())[whole]
            windows.loc[whole, "end_us"] = np.fmax(windows["end_us"], bounds["end_us"].to_numpy())[whole]
    else:
        windows = _activity_span(trace).assign(step=-1)[["rank", "step", "start_us", "end_us"]]
    return windows.assign(dur_us=windows["end_us"] - windows["start_us"]).reset_index(drop=True)

# A first or last step shorter than this share of the shortest of its rank's other steps is a stub
# (perfkit rule: a profiler window cut a step short; real steps of one loop vary far less).
STUB_SHARE = 0.10


def stub_steps(windows: pd.DataFrame, share: float = STUB_SHARE) -> np.ndarray:
    """Boolean per row of ``windows`` (``step_windows``): is it a **stub**, a partial step at the
    edge of the profiler window? ``prof.step()`` opens ``ProfilerStep#N`` and the profiler stops
    microseconds later (an 18 us step beside 5 ms ones), or the first step starts mid-way; counted
    as a step, it halves every per-step number of a two-step trace. A step is a stub when it is the
    first or last step of its rank, the rank has other steps, and it lasts less than ``share`` of
    the shortest of those (not their median: a step that compiles for 26 s beside 245 ms steps must
    not make a 245 ms step look partial)."""
    out = np.zeros(len(windows), dtype=bool)
    for _, grp in windows.groupby("rank", sort=False):
        if len(grp) < 2:
            continue
        order = grp.sort_values("start_us").index.to_numpy()
        for edge in {order[0], order[-1]}:
            others = grp["dur_us"].drop(edge)
            out[windows.index.get_loc(edge)] = grp.at[edge, "dur_us"] < share * float(others.min())
    return out


def full_steps(windows: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``windows`` (``trace.steps`` or ``step_windows``) that are not stubs (:func:`stub_steps`),
    index kept: the steps per-step figures are taken over."""
    return windows[~stub_steps(windows)] if len(windows) else windows


def listed_steps(windows: pd.DataFrame) -> str:
    """Rows of ``step_windows`` as "step 2 (49 us), step 9 (1.204 ms)"."""
    return ", ".join(f"step {int(s)} ({us_text(d)})" for s, d in zip(windows["step"], windows["dur_us"]))


def stub_note(stubs: pd.DataFrame, n_full: int) -> str:
    """One line naming the stub windows left out of per-step figures (``stubs``: rows of
    ``step_windows``), or "" when there are none."""
    if stubs.empty:
        return ""
    return (f"dropped {len(stubs)} partial step(s) at the edge of the profiler window: {listed_steps(stubs)}, "
            f"each under {STUB_SHARE:.0%} of the shortest other step of its rank; per-step numbers use the "
            f"{n_full} full step(s)")


def full_step_windows(trace) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """``step_windows(trace)`` without its stubs (see :func:`stub_steps`), index reset: the windows
    to divide per-step figures by; and the warnings to add, the :func:`stub_note` naming what was
    left out (none when nothing was)."""
    windows = step_windows(trace)
    stub = stub_steps(windows)
    full = windows[~stub].reset_index(drop=True)
    note = stub_note(windows[stub], len(full))
    return full, (note,) if note else ()


def step_rows(windows: pd.DataFrame, host: pd.DataFrame) -> np.ndarray:
    """Row label of ``windows`` (from ``step_windows``) holding each host event, from the events'
    ``rank`` and ``step`` columns (a trace without steps has one window per rank, step -1); -1 outside
    every window. GPU-side events have no step: use ``trace.steps.window_index`` for them."""
    keys = windows[["rank", "step"]].astype(np.int64).reset_index(names="window").drop_duplicates(["rank", "step"])
    left = pd.DataFrame({"rank": host["rank"].to_numpy(dtype=np.int64), "step": host["step"].to_numpy(dtype=np.int64)})
    return left.merge(keys, on=["rank", "step"], how="left")["window"].fillna(-1).to_numpy(dtype=np.int64)


def _activity_span(trace) -> pd.DataFrame:
    """First start and last end of host and GPU events per rank."""
    ev = trace.events
    rows = np.flatnonzero((ev["ph"] == "X").to_numpy()
                          & ev["cat"].isin([*_HOST_CATS, *GPU_CATEGORIES]).to_numpy())
    if len(rows) == 0:
        return pd.DataFrame({"rank": pd.Series(dtype=np.int64), "start_us": pd.Series(dtype=float),
                             "end_us": pd.Series(dtype=float)})
    # Three columns of the matching rows, not the whole table: this runs on every per-step analysis.
    start = ev["ts_us"].to_numpy()[rows]
    span = pd.DataFrame({"rank": ev["rank"].to_numpy()[rows], "start_us": start,
                         "end_us": start + ev["dur_us"].to_numpy()[rows]})
    return span.groupby("rank").agg(start_us=("start_us", "min"), end_us=("end_us", "max")).reset_index()


def before_window(gpu: pd.DataFrame, launched: np.ndarray) -> np.ndarray:
    """Which GPU events (rows of ``gpu``: ``rank``, ``device``, ``ts_us``) were launched before the profiler's
    window: no launch call in the trace (``launched`` False) and starting before the first launched event of
    their GPU, whose queue they ran ahead of (the previous step's tail: 509 of an H100 Qwen trace's 1,707 GPU
    events, 13.7 ms). A GPU none of whose events has a launch in the trace (no correlation ids) is left alone."""
    launched = np.asarray(launched, dtype=bool)
    out = np.zeros(len(gpu), dtype=bool)
    if not len(gpu) or launched.all():
        return out
    keys = gpu["rank"].astype(np.int64).to_numpy() * 65_536 + gpu["device"].astype(np.int64).to_numpy()
    ts = gpu["ts_us"].to_numpy(dtype=np.float64)
    for key in np.unique(keys):
        mine = keys == key
        if not (launched & mine).any():
            continue
        first = ts[launched & mine].min()
        out |= mine & ~launched & (ts < first)
    return out


def before_window_events(trace) -> pd.Index:
    """Labels in ``trace.events`` of the GPU events (kernels, copies, memsets) launched before the profiler's window
    (:func:`before_window`): the one rule of the work no step owns, read by every command that counts GPU work."""
    return trace.derived("before_window_events", _before_window_events)


def _before_window_events(trace) -> pd.Index:
    gpu = trace.gpu_events()
    launched = gpu.index.isin(trace.launches(GPU_CATEGORIES)["gpu_index"].to_numpy())
    return gpu.index[before_window(gpu, launched)]


def launch_windows(trace, windows: pd.DataFrame, gpu: pd.DataFrame) -> np.ndarray:
    """Row label of ``windows`` (``step_windows``) that each GPU event of ``gpu`` (rows of ``trace.events``) belongs
    to: the window of the step whose host launched it (its launch call's rank and step), wherever it ran on the
    GPU's timeline; an event with no launch call in the trace, the window holding its start; -1 for work launched
    before the profiler's window (:func:`before_window_events`) and outside every window."""
    out = window_index(windows, gpu["ts_us"], gpu["rank"])
    links = trace.launches(GPU_CATEGORIES).drop_duplicates("gpu_index").set_index("gpu_index")["cpu_index"]
    cpu = links.reindex(gpu.index)
    launched = cpu.notna().to_numpy()
    if launched.any():
        out[launched] = step_rows(windows, trace.events.loc[cpu[launched].astype(np.int64), ["rank", "step"]])
    out[gpu.index.isin(before_window_events(trace))] = -1
    return out
