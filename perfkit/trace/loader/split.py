"""One file holding several ranks, split into one part per rank.

Trace merging tools put the ranks of a run into one Chrome trace by moving each rank's processes
apart: TraceFusion (and HTA's trace merging) writes ``pid = rank * 100000000 + pid``. Loaded as one
file, such a trace would be one rank whose "steps" overlap and whose collectives wait on
themselves. :func:`split_merged_ranks` finds that layout (numeric pids of at least 10**8 whose
quotients by 10**8 differ) and returns one part per rank, each with its own steps and nesting, as
if each rank had been its own file; the loader then gives each part a rank and a ``Trace.files``
entry like the files of a directory (:func:`perfkit.trace.loader.jobs.assign_ranks`). Events that name
their rank only in ``args.rank`` (several values in one file) cannot be told apart by thread and
are refused (:func:`refuse_arg_ranks`), as is a folder holding one rank's file twice, plain and
gzipped (:func:`refuse_plain_and_gzip`), which would be read as two ranks.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import TraceError
from ...limits import RANK_RANGE
from ..nesting import add_nesting
from ..schema import EVENT_COLUMNS
from ..steps import file_steps
from .values import short_repr

PID_STRIDE = 100_000_000  # TraceFusion's rank offset of a pid


def split_merged_ranks(events: pd.DataFrame, flows: pd.DataFrame, meta: dict) -> list[tuple]:
    """``[(events, flows, meta)]`` per rank found in one file's tables (the input itself, alone,
    when the file holds one rank). Each part's ``meta["rank"]`` is its rank, with its own steps and
    a warning that says the file was split; events and flows whose pid is not a number go to the
    lowest rank."""
    rank_of_pid = _pid_ranks(events["pid"])
    if rank_of_pid is None:
        return [(events, flows, meta)]
    ranks = sorted(set(rank_of_pid.values()))
    event_rank = _ranks_of(events["pid"], rank_of_pid, ranks[0])
    flow_rank = _ranks_of(flows["pid"], rank_of_pid, ranks[0])
    note = (f"holds {len(ranks)} ranks merged into one file (pid = rank * {PID_STRIDE:,} + pid, as TraceFusion "
            f"writes): split into ranks {_listed(ranks)}")
    return [_part(events[event_rank == r], flows[flow_rank == r], meta, r, note if i == 0 else None)
            for i, r in enumerate(ranks)]


def refuse_arg_ranks(path, events: pd.DataFrame, ranks: set) -> None:
    """Events whose ``args.rank`` differ come from several ranks; only TraceFusion's pid layout
    tells which event is whose (:mod:`perfkit.trace.loader.split`), so any other such file is refused."""
    ranks = {str(r) for r in ranks}  # 0 and "0" are one rank
    if len(ranks) > 1 and not is_merged(events["pid"]):
        shown = ", ".join(sorted(map(short_repr, ranks))[:4])
        raise TraceError(path, f"its events carry different args.rank values ({shown}): several ranks merged into one "
                         "file, which perfkit splits only by TraceFusion's pid = rank * 100000000 + pid",
                         "Load the per-rank files instead")


def is_merged(pids: pd.Series) -> bool:
    """Whether a file's pids follow TraceFusion's layout of several ranks (see the module doc)."""
    return _pid_ranks(pids) is not None


def _pid_ranks(pids: pd.Series) -> dict | None:
    """{pid: rank} when numeric pids of at least PID_STRIDE spread over two ranks or more, else None."""
    names = pids.cat.categories if isinstance(pids.dtype, pd.CategoricalDtype) else pd.unique(pids.astype(str))
    numbers = pd.to_numeric(pd.Series(names, dtype=object), errors="coerce")
    whole = numbers.notna() & (numbers >= 0) & (numbers % 1 == 0)
    if not (numbers[whole] >= PID_STRIDE).any():
        return None
    ranks = {str(n): int(v // PID_STRIDE) for n, v, ok in zip(names, numbers, whole) if ok}
    ranks = {n: r for n, r in ranks.items() if RANK_RANGE[0] <= r <= RANK_RANGE[1]}
    return ranks if len(set(ranks.values())) > 1 else None


def _ranks_of(pids: pd.Series, rank_of_pid: dict, default: int) -> np.ndarray:
    return pids.astype(str).map(rank_of_pid).fillna(default).to_numpy(dtype=np.int64)


def _part(events: pd.DataFrame, flows: pd.DataFrame, meta: dict, rank: int, note: str | None) -> tuple:
    """One rank's rows, re-indexed, with its own steps and call nesting (``note``: the warning
    that the file was split, on its first part only)."""
    events = events[list(EVENT_COLUMNS)].reset_index(drop=True).assign(rank=np.int32(rank))
    steps, step_warning = file_steps(events)
    add_nesting(events, steps)
    part_meta = dict(meta, rank=rank, steps=steps.to_dict(orient="list"), step_warning=step_warning,
                     warnings=[*meta["warnings"], *([note] if note else [])])
    return events, flows.reset_index(drop=True), part_meta


def _listed(ranks: list) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" ... ({len(ranks)} in all)" if len(ranks) > 8 else "")


def refuse_plain_and_gzip(folder: Path, entries: list[Path]) -> list[Path]:
    """``entries`` (the trace files of ``folder``) unchanged; TraceError when one of them is there
    both plain and gzipped (``rank0.json`` and ``rank0.json.gz``): read as two ranks, every count
    of the run would be doubled (``perfkit sql`` counted it twice)."""
    names = {p.name for p in entries}
    twice = [p.name for p in entries if p.name.endswith(".json") and f"{p.name}.gz" in names]
    if twice:
        raise TraceError(folder, f"holds {twice[0]} and {twice[0]}.gz: the same trace plain and compressed would "
                         "be read as two ranks and counted twice",
                         "Keep one of the two (delete or move the other), or pass the files you mean as a list")
    return entries
