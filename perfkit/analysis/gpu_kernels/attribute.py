"""Which host op each GPU kernel belongs to.

A kernel is linked to the runtime call that launched it by correlation id (``Trace.launches``), and
the runtime call to its enclosing ops through the loader's nesting (``parent`` column). The kernel's
**owner** is the innermost enclosing ``cpu_op`` (``aten::addmm`` under ``aten::linear``; the copy kernel
of an ``aten::clone`` inside ``aten::matmul`` belongs to the clone, so the matmul's FLOPs are counted
once, by its ``aten::bmm``); -1 when the launch is outside every op (a Triton kernel launched from
Python, a CUDA graph replay) or the kernel
has no launch in the trace.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.names import as_text
from ...trace.schema import GPU_CATEGORIES
from ...trace.steps import STEP_PREFIX
from .kernel_classes import kernel_class, name_dtype, tensor_core


def kernel_links(trace) -> pd.DataFrame:
    """One row per GPU event (kernel, memcpy, memset): ``gpu_index`` (label in ``trace.events``),
    ``name``, ``cat``, ``rank``, ``device``, ``stream``, ``ts_us``, ``dur_us``, ``bytes``, ``class``,
    ``tensor_core`` (True/False/None), ``name_dtype``, ``owner`` (op label or -1), ``owner_op`` (its name,
    "" for none) and ``launched`` (its launch call is in the trace)."""
    ev = trace.events
    gpu = trace.gpu_events()
    links = trace.launches(GPU_CATEGORIES)[["gpu_index", "cpu_index"]].drop_duplicates("gpu_index")
    launch = pd.Series(links["cpu_index"].to_numpy(), index=links["gpu_index"].to_numpy())
    cpu_index = launch.reindex(gpu.index).fillna(-1).to_numpy(dtype=np.int64)
    owner = owners(ev, cpu_index)
    out = pd.DataFrame({
        "gpu_index": gpu.index.to_numpy(), "name": as_text(gpu["name"]).to_numpy(),
        "cat": as_text(gpu["cat"]).to_numpy(), "rank": gpu["rank"].to_numpy(), "device": gpu["device"].to_numpy(), "stream": gpu["stream"].to_numpy(),
        "ts_us": gpu["ts_us"].to_numpy(), "dur_us": gpu["dur_us"].to_numpy(), "bytes": gpu["bytes"].to_numpy(),
        "owner": owner, "launched": cpu_index >= 0,
        "owner_op": np.where(owner >= 0, as_text(ev["name"].iloc[np.clip(owner, 0, None)]).to_numpy(), ""),
    })
    keys = ["name", "cat", "owner_op"]
    return out.join(name_facts(out[keys].drop_duplicates()), on=keys)


def name_facts(names: pd.DataFrame) -> pd.DataFrame:
    """Per distinct (name, cat, owner_op): ``class`` (the op's first, ``classify.kernel_class``),
    ``tensor_core`` and ``name_dtype`` from the name."""
    classes = [kernel_class(n, c, o or None) for n, c, o in zip(names["name"], names["cat"], names["owner_op"])]
    return pd.DataFrame({
        "class": classes,
        "tensor_core": pd.array([tensor_core(n, k) for n, k in zip(names["name"], classes)], dtype="boolean"),
        "name_dtype": pd.Series([name_dtype(n) if c == "kernel" else None for n, c in zip(names["name"], names["cat"])],
                                dtype=object).to_numpy(),
    }, index=pd.MultiIndex.from_frame(names))


def owners(ev: pd.DataFrame, launches: np.ndarray) -> np.ndarray:
    """Innermost enclosing op label of each launch label in ``launches`` (-1: no launch or no op)."""
    parent = ev["parent"].to_numpy(dtype=np.int64)
    is_op = _op_mask(ev)
    inner = np.full(len(launches), -1, dtype=np.int64)
    cur = np.where(launches >= 0, parent[np.clip(launches, 0, None)], -1)
    while True:
        live = np.flatnonzero(cur >= 0)
        if len(live) == 0:
            break
        at = cur[live]
        found = is_op[at]
        inner[live[found]] = at[found]
        cur[live[found]] = -1
        cur[live[~found]] = parent[at[~found]]
    return inner


def _op_mask(ev: pd.DataFrame) -> np.ndarray:
    """Per row: a cpu_op other than a ``ProfilerStep#`` window."""
    names = ev["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype("category")
    categories = names.cat.categories.astype(str)
    step = np.isin(names.cat.codes.to_numpy(), np.flatnonzero(categories.str.startswith(STEP_PREFIX)))
    return (ev["cat"] == "cpu_op").to_numpy() & (ev["ph"] == "X").to_numpy() & ~step
