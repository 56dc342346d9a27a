"""One site per call site: the user frame's line made a stable key, and torch's own sites told apart.

Kineto names a Python frame ``file(line): func`` with the line the frame was on when the profiler's
Python tracer first saw it. For a call that began while the tracer ran that is the function's first
line; for a frame already running when the profiler started (the loop's own function, the script's
``<module>``) it is the line being executed then. One function can so carry two lines in one trace
(``train.py(14): train_epoch`` for the epoch running at the start, ``train.py(8): train_epoch`` for
the next), which split one ``.item()`` into two sites. :func:`canonical_lines` gives such a frame
the first line of the same function seen elsewhere in the trace, and marks ``running_line`` where
none was seen (the line shown is then the one running at the start, not the function's first).

A *torch-internal* entry is one issued two or more torch calls deep (``opt.step()`` reaching Adam's
``torch/optim/optimizer.py: _get_value``, which reads its step count), not by a torch function the
code called (``torch.cuda.synchronize()``) nor a Tensor method written in Python (``torch/_tensor.py``:
``f"{loss:.3f}"`` is the user's read): the user's own call sites rank before them
(:func:`perfkit.analysis.sync_points.result.site_table`).
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...trace.ancestry import enclosing
from ..stacks import TORCH_PACKAGES, parse_frame

# A path inside a torch package: relative to its sys.path entry (as Kineto writes it) or under site-packages.
_TORCH_PATH = re.compile(rf"^(?:.*[/-]packages/)?(?:{'|'.join(TORCH_PACKAGES)})/")
# Tensor methods written in Python (``f"{loss:.3f}"``, ``print(t)``, ``float(t)``): the user's own call.
_SPAN_COLUMNS = ["file_id", "pid", "tid", "ts_us", "dur_us"]  # what finding an event's innermost frame reads
_TENSOR_METHODS = re.compile(r"(?:^|/)torch/_tensor(?:_str)?\.py$")


def frames_running_at_start(trace) -> set[str]:
    """Names of the python_function frames that were already running when the Python tracer started.
    The tracer writes each thread's stack at once, outermost first, before it records any op: the
    thread's first frame, when it starts before the first op or annotation of its trace file, and each
    next frame (in start order) that is the child of the one before. A thread that starts later (the
    autograd engine's) has no such stack."""
    ev = trace.events
    rows = ((ev["cat"] == "python_function") & (ev["ph"] == "X")).to_numpy()
    if not rows.any():
        return set()
    ops = ev.loc[(ev["cat"].isin(("cpu_op", "user_annotation")) & (ev["ph"] == "X")).to_numpy()]
    first_op = ops.groupby("file_id")["ts_us"].min().to_dict()
    frames = ev.loc[rows, ["name", "ts_us", "python_id", "file_id", "pid", "tid", "parent"]]
    frames = frames.sort_values(["ts_us", "python_id"], kind="stable")
    out: set[str] = set()
    for (file_id, _, _), thread in frames.groupby(["file_id", "pid", "tid"], observed=True, sort=False):
        if thread["ts_us"].iat[0] >= first_op.get(file_id, np.inf):
            continue
        labels, parents = thread.index.to_numpy(), thread["parent"].to_numpy()
        n = 1
        while n < len(labels) and parents[n] == labels[n - 1]:
            n += 1
        out.update(thread["name"].iloc[:n].astype(str))
    return out


def canonical_lines(trace, frames: pd.DataFrame) -> pd.DataFrame:
    """``frames`` (``frame``, ``file``, ``line``, ``func`` per entry) with ``line`` made one per call site
    and ``running_line`` added (see the module doc): a user frame running when the profiler started
    takes the nearest first line at or above its own of a call of that function (file and name) that
    began in the trace; without one, the smallest line of that function's running frames."""
    running = frames_running_at_start(trace)
    is_running = frames["frame"].isin(running).to_numpy() & frames["line"].notna().to_numpy()
    out = frames.assign(running_line=is_running)
    if not is_running.any():
        return out
    starts = _first_lines(trace, running)
    lines = out["line"].astype("Int64").to_numpy(dtype=object, na_value=None)
    keys = list(zip(out["file"], out["func"]))
    lowest: dict = {}
    for key, line, run in zip(keys, lines, is_running):
        if run:
            lowest[key] = min(line, lowest.get(key, line))
    for i in np.flatnonzero(is_running):
        below = [s for s in starts.get(keys[i], ()) if s <= lines[i]]
        lines[i], is_running[i] = (max(below), False) if below else (lowest[keys[i]], True)
    return out.assign(line=pd.array(lines, dtype="Int64"), running_line=is_running)


def _first_lines(trace, running: set[str]) -> dict:
    """(file, func) -> first lines of the calls of that function that began while the tracer ran."""
    ev = trace.events
    out: dict = {}
    for name in map(str, pd.unique(ev.loc[(ev["cat"] == "python_function").to_numpy(), "name"])):
        parsed = None if name in running else parse_frame(name)
        if parsed is not None:
            out.setdefault((parsed[0], parsed[2]), []).append(parsed[1])
    return out


def torch_internal(trace, events: pd.DataFrame, frames: pd.DataFrame) -> np.ndarray:
    """Whether each entry (rows of ``trace.events``; ``frames``: their ``user_frames``) was issued inside
    torch's own code: two or more torch frames (:func:`in_torch`) run between it and the nearest other
    frame with a file. ``opt.step()`` reaching Adam's ``_get_value`` is; the user's own
    ``torch.cuda.synchronize()`` (one torch frame) is not, nor a ``.to()`` a model's code issued
    through ``torch.device``'s function mode."""
    candidates = np.flatnonzero(in_torch(frames["inner_file"]))
    out = np.zeros(len(events), dtype=bool)
    if not len(candidates):
        return out
    ev = trace.events
    rows = ((ev["cat"] == "python_function") & (ev["ph"] == "X")).to_numpy()
    starts = enclosing(ev.loc[rows, _SPAN_COLUMNS], events.iloc[candidates]).to_numpy()
    out[candidates] = [_torch_frames_above(ev, int(start)) >= 2 for start in starts]
    return out


def _torch_frames_above(ev: pd.DataFrame, label: int, limit: int = 1000) -> int:
    """Torch frames from frame ``label`` upward (along ``parent``) before the first other frame with a file."""
    calls = 0
    while label >= 0 and limit > 0:
        parsed = parse_frame(str(ev.at[label, "name"]))
        if parsed is not None:
            if not _is_torch(parsed[0]):
                return calls
            calls += 1
        label, limit = int(ev.at[label, "parent"]), limit - 1
    return calls


def in_torch(files: pd.Series) -> np.ndarray:
    """Whether each frame file ("" or None for none) is torch's own code (:func:`_is_torch`)."""
    return np.fromiter((_is_torch(f) for f in files.fillna("").astype(str)), dtype=bool, count=len(files))


def _is_torch(path: str) -> bool:
    """A file of a torch package, Tensor methods written in Python left out (``torch/_tensor.py``,
    ``torch/_tensor_str.py``: ``f"{loss:.3f}"`` is the user's read)."""
    path = path.replace("\\", "/")
    return bool(_TORCH_PATH.match(path)) and not _TENSOR_METHODS.search(path)
