"""Per-op speedups between two traces: the same op on the same input shapes, its GPU time per call before and
after (TraceLens's per-op comparison).

Each side's ops are the ones that launched GPU work (the innermost op around each launch,
``gpu_kernels.attribute.kernel_links``; work launched before the profiler's window left out, as everywhere);
an op's time is the summed duration of the kernels, copies and memsets it launched. Ops are matched by name and
recorded ``Input Dims`` (``record_shapes=True``; ops without shapes, or whose dims record no dimension, as a
``cat`` of a tensor list sometimes does, are not matched: a shape change is not a speedup). ``speedup`` is A's time per call over B's (above 1: B is faster); ``saved_us`` what B saves per its
own calls, (A per call - B per call) x B's calls. Times in us.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import TraceError
from ...trace.loader.shapes import op_shapes
from ...trace.steps import before_window_events
from ..gpu_kernels.args import compact, loads
from ..gpu_kernels.attribute import kernel_links

SPEEDUP_COLUMNS = ["op", "shape", "calls_a", "calls_b", "us_per_call_a", "us_per_call_b", "speedup", "saved_us"]


def op_times(trace) -> pd.DataFrame:
    """Per (op, shape) of one trace: ``calls`` (op instances that launched GPU work) and ``gpu_us`` (their GPU
    work's summed duration); only ops with recorded shapes. Raises TraceError when a source file, whose shapes
    are read on demand, is gone."""
    links = kernel_links(trace)
    links = links[(links["owner"] >= 0).to_numpy() & ~links["gpu_index"].isin(before_window_events(trace)).to_numpy()]
    shapes = op_shapes(trace) if not links.empty else pd.DataFrame()
    if links.empty or shapes.empty:
        return pd.DataFrame({"op": [], "shape": [], "calls": [], "gpu_us": []})
    per = links.groupby("owner").agg(op=("owner_op", "first"), gpu_us=("dur_us", "sum"))
    dims = shapes["input_dims"].astype(str).reindex(per.index)
    text = {t: compact(t) for t in dims.dropna().unique() if any(isinstance(d, list) and d for d in loads(t))}
    per = per.assign(shape=dims.map(text).to_numpy())
    per = per[per["shape"].notna().to_numpy()]
    return per.groupby(["op", "shape"]).agg(calls=("gpu_us", "size"), gpu_us=("gpu_us", "sum")).reset_index()


def op_speedups(a, b) -> tuple[pd.DataFrame, list[str]]:
    """(``SPEEDUP_COLUMNS`` for every (op, shape) that ran GPU work in both traces, the largest ``saved_us`` (in
    either direction) first; a warning when a trace's file is gone, so its shapes cannot be read)."""
    try:
        table = op_times(a).merge(op_times(b), on=["op", "shape"], suffixes=("_a", "_b"))
    except TraceError as exc:
        return pd.DataFrame(columns=SPEEDUP_COLUMNS), [f"no per-op speedups: {exc}"]
    table["us_per_call_a"] = table["gpu_us_a"] / table["calls_a"]
    table["us_per_call_b"] = table["gpu_us_b"] / table["calls_b"]
    table["speedup"] = table["us_per_call_a"] / table["us_per_call_b"].where(table["us_per_call_b"] > 0)
    table["saved_us"] = (table["us_per_call_a"] - table["us_per_call_b"]) * table["calls_b"]
    order = np.argsort(-table["saved_us"].abs().to_numpy(), kind="stable")
    return table.iloc[order][SPEEDUP_COLUMNS].reset_index(drop=True), []
