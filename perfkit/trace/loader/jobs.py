"""Which trace files are ranks of one job: the files of a directory (or a list) are merged into one
:class:`~perfkit.trace.Trace` only when their metadata says they are, else the load is refused with
the runs it found and how to pick one.

Files are ranks of one job when each claims a ``distributedInfo.rank`` below one shared
``world_size``, no rank is claimed twice, and their recorded times lie together (each file's first to
last event, on its clock: ``baseTimeNanoseconds`` added where the file has one). A file that claims
no rank is a run of its own: a directory that ``perfkit profile`` or ``tensorboard_trace_handler``
fills with one process's runs is several runs, not several ranks.
"""
from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from ...errors import ParameterError, TraceError
from ...limits import RANK_RANGE

# The ranks of one job record the same steps, so their windows overlap but for the clock skew between
# hosts (NTP keeps it within milliseconds); a gap of a minute is another profiling window or another job.
NEAR_US = 60e6
_LISTED = 8  # runs named in a refusal; the rest are counted
# Timestamps on the Unix epoch (microseconds) between these years read as a date; others are a process clock.
_EPOCH_US = (946_684_800e6, 4_102_444_800e6)  # 2000-01-01, 2100-01-01


@dataclass(frozen=True)
class FileFacts:
    """What one file says about the job it belongs to: the rank and world size it claims (None when it
    claims none) and the span of its events (us, on its own clock: base time added)."""

    path: str
    rank: int | None
    world_size: int | None
    start_us: float
    end_us: float


def file_facts(path, rank, world_size, events: pd.DataFrame, base_time_ns: int | None) -> FileFacts:
    """The facts of one loaded file from its events (``ts_us``, ``dur_us``) and metadata."""
    base = (base_time_ns or 0) / 1000.0
    start = float(events["ts_us"].min()) + base if len(events) else 0.0
    end = float((events["ts_us"] + events["dur_us"].clip(lower=0)).max()) + base if len(events) else 0.0
    return FileFacts(str(path), rank, world_size, start, end)


def group_runs(files: Sequence[FileFacts]) -> list[list[int]]:
    """The indices of ``files`` grouped into runs (each sorted by path), the newest run first."""
    order = sorted(range(len(files)), key=lambda i: (files[i].start_us, files[i].path))
    runs: list[list[int]] = []
    open_runs: dict[int | None, list[list[int]]] = {}  # world size -> runs of ranks still taking files
    for i in order:
        f = files[i]
        if not _claims_a_rank(f):
            runs.append([i])
            continue
        home = next((run for run in open_runs.get(f.world_size, []) if _fits(files, run, f)), None)
        if home is None:
            home = []
            runs.append(home)
            open_runs.setdefault(f.world_size, []).append(home)
        home.append(i)
    runs = [sorted(run, key=lambda i: files[i].path) for run in runs]
    return sorted(runs, key=lambda run: -max(files[i].start_us for i in run))


def one_job(source, files: Sequence[FileFacts], run: int | None = None) -> tuple[list[int], list[str]]:
    """:func:`one_run` of the files ``source`` (a path or a list, as given to ``load_trace``) named, and the
    warning that says which run ``run`` picked (none when every file is kept)."""
    where = os.fsdecode(source) if isinstance(source, (str, bytes, os.PathLike)) else f"{len(files)} files"
    keep = one_run(where, files, run)
    if len(keep) == len(files):
        return keep, []
    return keep, [f"{where}: loaded run {run} of {len(group_runs(files))} ({run_text(files, keep)}); "
                  "the other runs were left out"]


def one_run(where, files: Sequence[FileFacts], run: int | None = None) -> list[int]:
    """The indices of ``files`` to load as one job: all of them when they are one run; with ``run``
    (1 = the newest), that run. Raises TraceError listing the runs when there are several and no
    ``run`` is given, ParameterError for a ``run`` that is not one of them."""
    runs = group_runs(files) if len(files) > 1 else [list(range(len(files)))]
    if run is not None:
        if isinstance(run, bool) or not isinstance(run, int) or not 1 <= run <= len(runs):
            raise ParameterError(f"run={run!r}: {where} holds {_count(len(runs))} (1 is the newest); "
                                 f"pick one of 1..{len(runs)}")
        return runs[run - 1]
    if len(runs) == 1:
        return runs[0]
    raise TraceError(where, f"holds {_count(len(runs))}, not the ranks of one job: {listing(files, runs)}",
                     "Pick one run: pass its files (a glob of one run, or the newest file alone), or --run N "
                     "(load_trace(..., run=N); 1 is the newest). Files are ranks of one job only when each "
                     "names its rank in one world size (distributedInfo) and their times overlap")


