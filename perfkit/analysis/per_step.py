"""Per-step figures of a trace that the case studies quote: ops per step, a record_function
range's time per step and its change between two traces, and the host/GPU split of a step.

Each is read from a ``cpu_bound`` result or a ``Trace`` (``perfkit.load_trace``) and divides by
the trace's profiler steps, so a write-up's "62,700 ``aten::linear`` per action" compares with
ours per planning step, and "``## train/sample ##`` 529 -> 358 ms" with our range's median time
per step before and after, with a bootstrap CI on the ratio (``perfkit.analysis.trace_diff.diff.compare_steps``).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import ParameterError
from .compile import compiled_regions as region_names
from ..trace.recorded import recorded_machine
from .trace_diff.conditions import judged, unreliable_reasons
from .trace_diff.diff import compare_steps
from .sync_points.find import syncs

# Categories of record_function ranges on the host: ``user_annotation``, and ``cpu_op`` in traces
# from before Kineto named them (2021: "Operator"). ``gpu_user_annotation`` is their GPU mirror
# in CUDA traces and would count a range twice.
RANGE_CATEGORIES = ("user_annotation", "cpu_op")


def ops_per_step(result, names) -> dict[str, float]:
    """Calls per profiler step of each op in ``names`` (``aten::linear``...), from a
    ``cpu_bound`` result's op table; 0.0 for an op the trace never calls, NaN for a trace
    without steps."""
    steps = len(result.steps)
    counts = result.ops.groupby("name")["count"].sum() if len(result.ops) else {}
    return {name: float(counts.get(name, 0)) / steps if steps else math.nan for name in names}


def ops_table(before, after, names) -> pd.DataFrame:
    """Calls per step of each op in ``names`` in two ``cpu_bound`` results: columns ``op``,
    ``before``, ``after`` (calls per step) and ``ratio`` (after / before; NaN when before is 0)."""
    a, b = ops_per_step(before, names), ops_per_step(after, names)
    frame = pd.DataFrame({"op": list(names), "before": [a[n] for n in names], "after": [b[n] for n in names]})
    frame["ratio"] = frame["after"] / frame["before"].where(frame["before"] > 0)
    return frame


def host_device_split(result) -> dict:
    """The step split a write-up quotes as "CPU time 17x CUDA time, GPU idle 94%", from a
    ``cpu_bound`` result: ``host_busy_ms`` and ``gpu_busy_ms`` per step (means),
    ``cpu_gpu_ratio`` (host busy / GPU busy), ``gpu_idle_pct`` and ``has_gpu``. Without GPU
    events the GPU figures are NaN: a CPU-only trace has no GPU to be idle."""
    o, steps = result.overall, max(len(result.steps), 1)
    gpu = bool(result.has_gpu)
    busy = o["gpu_busy_us"]
    return {"host_busy_ms": o["host_busy_us"] / steps / 1e3, "gpu_busy_ms": busy / steps / 1e3 if gpu else math.nan,
            "cpu_gpu_ratio": o["host_busy_us"] / busy if gpu and busy > 0 else math.nan,
            "gpu_idle_pct": o["gpu_idle_pct"] if gpu else math.nan, "has_gpu": gpu}


def host_device_frame(result) -> pd.DataFrame:
    """``host_device_split`` as a table a person reads: ``metric``, ``value``, with "no GPU: the
    trace has no GPU events" in place of each GPU figure of a CPU-only trace."""
    split = host_device_split(result)
    missing = "no GPU: the trace has no GPU events"
    rows = [("host busy per step (ms)", split["host_busy_ms"]), ("GPU busy per step (ms)", split["gpu_busy_ms"]),
            ("CPU time / GPU time", split["cpu_gpu_ratio"]), ("GPU idle (%)", split["gpu_idle_pct"])]
    return pd.DataFrame([(k, v if split["has_gpu"] or k.startswith("host") else missing) for k, v in rows],
                        columns=["metric", "value"])


def range_per_step(trace, name: str) -> np.ndarray:
    """Time (us) inside the record_function range ``name`` in each profiler step of ``trace``,
    in step order (0 for a step without it). Raises ParameterError when the trace has no such
    range, listing the ranges it has."""
    events = trace.events
    host = events[events["cat"].isin(RANGE_CATEGORIES)]
    mine = host[host["name"] == name]
    if mine.empty:
        marks = events.loc[events["cat"] == "user_annotation", "name"].astype(str)
        found = sorted(set(marks) - {n for n in marks if n.startswith("ProfilerStep")})
        raise ParameterError(f"no record_function range {name!r} in the trace; its ranges: "
                             f"{', '.join(found) or 'none'} (record with torch.profiler.record_function({name!r}))")
    per_step = mine.groupby("step")["dur_us"].sum()
    return per_step.reindex(trace.steps["step"], fill_value=0.0).to_numpy(dtype=float)


