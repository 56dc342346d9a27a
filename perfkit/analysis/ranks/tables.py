"""The per-rank half of ``perfkit.ranks``: one trace file -> small per-step tables.

``reduce_file(path)`` loads one file and reduces it; it is what an engine runs where the file is
(a worker process, a Dask worker), so only these tables travel back. Per step window (as
``cpu_bound``; all times in microseconds):

* the ``cpu_bound`` split, same numbers (``cpu_bound.step_table``): ``wall_us``, ``gpu_busy_us``
  (union of kernels, memcpys and memsets), ``dataloader_us``, ``sync_us`` (host blocked in syncs
  outside data loading), ``host_other_us``;
* ``first_launch_us``: how long the step's first kernel launch call took (a first use's lazy module loading
  shows here);
* ``comm_us``: union of communication kernels (NCCL, and RCCL on ROCm: kernel names containing
  "nccl" or "rccl"); ``compute_us``: union of the other kernels (memcpy/memset are neither);
  ``overlap_us``: time both run at once (comm + compute - their union);
* one row per communication kernel (``collectives``): its step (the step that launched it, wherever it ran on
  the GPU's timeline: ``trace.steps.launch_windows``; a DDP rank whose GPU runs behind its host runs the last
  step's all-reduces after that step's window), name, ``occurrence`` (0 for the
  first kernel of that name in the step, 1 for the second...), ``ts_us``, ``dur_us`` and what it moved
  (``bandwidth.MESSAGE_COLUMNS``: collective, algorithm, dtype, group size, bytes). Ranks are
  matched on (step, name, occurrence) by ``perfkit.analysis.ranks.collectives``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import ParameterError, TraceError
from ...trace import Trace, load_trace
from ...trace.intervals import window_cover
from ...trace.loader.jobs import FileFacts, file_facts
from ...trace.steps import launch_windows, step_rows, step_windows
from ..classify import is_comm
from ..step.cpu_bound import step_table
from .bandwidth import MESSAGE_COLUMNS, kernel_messages

STEP_COLUMNS = ["step", "start_us", "end_us", "wall_us", "gpu_busy_us", "compute_us", "comm_us", "overlap_us",
                "dataloader_us", "sync_us", "host_other_us", "kernels", "first_launch_us"]
COLLECTIVE_COLUMNS = ["step", "name", "occurrence", "ts_us", "dur_us", *MESSAGE_COLUMNS]


@dataclass(frozen=True)
class RankTables:
    """One file reduced: its path, the rank it claims (``distributedInfo.rank``; None when it
    claims none), its GPU's name ("cpu" without GPU events), the GPUs its process sees (``gpus``: the
    ``deviceProperties`` entries) and the job's ``world_size`` (``distributedInfo``; None when absent),
    ``steps`` (``STEP_COLUMNS``), ``collectives`` (``COLLECTIVE_COLUMNS``), the load's warnings and what
    the file says of its job (``facts``: :mod:`perfkit.trace.loader.jobs`, to tell one job's ranks from runs)."""

    path: str
    claimed_rank: int | None
    device: str
    gpus: int
    world_size: int | None
    steps: pd.DataFrame
    collectives: pd.DataFrame
    warnings: tuple
    facts: FileFacts | None = None


def reduce_file(path, *, use_cache: bool = True) -> RankTables:
    """Load one trace file and reduce it (see the module doc). Raises TraceError for a bad file."""
    return reduce_trace(load_trace(path, use_cache=use_cache, workers=1))  # the engine runs files in parallel


def reduce_trace(trace: Trace) -> RankTables:
    """Reduce a Trace of exactly one file; raises ParameterError for a multi-file Trace."""
    if len(trace.files) > 1 and len({f.path for f in trace.files}) == 1:
        raise TraceError(trace.files[0].path, f"holds {len(trace.files)} ranks merged into one file (TraceFusion's "
                         "pid = rank * 100000000 + pid); cross-rank analysis needs one file per rank",
                         "Pass the per-rank files; perfkit summary, sql and load_trace read this one as its ranks")
    if len(trace.files) != 1:
        raise ParameterError(f"reduce_trace takes the Trace of one file, got {len(trace.files)} files; "
                             "use perfkit.ranks(directory) for many ranks")
    windows = step_windows(trace)
    steps = step_table(trace).reset_index(drop=True)
    kernels = trace.kernels()
    comm = is_comm(kernels["name"])
    steps["comm_us"] = window_cover(kernels[comm], windows)
    steps["compute_us"] = window_cover(kernels[~comm], windows)
    steps["overlap_us"] = np.maximum(steps["comm_us"] + steps["compute_us"] - window_cover(kernels, windows), 0.0)
    steps["first_launch_us"] = first_launches(trace, windows)
    meta = trace.files[0]
    return RankTables(path=meta.path, claimed_rank=distributed_int(meta.distributed, "rank"), device=_device(trace),
                      gpus=len(trace.devices), world_size=distributed_int(meta.distributed, "world_size"),
                      steps=steps[STEP_COLUMNS], collectives=_collectives(trace, kernels[comm], windows),
                      warnings=trace.warnings, facts=file_facts(meta.path, meta.claimed_rank,
                                                                 distributed_int(meta.distributed, "world_size"),
                                                                 trace.events, meta.base_time_ns))


def first_launches(trace: Trace, windows: pd.DataFrame) -> np.ndarray:
    """Per window: the duration (us) of its first kernel launch call, 0 where it launched none."""
    links = trace.launches(("kernel",)).drop_duplicates("cpu_index")
    out = np.zeros(len(windows))
    if links.empty:
        return out
    row = step_rows(windows, trace.events.loc[links["cpu_index"].to_numpy(), ["rank", "step"]])
    first = links.assign(row=row)[row >= 0].sort_values("launch_ts_us", kind="stable").drop_duplicates("row")
    out[windows.index.get_indexer(first["row"])] = first["launch_dur_us"].to_numpy(dtype=np.float64)
    return out


def distributed_int(distributed: dict, key: str) -> int | None:
    """``distributedInfo[key]`` (``rank``, ``world_size``) as an int, None when absent or not a number."""
    try:
        return int(distributed[key])
    except (KeyError, TypeError, ValueError):
        return None


def _collectives(trace: Trace, comm: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    row = launch_windows(trace, windows, comm)
    inside = row >= 0
    comm = comm[inside]
    messages = kernel_messages(trace, comm) if len(comm) else pd.DataFrame(columns=MESSAGE_COLUMNS)
    frame = pd.DataFrame({"step": windows["step"].to_numpy()[row[inside]],
                          "name": comm["name"].astype(str).to_numpy(),
                          "ts_us": comm["ts_us"].to_numpy(dtype=np.float64),
                          "dur_us": comm["dur_us"].to_numpy(dtype=np.float64),
                          **{c: messages[c].to_numpy() for c in MESSAGE_COLUMNS}})
    frame = frame.sort_values(["step", "ts_us"], kind="stable", ignore_index=True)
    frame["occurrence"] = frame.groupby(["step", "name"], sort=False).cumcount().astype(np.int64)
    return frame[COLLECTIVE_COLUMNS]


def _device(trace: Trace) -> str:
    if not trace.has_gpu_events:
        return "cpu"
    named = [d.get("name") for d in trace.devices if d.get("name")]
    return str(named[0]) if named else "cuda"
