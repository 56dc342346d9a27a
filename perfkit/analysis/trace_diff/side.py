"""One side of a ``diff``: a trace's numbers per *full* step, ready to compare.

A profiler window often ends with a partial step: ``prof.step()`` opens ``ProfilerStep#N`` and the
profiler stops microseconds later (an 18 us step next to 5 ms ones), or its first step starts
mid-way. Such a stub counted as a step halves every per-step number of a two-step trace. A step is
a **stub** by ``trace.steps.stub_steps``' rule (first or last of its rank, under ``trace.steps.STUB_SHARE`` of the
shortest other step). Stubs are dropped: their events are
left out and per-step values divide by the full steps only. Events outside every step still count
(per-step values are "per full step of this window"); GPU work counts in the step of its launch.

**Host waits** are what the host spends waiting on the device, by kind: the blocking calls of
``syncs.blocking_calls`` labelled by ``classify.SYNC_RUNTIME`` (``stream_sync``, ``event_sync``, ...)
plus every copy launch call (``HtoD copy call``, ...: a pageable ``cudaMemcpyAsync`` returns only
after the copy, a pinned one at once). A wait that moves from one kind to another (the pageable
copy's wait becoming a ``cudaEventSynchronize`` after pinning) shows as one kind falling and
another rising, while their total stays.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...trace.ancestry import nest
from ...trace.names import starts_with
from ...trace.steps import STEP_PREFIX, step_rows, step_windows, stub_steps, window_index
from ..classify import SYNC_RUNTIME, copies_frame
from ..htod import htod
from ..host_ops import host_events, op_table
from ..step.cpu_bound import cpu_bound, overall_numbers
from ..sync_points.find import blocking_calls, syncs
from ...trace.recorded import recorded_machine
from .conditions import outside_ops_us

# Inductor's annotation names carry a graph hash that differs between runs of the same model.
_GRAPH_HASH = re.compile(r"^(## Call CompiledFxGraph )\w+( ##)$")


def side(trace) -> dict:
    """The numbers ``diff`` compares for one trace (keys documented inline; times in us)."""
    windows = step_windows(trace)
    stub = stub_steps(windows)
    stub_rows = np.flatnonzero(stub)
    host = host_events(trace)
    full = ~np.isin(step_rows(windows, host), stub_rows)
    nested = nest(host)
    top = full & (nested["top"].to_numpy() == host.index.to_numpy())   # outermost ops only
    cpu, copies, points = cpu_bound(trace), htod(trace), syncs(trace)
    kept = ~stub
    return {
        "n": max(int(kept.sum()), 1),                     # full steps
        "step_us": windows.loc[kept, "dur_us"].to_numpy(dtype=float) if len(trace.steps) else np.array([]),
        "stubs": windows[stub].reset_index(drop=True),    # dropped windows: rank, step, start/end/dur
        "outside_us": outside_ops_us(trace, windows[kept]) if len(trace.steps) else np.array([]),  # per full step
        "machine": recorded_machine(trace),               # the load perfkit profile recorded (trace.recorded)
        "ops": _ops(host[full], nested[full]),
        "top_ops": _ops(host[top], nested[top]),
        "kernels": _kernels(trace, windows, stub_rows),
        "annotations": _annotations(host[full]),
        "waits": _waits(trace, host[full]),
        "cpu": cpu, "cpu_overall": overall_numbers(cpu.steps[kept], cpu.launches[~cpu.launches["window"].isin(stub_rows)]),
        "copies": _copies(trace, copies.copies, windows, stub_rows), "htod_warnings": copies.warnings,
        "syncs": _sync_events(points, windows[stub]), "syncs_warnings": points.warnings,
    }


def _ops(host: pd.DataFrame, nested: pd.DataFrame) -> pd.DataFrame:
    """cpu_op name -> count, time_us (inclusive)."""
    table = op_table(host, nested)
    return table[table["cat"] == "cpu_op"].groupby("name").agg(count=("count", "sum"), time_us=("total_us", "sum"))


def _launch_ts(trace, gpu: pd.DataFrame) -> pd.Series:
    """Start of the launch call of each GPU event (its own start where the launch is not in the trace)."""
    links = trace.launches(("kernel",)).drop_duplicates("gpu_index").set_index("gpu_index")["launch_ts_us"]
    return links.reindex(gpu.index).fillna(gpu["ts_us"])


def _kernels(trace, windows: pd.DataFrame, stub_rows: np.ndarray) -> pd.DataFrame:
    """Kernel name -> count, time_us, leaving out kernels launched in a stub step."""
    k = trace.kernels()
    k = k[~np.isin(window_index(windows, _launch_ts(trace, k), k["rank"]), stub_rows)]
    return k.assign(name=k["name"].astype(str)).groupby("name").agg(count=("dur_us", "size"), time_us=("dur_us", "sum"))


def _annotations(host: pd.DataFrame) -> pd.DataFrame:
    """record_function range name -> count, time_us (ProfilerStep# left out; Inductor graph hashes
    replaced by ``*`` so one compiled graph keeps its name across runs)."""
    marks = host[(host["cat"] == "user_annotation") & ~starts_with(host["name"], STEP_PREFIX)]
    names = marks["name"].str.replace(_GRAPH_HASH, r"\1*\2", regex=True)
    return marks.assign(name=names).groupby("name").agg(count=("dur_us", "size"), time_us=("dur_us", "sum"))


def _waits(trace, host: pd.DataFrame) -> pd.DataFrame:
    """Host-wait kind -> count, time_us (see the module doc)."""
    copies = copies_frame(trace.events)
    links = trace.launches(("gpu_memcpy",))
    links = links[links["gpu_index"].isin(copies.index)].drop_duplicates("cpu_index")
    direction = pd.Series(copies["direction"].reindex(links["gpu_index"]).to_numpy(), index=links["cpu_index"])
    blocking = blocking_calls(trace, host)
    calls = host.loc[host.index.isin(direction.index) | host.index.isin(blocking.index)]
    copy_kind = direction.reindex(calls.index).to_numpy()
    kind = [f"{d} copy call" if isinstance(d, str) else SYNC_RUNTIME.get(n, n)
            for d, n in zip(copy_kind, calls["name"])]
    table = calls.assign(kind=kind).groupby("kind").agg(count=("dur_us", "size"), time_us=("dur_us", "sum"))
    return table.rename_axis("name")


def _copies(trace, copies: pd.DataFrame, windows: pd.DataFrame, stub_rows: np.ndarray) -> pd.DataFrame:
    """``htod`` copies launched outside stub steps."""
    launch = copies["launch"].to_numpy()
    ts = copies["ts_us"].to_numpy(dtype=float).copy()
    known = launch >= 0
    ts[known] = trace.events["ts_us"].reindex(launch[known]).to_numpy()
    rows = window_index(windows, pd.Series(ts), copies["rank"])
    return copies[~np.isin(rows, stub_rows)].reset_index(drop=True)


def _sync_events(result, stubs: pd.DataFrame) -> pd.DataFrame:
    """Sync points of ``syncs(trace)`` outside stub steps."""
    ev = result.events
    dropped = set(zip(stubs["rank"], stubs["step"]))
    keep = [(r, s) not in dropped for r, s in zip(ev["rank"], ev["step"])]
    return ev[np.asarray(keep, dtype=bool)]
