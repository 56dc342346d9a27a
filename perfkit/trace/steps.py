"""Profiler steps: the windows that per-step numbers are computed over.

Where the trace has them, steps are the ``ProfilerStep#N`` events that ``prof.step()`` writes.
Fallbacks, in order, for traces recorded without a profiler schedule:

1. ``dataloader``: each ``enumerate(DataLoader)...`` annotation starts a step that lasts until the
   next one starts (the last ends at the end of the host activity of its rank);
2. ``optimizer``: each ``Optimizer.step#...`` annotation ends a step that began where the previous
   one ended (the first begins at the first host event);
3. ``whole trace``: one step spanning all events of the rank, with a warning that per-step numbers
   are whole-trace numbers.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

STEP_COLUMNS = ["rank", "step", "start_us", "end_us", "dur_us", "source"]
_HOST_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")


def file_steps(ev: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Steps of one rank's events (columns STEP_COLUMNS without ``rank``) and a fallback warning."""
    complete = (ev["ph"] == "X").to_numpy()
    ts, end = ev["ts_us"].to_numpy(), (ev["ts_us"] + ev["dur_us"]).to_numpy()
    marked = complete & _name_startswith(ev, "ProfilerStep#") & ev["cat"].isin(["cpu_op", "user_annotation"]).to_numpy()
    if marked.any():
        numbers = ev["name"][marked].astype(str).str.slice(len("ProfilerStep#")).map(_step_number)
        return _table(numbers, ts[marked], end[marked], "ProfilerStep"), ""
    host = complete & ev["cat"].isin(_HOST_CATS).to_numpy()
    if not host.any():
        return _empty(), "no host events, so no steps"
    first, last = ts[host].min(), end[host].max()
    loader = host & _name_startswith(ev, "enumerate(DataLoader)")
    if loader.sum() >= 2:
        starts = np.sort(ts[loader])
        return _table(range(len(starts)), starts, np.append(starts[1:], last), "dataloader"), (
            "no ProfilerStep# events: steps start at each enumerate(DataLoader) annotation; "
            "record with a torch.profiler schedule and prof.step() for exact steps")
    optim = host & _name_startswith(ev, "Optimizer.step#")
    if optim.sum() >= 2:
        ends = np.sort(end[optim])
        return _table(range(len(ends)), np.insert(ends[:-1], 0, first), ends, "optimizer"), (
            "no ProfilerStep# events: steps end at each Optimizer.step; "
            "record with a torch.profiler schedule and prof.step() for exact steps")
    return _table([0], [first], [last], "whole trace"), (
        "no ProfilerStep# events and no DataLoader/Optimizer.step annotations: the whole trace is one step; "
        "call prof.step() once per training step when profiling")


def _name_startswith(frame: pd.DataFrame, prefix: str) -> np.ndarray:
    """Prefix test on the categories of the name column: one string test per distinct name."""
    names = frame["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.cat.codes.to_numpy()
        hits = np.asarray(names.cat.categories.str.startswith(prefix), dtype=bool)
        return hits[codes] & (codes >= 0)
    return names.astype(str).str.startswith(prefix).to_numpy()


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