def range_change(before, after, name: str) -> dict:
    """The range ``name`` in two traces: ``compare_steps`` of its per-step times (``ratio`` =
    median after / median before, ``low``/``high`` its 95% bootstrap CI, ``verdict``), plus
    ``before_ms`` and ``after_ms`` (medians per step), ``after_steps_ms`` (each step's) and ``name``.
    The verdict is withheld ("inconclusive", ``unreliable`` and ``reason`` say why) under the conditions
    ``perfkit trace-diff`` withholds its own: a side recorded on a busy machine, times that vary too much, a
    CI too wide to size the change (``trace_diff.conditions``)."""
    a, b = range_per_step(before, name), range_per_step(after, name)
    out = compare_steps(a, b)
    out = judged(out, unreliable_reasons(out, (a, b), (recorded_machine(before), recorded_machine(after))))
    return {**out, "name": name, "before_ms": out["median_a_us"] / 1e3, "after_ms": out["median_b_us"] / 1e3,
            "after_steps_ms": tuple(b / 1e3)}


def range_text(change: dict) -> str:
    """A ``range_change`` in one line: "## train/sample ## 0.594 -> 0.508 ms per step: no
    detectable change (ratio 0.856, 95% CI 0.744-7.7)"."""
    ci = f", 95% CI {change['low']:.3g}-{change['high']:.3g}" if math.isfinite(change["low"]) else ""
    why = f": {change['reason']}" if change.get("reason") else ""
    return (f"{change['name']} {change['before_ms']:,.3g} -> {change['after_ms']:,.3g} ms per step: "
            f"{change['verdict']} (ratio {change['ratio']:.3g}{ci}){why}")


def pageable_htod_per_step(result) -> float:
    """Host-to-device copies from pageable memory per step of an ``htod`` result (0.0 for a
    trace without copies, NaN without steps)."""
    frame = result.to_frame()
    if not result.n_steps:
        return math.nan
    if frame.empty:
        return 0.0
    pageable = frame[(frame["direction"] == "HtoD") & (frame["memory"] == "pageable")]
    return float(pageable["count"].sum()) / result.n_steps


def sync_change(before, after) -> dict:
    """Sync points per step of two traces (``perfkit.syncs``): ``before_per_step``,
    ``after_per_step``, ``cpu_only`` (no GPU events in the before trace: the points are where a
    GPU would wait, their cost is not in the trace) and both ``SyncResult`` objects."""
    a, b = syncs(before), syncs(after)
    return {"before_per_step": a.total["per_step"], "after_per_step": b.total["per_step"],
            "cpu_only": bool(a.total["cpu_only"]), "before": a, "after": b}


def sync_text(change: dict) -> str:
    """A ``sync_change`` in one line."""
    what = ("possible sync points (a CPU trace: where a GPU would wait, not for how long)" if change["cpu_only"]
            else "sync points")
    return f"{change['before_per_step']:,.4g} -> {change['after_per_step']:,.4g} {what} per step"


def compiled_regions(trace) -> pd.DataFrame:
    """The compiled regions of a trace recorded under ``torch.compile``
    (``perfkit.analysis.compile.compiled_regions``: ``Torch-Compiled Region: F/C``) with their
    calls: one row per region with ``frame`` (F: dynamo's frame id; a forward pass split into two
    frames is a graph break), ``compile`` (C: that frame's compile count; one more than the fix
    has is a recompile), ``calls`` and ``per_step``. Empty for an eager trace."""
    names = region_names(trace)
    columns = ["region", "frame", "compile", "calls", "per_step"]
    if not names:
        return pd.DataFrame(columns=columns)
    calls = trace.select("cpu_op", "user_annotation")["name"].astype(str).value_counts()
    ids = [tuple(int(x) for x in n.rsplit(" ", 1)[-1].split("/")) for n in names]
    steps = max(len(trace.steps), 1)
    rows = [(n, f, c, int(calls.get(n, 0)), calls.get(n, 0) / steps) for n, (f, c) in zip(names, ids)]
    return pd.DataFrame(rows, columns=columns).sort_values(["frame", "compile"], ignore_index=True)
