"""What each collective moved: ``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``Group size``,
``Process Group Ranks`` and ``dtype``, as PyTorch records them (``record_shapes`` not needed).

PyTorch writes these arguments on the ``record_param_comms`` op that wraps each c10d call and, from
2.1 or so, on the NCCL/RCCL kernel itself. The events table leaves them out (see :mod:`.shapes`), so
:func:`comm_args` reads them on demand: one decode of the file's text, only when the text holds
``"Collective name"`` at all (most traces do not: a byte search, no decode). Rows are matched to
``Trace.events`` by (pid, tid, ts, name), as :func:`.shapes.op_shapes` matches shapes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Union

import msgspec
import numpy as np
import pandas as pd

from ...errors import TraceError
from .decode import gc_paused
from .shapes import match_rows
from .stream import read_text

COMM_COLUMNS = ("collective", "dtype", "in_nelems", "out_nelems", "group_size", "group_ranks")
_MARKER = b'"Collective name"'
_Value = Union[int, float, str, None]


class _Args(msgspec.Struct, gc=False):
    collective: _Value = msgspec.field(default=None, name="Collective name")
    in_nelems: _Value = msgspec.field(default=None, name="In msg nelems")
    out_nelems: _Value = msgspec.field(default=None, name="Out msg nelems")
    group_size: _Value = msgspec.field(default=None, name="Group size")
    group_ranks: _Value = msgspec.field(default=None, name="Process Group Ranks")
    dtype: _Value = None


class _Event(msgspec.Struct, gc=False):
    name: _Value = ""
    ts: _Value = None
    pid: _Value = ""
    tid: _Value = ""
    args: Union[_Args, None] = None


class _File(msgspec.Struct, gc=False):
    traceEvents: list[_Event] = []


_OBJECT = msgspec.json.Decoder(_File)
_ARRAY = msgspec.json.Decoder(list[_Event])


def comm_args(trace) -> pd.DataFrame:
    """One row per event of ``trace`` (kernel or op) that records a collective, indexed by its label in
    ``trace.events``: ``collective`` (as recorded: "allreduce", "_allgather_base", ...), ``dtype``
    ("Float", "BFloat16", ...), ``in_nelems``, ``out_nelems``, ``group_size`` (floats, NaN where absent),
    ``group_ranks`` (the group's global ranks as recorded, "[0, 1, 2, 3]"; "" where absent).
    Empty when no event records one. Raises TraceError when a source file can no longer be read."""
    ev = trace.events
    parts = []
    for file_id, tf in enumerate(trace.files):
        table = file_comm_args(Path(tf.path))
        if not table.empty:
            parts.append(match_rows(ev[ev["file_id"].to_numpy() == file_id], table, COMM_COLUMNS))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("collective", "dtype", "group_ranks") else np.float64)
                             for c in COMM_COLUMNS})
    return pd.concat(parts).sort_index()


def file_comm_args(path: Path) -> pd.DataFrame:
    """The events of one trace file that record a collective: pid, tid, name (categories), ts (float,
    us) and ``COMM_COLUMNS``."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise TraceError(path, f"cannot read the file for its collectives' sizes ({exc.strerror or exc})",
                         "Check that it still exists and that you may read it") from None
    if _MARKER not in text:
        return pd.DataFrame(columns=["pid", "tid", "ts", "name", *COMM_COLUMNS])
    try:
        with gc_paused():
            events = _ARRAY.decode(text) if text.lstrip()[:1] == b"[" else _OBJECT.decode(text).traceEvents
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"cannot read its collectives' sizes ({exc})",
                         "Load it with load_trace first to see why") from None
    rows = [e for e in events if e.args is not None and e.args.collective and isinstance(e.ts, (int, float))]
    frame = pd.DataFrame({
        "pid": pd.Categorical([str(e.pid) for e in rows]), "tid": pd.Categorical([str(e.tid) for e in rows]),
        "ts": np.array([float(e.ts) for e in rows], dtype=np.float64),
        "name": pd.Categorical([str(e.name) for e in rows]),
        "collective": [str(e.args.collective) for e in rows], "dtype": [str(e.args.dtype or "") for e in rows],
        "group_ranks": [str(e.args.group_ranks or "") for e in rows]})
    for col in ("in_nelems", "out_nelems", "group_size"):
        frame[col] = [_count(getattr(e.args, col)) for e in rows]
    return frame


def _count(value) -> float:
    """A recorded element count as a float; NaN for an absent, negative or non-numeric one."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return out if np.isfinite(out) and out >= 0 else float("nan")
