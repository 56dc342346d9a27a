"""Host threads of a trace, identified by (file, pid, tid).

``thread_codes`` numbers the threads of ``Trace.events`` (categorical pid/tid), so codes are equal
across subsets of one table (``event_threads``: those of the whole table, built once per trace);
``thread_key`` numbers the threads of any frame (pid/tid of any dtype), equal only within that frame.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def thread_codes(events: pd.DataFrame) -> np.ndarray:
    """One int64 per row: the (file, pid, tid) thread of the event, equal across subsets of one table."""
    pid = np.asarray(events["pid"].cat.codes, dtype=np.int64) if hasattr(events["pid"], "cat") else \
        pd.factorize(events["pid"].astype(str))[0].astype(np.int64)
    tid = np.asarray(events["tid"].cat.codes, dtype=np.int64) if hasattr(events["tid"], "cat") else \
        pd.factorize(events["tid"].astype(str))[0].astype(np.int64)
    return (events["file_id"].to_numpy(dtype=np.int64) << 42) | (pid << 21) | tid


def event_threads(trace) -> np.ndarray:
    """``thread_codes`` of every row of ``trace.events``, built once per trace (several analyses of
    one command ask for it); read-only, as it is shared."""
    def build(t) -> np.ndarray:
        codes = thread_codes(t.events)
        codes.flags.writeable = False
        return codes
    return trace.derived("event_threads", build)


def thread_key(frame: pd.DataFrame) -> np.ndarray:
    """One integer per (file, pid, tid) thread of ``frame``'s rows (pid and tid compared as text),
    numbered in order of first appearance."""
    if frame.empty:
        return np.zeros(0, dtype=np.int64)
    pid, tid = _text_codes(frame["pid"]), _text_codes(frame["tid"])
    if pid is not None and tid is not None:
        combined = (frame["file_id"].to_numpy(dtype=np.int64) << 42) | (pid << 21) | tid
        return pd.factorize(combined)[0].astype(np.int64)
    keys = frame[["file_id", "pid", "tid"]].astype({"pid": str, "tid": str})
    return keys.groupby(["file_id", "pid", "tid"], sort=False).ngroup().to_numpy()


def _text_codes(column: pd.Series) -> np.ndarray | None:
    """Integer codes equal where the values' text is equal, from a categorical's codes (its few
    categories made text, not its rows); None for a column without categories or with missing values."""
    if not isinstance(column.dtype, pd.CategoricalDtype) or len(column.cat.categories) >= 1 << 21:
        return None
    codes = column.cat.codes.to_numpy()
    if (codes < 0).any():
        return None
    return pd.factorize(column.cat.categories.astype(str))[0].astype(np.int64)[codes]
