"""Host-op tables shared by the trace analyses: the host categories, the op names that copy or read
device data, the host events of a trace as a table, per-op totals and self time, and host busy time.
Nesting and self time come from the loader's columns (:mod:`perfkit.trace.ancestry`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.intervals import union
from ..trace.names import as_text, starts_with
from ..trace.schema import LAUNCH_CATEGORIES, NESTED_CATEGORIES
from ..trace.steps import STEP_PREFIX
from ..trace.threads import thread_key

# Host categories whose events nest on a thread (the loader's ``parent``/``depth``); python_function
# frames have their own tree (``parent`` from ``Python parent id``, used by stacks.py).
HOST_CATEGORIES = NESTED_CATEGORIES
# Host work that keeps a thread busy: annotations are excluded because a record_function around a
# whole step would mark the host busy for all of it.
HOST_WORK_CATEGORIES = ("cpu_op", *LAUNCH_CATEGORIES)
DATALOADER_PREFIX = "enumerate(DataLoader)"
COPY_OPS = ("aten::to", "aten::_to_copy", "aten::copy_")
# Ops that read device data on the host (or size an output from it) and so wait for the GPU when
# their input lives there. Sources: PyTorch CUDA semantics notes and the ops that
# torch.cuda.set_sync_debug_mode("warn") reports.
SYNC_OPS = {
    "aten::item": "item", "aten::_local_scalar_dense": "item",
    "aten::nonzero": "nonzero", "aten::is_nonzero": "is_nonzero",
    "aten::masked_select": "dynamic_shape", "aten::_unique2": "dynamic_shape",
    "aten::unique_consecutive": "dynamic_shape", "aten::unique_dim": "dynamic_shape",
    "aten::repeat_interleave": "dynamic_shape",
}


REQUIRED_COLUMNS = ("name", "cat", "ph", "ts_us", "dur_us", "pid", "tid", "file_id", "rank", "device", "stream",
                    "correlation", "bytes", "parent", "depth", "step")


def host_events(trace, categories=HOST_CATEGORIES) -> pd.DataFrame:
    """Complete host events of ``categories`` with ``name`` and ``cat`` as plain strings.
    Raises ParameterError (via ``Trace.require``) when the events table lacks a needed column."""
    trace.require(*REQUIRED_COLUMNS)
    ev = trace.select(*categories)
    return ev.assign(name=as_text(ev["name"]), cat=as_text(ev["cat"]))


OP_TABLE_COLUMNS = ["name", "cat", "count", "total_us", "self_us", "mean_us", "self_pct", "total_pct"]


def op_table(events: pd.DataFrame, nested: pd.DataFrame) -> pd.DataFrame:
    """Per (name, cat) of host work (cpu_op and runtime/driver calls; annotations and
    ``ProfilerStep#`` windows left out): ``count``, ``total_us`` (inclusive), ``self_us``,
    ``mean_us``, ``self_pct`` (share of all self time) and ``total_pct`` (inclusive time as a share
    of the host's busy time: the union of host work per thread, summed over threads). Sorted by
    self time."""
    keep = events["cat"].astype(str).isin(HOST_WORK_CATEGORIES).to_numpy() & ~starts_with(events["name"], STEP_PREFIX)
    work = events[keep]
    if work.empty:
        return pd.DataFrame(columns=OP_TABLE_COLUMNS)
    frame = pd.DataFrame({"name": work["name"].astype(str), "cat": work["cat"].astype(str),
                          "dur_us": work["dur_us"], "self_us": nested["self_us"][keep]})
    table = frame.groupby(["name", "cat"], sort=False).agg(
        count=("dur_us", "size"), total_us=("dur_us", "sum"), self_us=("self_us", "sum")).reset_index()
    table["mean_us"] = table["total_us"] / table["count"]
    table["self_pct"] = 100.0 * table["self_us"] / max(table["self_us"].sum(), 1e-12)
    table["total_pct"] = 100.0 * table["total_us"] / max(thread_busy_us(work), 1e-12)
    return table.sort_values(["self_us", "name"], ascending=[False, True], ignore_index=True)[OP_TABLE_COLUMNS]


def thread_busy_us(events: pd.DataFrame) -> float:
    """Union of the events' intervals per thread, summed over threads (host CPU time), in us."""
    if events.empty:
        return 0.0
    start = events["ts_us"].to_numpy(dtype=np.float64)
    end = start + events["dur_us"].to_numpy(dtype=np.float64)
    total = 0.0
    keys = thread_key(events)
    for key in np.unique(keys):
        bs, be = union(start[keys == key], end[keys == key])
        total += float((be - bs).sum())
    return total
