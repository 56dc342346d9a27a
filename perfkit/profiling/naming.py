"""Where the traces of one rank of a run go, and names that say run, rank and step range.

``<folder>/<run>/<run>-rank<R>-steps<first>-<last>.pt.trace.json.gz`` (a ``--trigger`` step:
``<run>-rank<R>-slow-step<N>``, ``-median-step<N>``): one folder per run, one file per rank and cycle, so
``perfkit ranks <folder>/<run>`` reads every rank. The ranks of one job must agree on the run's name
without talking to each other: ``$PERFKIT_RUN`` (``perfkit profile`` sets it for the processes it starts),
else the start time of the launcher (the parent process: ``torchrun``'s agent, ``mp.spawn``'s caller) when
the job has ranks, else now.
"""
from __future__ import annotations

import datetime as _dt
import os
import re
import sys
from pathlib import Path

import psutil

from ..errors import ParameterError
from ..workbook import workbook_root

RUN_VARIABLE = "PERFKIT_RUN"
TRACE_SUFFIX = ".pt.trace.json.gz"


def safe_name(text) -> str:
    """``text`` with characters other than letters, digits and ``.+-`` as ``_`` (Kineto's JSON broke on control
    characters in a name), never empty."""
    return re.sub(r"[^\w.+-]", "_", str(text)).strip("._") or "run"


def run_name(prefix: str, run: str | None = None) -> str:
    """``run`` when given, else ``$PERFKIT_RUN``, else ``<prefix>-<YYYY-MM-DD-HHMMSS>`` of the job's start."""
    chosen = run or os.environ.get(RUN_VARIABLE, "").strip()
    return safe_name(chosen) if chosen else f"{safe_name(prefix)}-{job_start():%Y-%m-%d-%H%M%S}"


def job_start() -> _dt.datetime:
    """When the job started: its launcher's start when this process is one of several ranks (``WORLD_SIZE`` > 1
    or a ``multiprocessing`` child), else now."""
    distributed = os.environ.get("WORLD_SIZE", "1") not in ("", "0", "1") or "--multiprocessing-fork" in sys.argv
    if distributed:
        try:
            return _dt.datetime.fromtimestamp(psutil.Process(os.getppid()).create_time())
        except (psutil.Error, OSError):
            pass
    return _dt.datetime.now()


def run_folder(run: str, out=None) -> Path:
    """``<out>/<run>`` (absolute: a script that changes directory does not move it), ``out`` defaulting to the
    workbook's ``traces/``. Not created here: the writer creates it."""
    base = Path(os.path.abspath(out)) if out is not None else workbook_root() / "traces"
    return base / run


def current_rank() -> int | None:
    """This process's rank: torch.distributed's when initialized, else ``$RANK``; None when neither says."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except (RuntimeError, ValueError):
        pass
    try:
        return int(os.environ["RANK"])
    except (KeyError, ValueError):
        return None


def rank_label(rank: int | None) -> str:
    return f"rank{rank}" if rank is not None else f"pid{os.getpid()}"


def cycle_trace(folder: Path, run: str, rank: int | None, first: int, last: int) -> Path:
    """The trace of one cycle: steps ``first``..``last`` (the framework's global steps, inclusive)."""
    return Path(folder) / f"{run}-{rank_label(rank)}-steps{first}-{last}{TRACE_SUFFIX}"


def trigger_trace(folder: Path, run: str, rank: int | None, kind: str, step: int) -> Path:
    """A ``--trigger`` run's kept step: ``kind`` "slow" or "median"."""
    return Path(folder) / f"{run}-{rank_label(rank)}-{kind}-step{step}{TRACE_SUFFIX}"


def cycle_steps(schedule: dict, cycle: int, offset: int = 0) -> tuple[int, int]:
    """(first, last) step recorded by ``cycle`` (0-based) of ``schedule`` (wait, warmup, active), counted from
    ``offset`` (the global step the recording started at)."""
    first = offset + schedule["wait"] + cycle * (schedule["warmup"] + schedule["active"]) + schedule["warmup"]
    return first, first + schedule["active"] - 1


def selected(ranks, rank: int | None) -> bool:
    """Whether ``rank`` is one of ``ranks`` ("all", an int or a list of ints); an unknown rank is rank 0's
    stand-in only when ``ranks`` is "all" or includes 0."""
    if ranks == "all":
        return True
    chosen = {ranks} if isinstance(ranks, int) else set(ranks)
    return (0 if rank is None else rank) in chosen


def parse_ranks(text) -> str | list[int]:
    """``"all"`` or ``"0,1"`` -> "all" or [0, 1]; an int or list of ints as given. Raises ParameterError."""
    if text == "all" or (isinstance(text, int) and not isinstance(text, bool) and text >= 0):
        return text if text == "all" else [text]
    if isinstance(text, (list, tuple)) and text and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0
                                                          for r in text):
        return list(text)
    parts = str(text).split(",")
    if not all(p.strip().isdigit() for p in parts):
        raise ParameterError(f"ranks {text!r}: pass all, a rank (0) or ranks separated by commas (0,1)")
    return sorted({int(p) for p in parts})