def listing(files: Sequence[FileFacts], runs: list[list[int]]) -> str:
    """``run 1 (newest): ...; run 2: ...`` for the first runs, and how many more."""
    parts = [f"run {n}{' (newest)' if n == 1 else ''}: {run_text(files, run)}"
             for n, run in enumerate(runs[:_LISTED], start=1)]
    if len(runs) > _LISTED:
        parts.append(f"and {len(runs) - _LISTED} more")
    return "; ".join(parts)


def run_text(files: Sequence[FileFacts], run: list[int]) -> str:
    """The files of ``run``, the ranks they claim and when the run started."""
    members = [files[i] for i in run]
    names = [Path(f.path).name for f in members]
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} ... {names[-1]} ({len(names)} files)"
    first = members[0]
    if not _claims_a_rank(first):
        why = "no distributedInfo rank" if first.rank is None else \
            f"rank {first.rank} outside world size {first.world_size}"
        who = f"one process ({why})"
    else:
        world = f" of {first.world_size}" if first.world_size is not None else ""
        who = f"rank{'s' if len(members) > 1 else ''} {_ranks_text(sorted(f.rank for f in members))}{world}"
    return f"{shown}: {who}{_when(min(f.start_us for f in members))}"


def _ranks_text(ranks: list[int]) -> str:
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))


def _when(start_us: float) -> str:
    if not _EPOCH_US[0] <= start_us <= _EPOCH_US[1]:
        return ""
    moment = _dt.datetime.fromtimestamp(start_us / 1e6, tz=_dt.timezone.utc)
    return f", from {moment:%Y-%m-%d %H:%M:%S} UTC"


def _claims_a_rank(f: FileFacts) -> bool:
    return f.rank is not None and (f.world_size is None or f.rank < f.world_size)


def _fits(files: Sequence[FileFacts], run: list[int], f: FileFacts) -> bool:
    """Whether ``f`` joins ``run``: a rank it lacks, and times within NEAR_US of the run's."""
    if any(files[i].rank == f.rank for i in run):
        return False
    return f.start_us <= max(files[i].end_us for i in run) + NEAR_US


def _count(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"


def assign_ranks(paths: list[Path], claimed: list, world_sizes: list) -> tuple[list[int], list[str]]:
    """One distinct rank per file, and a warning for each file whose claim could not be kept.

    A file keeps the rank its ``distributedInfo`` claims unless an earlier file (in path order)
    claimed it; a file that claims none gets its position in ``paths`` when that is free. Every
    other file gets a spare id above every claim and every ``world_size`` (so it cannot be taken
    for a real rank of the run): two copies of one rank, or an unrelated rank-0 trace beside a
    run's ranks, stay apart instead of merging into one timeline. ``TraceFile.claimed_rank``
    keeps what the file said.
    """
    taken: dict[int, Path] = {}
    ranks: list = [None] * len(paths)
    for i, rank in enumerate(claimed):
        if rank is not None and rank not in taken:
            taken[rank], ranks[i] = paths[i], rank
    for i, rank in enumerate(claimed):
        if rank is None and i not in taken:
            taken[i], ranks[i] = paths[i], i
    spares = iter(_spare_ranks(taken, world_sizes, ranks.count(None)))
    warnings = []
    for i, rank in enumerate(claimed):
        if ranks[i] is None:
            ranks[i] = next(spares)
            if rank is not None:
                warnings.append(f"{paths[i].name} claims rank {rank} like {taken[rank].name}: loaded as rank "
                                f"{ranks[i]} so their events stay apart (are these files from one run?)")
    return ranks, warnings


def _spare_ranks(taken: dict, world_sizes: list, count: int) -> list[int]:
    """``count`` ids above every claim and world_size; where those would pass RANK_RANGE (a claim
    of rank 2**31-1), the lowest ids no file claimed."""
    start = max([*taken, *(w - 1 for w in world_sizes if w)], default=-1) + 1
    if start + count - 1 <= RANK_RANGE[1]:
        return list(range(start, start + count))
    free = (r for r in range(RANK_RANGE[1] + 1) if r not in taken)
    return [next(free) for _ in range(count)]
