"""Chrome ``B``/``E`` duration events, paired into complete (``X``) events at load time.

Kineto writes complete events, but other Chrome-trace writers (and hand-made traces) mark a
duration with a begin event and a matching end event on the same thread. The column builder keeps
both phases (:mod:`perfkit.trace.loader.columns`); :func:`pair_durations` then walks each thread (pid, tid)
in time order with a stack, as the Trace Event Format specifies: an ``E`` closes the innermost open
``B`` of its thread. Each pair becomes one ``X`` row at the ``B`` row (its name, category and
arguments, ``dur_us`` = end - begin); the ``E`` rows go. A ``B`` never closed or an ``E`` with
nothing open is dropped and counted in a warning, so a cut-off or hand-edited trace is not
summarized as if it were whole.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def pair_durations(events: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``events`` with its ``B``/``E`` pairs turned into ``X`` rows, and the warnings for the
    unbalanced ones. Returns ``events`` itself when it has no ``B`` or ``E`` row."""
    if not {"B", "E"} & set(events["ph"].cat.categories):  # the usual case, decided on the categories
        return events, []
    phase = events["ph"].astype(str).to_numpy()
    begin, end = phase == "B", phase == "E"
    rows = np.flatnonzero(begin | end)
    codes = pd.MultiIndex.from_arrays([events["pid"].to_numpy()[rows], events["tid"].to_numpy()[rows]]).codes
    thread = np.asarray(codes[0], dtype=np.int64) * (int(np.max(codes[1])) + 1) + np.asarray(codes[1])
    ts = events["ts_us"].to_numpy()[rows]
    order = np.lexsort((rows, ts, thread))
    dur, unclosed, stray = _walk(rows[order], begin[rows[order]], ts[order], thread[order])
    paired = np.fromiter(dur, dtype=np.int64, count=len(dur))
    durations = events["dur_us"].to_numpy(copy=True)
    durations[paired] = np.fromiter(dur.values(), dtype=np.float64, count=len(dur))
    keep = ~(begin | end)
    keep[paired] = True
    phase = np.where(begin, "X", phase)[keep]
    out = events.assign(dur_us=durations)[keep].reset_index(drop=True)
    out["ph"] = pd.Categorical(phase, categories=pd.Index(sorted(set(phase)), dtype="str"))
    return out, _warnings(len(dur), unclosed, stray)


def _walk(rows: np.ndarray, is_begin: np.ndarray, ts: np.ndarray, thread: np.ndarray):
    """({begin row: duration}, unclosed begins, ends with nothing open) over rows sorted by thread,
    then time, then file order."""
    dur: dict[int, float] = {}
    stack: list[int] = []
    unclosed = stray = 0
    current = None
    for row, opens, t, th in zip(rows.tolist(), is_begin.tolist(), ts.tolist(), thread.tolist()):
        if th != current:
            unclosed += len(stack)
            stack, current = [], th
        if opens:
            stack.append((row, t))
        elif stack:
            start_row, start = stack.pop()
            dur[start_row] = t - start
        else:
            stray += 1
    return dur, unclosed + len(stack), stray


def _warnings(pairs: int, unclosed: int, stray: int) -> list[str]:
    if not (unclosed or stray):
        return []
    return [f"{pairs:,} B/E duration pairs read; dropped {unclosed:,} 'B' events never closed by an 'E' and "
            f"{stray:,} 'E' events with no open 'B' on their thread (a cut-off or edited trace?)"]
