"""``kernels(trace)``: what the GPU does with its time, and :func:`gpu_bound_findings` for the GPU-bound verdict."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.intervals import length_by, union
from ...trace.loader.shapes import op_shapes
from ...trace.steps import before_window_events, full_step_windows, step_rows
from ..queued import queued_gpu_us
from .attribute import kernel_links
from .devices import NO_DEVICE, UNKNOWN_DEVICE, device_for, read_peaks
from .findings import build_findings
from .args import IMPOSSIBLE_SHAPE
from .flops import MATRIX_FAMILIES
from .opmodel import IMPOSSIBLE_RATE, capped, op_instances, op_table, peak_of, raised_roofs, shape_table
from .result import KERNEL_COLUMNS, KernelsResult
from .time_split import gpu_timeline

NO_GPU = ("no GPU activity: the trace has no kernels, copies or memsets, so there is no GPU time to break down; "
          "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a GPU run")
NO_SHAPES = ("no op carries Input Dims: FLOPs, bytes and the roofline need shapes; profile with "
             "torch.profiler.profile(record_shapes=True). The kernel table below does not.")
NON_COMPUTE = ("memcpy", "memset", "comm")


def kernels(trace, *, device: str | None = None, peaks=None, use_cache: bool = True) -> KernelsResult:
    """GPU time by kernel (class, Tensor Core use, dtype), FLOPs and bytes per op from recorded shapes,
    achieved TFLOP/s and GB/s against the device's peaks, totals (GEMM FLOPs and time, Tensor Core share,
    MFU) and findings with fixes. Times in microseconds, FLOP/s in TFLOP/s (1e12), bandwidth in GB/s (1e9).

    ``device``: a GPU name or key of ``devices.DEVICES`` overriding the trace's ``deviceProperties``
    (ParameterError when unknown). ``peaks``: a peaks file (path) or :func:`~.devices.read_peaks` of one:
    measured peaks of the trace's GPU in place of the datasheet's (ParameterError when it lacks that GPU).
    ``use_cache``: read/write the op-shapes cache (``trace.loader.shapes``).
    Never raises for a trace without GPU events or without shapes: the result says so in its warnings.
    """
    measured = read_peaks(peaks) if peaks is not None and not isinstance(peaks, dict) else peaks
    dev, dev_name = device_for(trace.devices, device, measured)
    if not trace.has_gpu_events:
        return KernelsResult.empty(dev, dev_name, (NO_GPU, *trace.warnings))
    warnings = list(trace.warnings) + list(_device_warnings(dev, dev_name))
    links = kernel_links(trace)
    early = links["gpu_index"].isin(before_window_events(trace)).to_numpy()
    warnings += before_window_note(links[early])
    before = {"before_window_events": int(early.sum()), "before_window_us": float(links["dur_us"][early].sum())}
    links = links[~early]
    shapes = op_shapes(trace, use_cache=use_cache)
    if shapes.empty:
        warnings.append(NO_SHAPES)
    instances = op_instances(trace, links, shapes)
    warnings += impossible_note(instances)
    busy = busy_us(links)
    warnings += stream_overlap_note(links, busy)
    table = kernel_table(links, instances, busy)
    dev, notes = raised_roofs(dev, shape_table(instances, dev))
    ops, op_notes = capped(op_table(instances, dev), "op group(s)")
    shapes_table, shape_notes = capped(shape_table(instances, dev), "op shape(s)")
    warnings += notes + op_notes + shape_notes
    totals, window_note = _totals(trace, links, instances, dev, busy)
    totals.update(before)
    warnings += window_note
    return KernelsResult(device=dev, device_name=dev_name, kernels=table, ops=ops, shapes=shapes_table,
                         instances=instances, timeline=gpu_timeline(trace, links),
                         totals=totals, findings=tuple(build_findings(table, instances, dev, busy)),
                         warnings=tuple(warnings), has_gpu=True)


def gpu_bound_findings(trace, *, device: str | None = None) -> list:
    """The findings of :func:`kernels`, ranked (most severe first, then by share of GPU time): each a
    :class:`perfkit.results.Finding` with ``title``, ``evidence`` and ``fix``. Empty when the trace has
    no GPU events or nothing stands out. For the GPU-bound verdict to name the leading one."""
    return list(kernels(trace, device=device).findings)


# Overlap on one stream worth a warning: over 1 us per event (whole-microsecond rounding) and, summed, at
# least 1% of GPU busy time (Hopper's programmatic dependent launch overlaps a few microseconds legitimately:
# 10 events, 19 us on the shared B200 trace).
STREAM_OVERLAP_US = 1.0
STREAM_OVERLAP_SHARE = 0.01


def stream_overlap_note(links: pd.DataFrame, busy: float) -> list:
    """One line when GPU events overlap the previous one on their stream (``STREAM_OVERLAP_*``): their times
    are summed as recorded, and each kernel's share is of the time it covers."""
    if links.empty or busy <= 0:
        return []
    e = links.sort_values(["rank", "device", "stream", "ts_us"], kind="stable")
    keys = e[["rank", "device", "stream"]].to_numpy()
    same = (keys[1:] == keys[:-1]).all(axis=1)
    reach = pd.Series((e["ts_us"] + e["dur_us"]).to_numpy()).groupby([keys[:, 0], keys[:, 1], keys[:, 2]]).cummax()
    over = np.where(same, np.minimum(reach.to_numpy()[:-1] - e["ts_us"].to_numpy()[1:], e["dur_us"].to_numpy()[1:]), 0.0)
    bad = over > STREAM_OVERLAP_US
    if over[bad].sum() < STREAM_OVERLAP_SHARE * busy:
        return []
    return [f"{int(bad.sum()):,} GPU events start before the previous one on their stream ends ({over[bad].sum() / 1e3:,.3f} "
            f"ms, {over[bad].sum() / busy:.0%} of GPU busy time; only programmatic dependent launch overlaps kernels of "
            "one stream, and only briefly): their times are summed as recorded, and each kernel's share is of the time "
            "it covers"]


def impossible_note(instances: pd.DataFrame) -> list:
    """One line on the ops left unmodeled because their shapes or rates cannot be real (``flops``, ``opmodel``)."""
    reasons = instances["reason"].fillna("").astype(str) if len(instances) else pd.Series(dtype=str)
    bad = instances[reasons.str.startswith((IMPOSSIBLE_SHAPE, IMPOSSIBLE_RATE)).to_numpy()] if len(reasons) else instances
    if bad.empty:
        return []
    first = bad.iloc[0]
    return [f"{len(bad):,} op(s) have shapes or kernel times no GPU could run (first: {first['op']}, "
            f"{first['reason']}): left out of FLOPs, bytes, rates and MFU; their kernel time stays in the tables"]


def before_window_note(early: pd.DataFrame) -> list:
    """One line on the GPU work launched before the window (``trace.steps.before_window``), left out here."""
    if early.empty:
        return []
    return [f"{len(early):,} GPU events ({early['dur_us'].sum() / 1e3:,.2f} ms) were launched before the profiler's "
            "window (no launch call in the trace, ahead of the first launched work on their GPU): the previous "
            "step's tail, left out of every figure here, as TraceLens does"]


def _device_warnings(dev, name: str) -> tuple:
    if dev is not None:
        return ()
    return (UNKNOWN_DEVICE.format(name=name) if name else NO_DEVICE,)


def busy_us(links: pd.DataFrame) -> float:
    """GPU busy time: the union of GPU event intervals per (rank, device), summed."""
    total = 0.0
    for _, g in links.groupby(["rank", "device"], sort=False):
        s, e = union(g["ts_us"].to_numpy(), (g["ts_us"] + g["dur_us"]).to_numpy())
        total += float(np.sum(e - s))
    return total


def kernel_table(links: pd.DataFrame, instances: pd.DataFrame, busy: float) -> pd.DataFrame:
    """Per GPU event name (``KERNEL_COLUMNS``), most time first; ``share`` is the union of the name's events
    over GPU busy time (at most 1 even where events overlap, see ``stream_overlap_note``), and ``dtype`` is
    the name's, else the most common dtype of the ops that launched it."""
    g = links.groupby(["name", "cat"], sort=False, observed=True).agg(
        calls=("dur_us", "size"), total_us=("dur_us", "sum"), cls=("class", "first"),
        tensor_core=("tensor_core", "first"), dtype=("name_dtype", "first")).reset_index()
    op_dtype = _op_dtypes(links, instances)
    g["dtype"] = g["dtype"].astype(object)
    missing = g["dtype"].isna() & (g["cat"] == "kernel")
    g.loc[missing, "dtype"] = g.loc[missing, "name"].map(op_dtype)
    codes = links.groupby(["name", "cat"], sort=False, observed=True).ngroup().to_numpy()  # the order of g's rows
    covered = length_by(codes, links["ts_us"].to_numpy(), (links["ts_us"] + links["dur_us"]).to_numpy(), len(g))
    g["share"] = covered / busy if busy > 0 else np.nan
    g = g.rename(columns={"cls": "class"}).sort_values("total_us", ascending=False, kind="stable", ignore_index=True)
    g["tensor_core"] = g["tensor_core"].astype(object).where(g["tensor_core"].notna(), None)
    g["dtype"] = g["dtype"].astype(object).where(g["dtype"].notna(), None)
    return g[KERNEL_COLUMNS]


def _op_dtypes(links: pd.DataFrame, instances: pd.DataFrame) -> pd.Series:
    if instances.empty:
        return pd.Series(dtype=object)
    by_op = instances.set_index("label")["dtype"]
    named = links.assign(op_dtype=links["owner"].map(by_op)).dropna(subset=["op_dtype"])
    if named.empty:
        return pd.Series(dtype=object)
    return named.groupby("name")["op_dtype"].agg(lambda s: s.value_counts().index[0])


def _totals(trace, links: pd.DataFrame, inst: pd.DataFrame, dev, busy: float) -> tuple[dict, list]:
    dur, cls = links["dur_us"], links["class"]
    gemm = cls == "gemm"
    tc = links["tensor_core"]
    modeled = inst[inst["modeled"].astype(bool)] if len(inst) else inst
    gemm_inst = modeled[modeled["family"] == "gemm"] if len(modeled) else modeled
    compute_unowned = (links["owner"] < 0) & ~cls.isin(NON_COMPUTE)
    unmodeled = inst[~inst["modeled"].astype(bool) & ~inst["family"].isin(NON_COMPUTE)] if len(inst) else inst
    gemm_us = float(dur[gemm].sum())
    gemm_flops = float(gemm_inst["flops"].sum()) if len(gemm_inst) else 0.0
    gemm_inst_us = float(gemm_inst["kernel_us"].sum()) if len(gemm_inst) else 0.0
    mfu, peak, window_us, note = _mfu(trace, modeled, dev)
    totals = {
        "busy_us": busy, "kernel_us": float(dur[links["cat"] == "kernel"].sum()),
        "gemm_us": gemm_us, "gemm_flops": gemm_flops,
        "gemm_tflops_per_s": gemm_flops / gemm_inst_us / 1e6 if gemm_inst_us else None,
        "tensor_core_share": float(dur[gemm & tc.fillna(False).astype(bool)].sum()) / gemm_us if gemm_us else None,
        "tensor_core_unknown_us": float(dur[gemm & tc.isna()].sum()),
        "modeled_flops": float(modeled[modeled["family"].isin(MATRIX_FAMILIES)]["flops"].sum()) if len(modeled) else 0.0,
        "mfu": mfu, "mfu_peak_tflops": peak, "step_us": window_us,
        "unmodeled_us": float(unmodeled["kernel_us"].sum() if len(unmodeled) else 0.0) + float(dur[compute_unowned].sum()),
        "comm_us": float(dur[cls == "comm"].sum()), "copy_us": float(dur[cls.isin(("memcpy", "memset"))].sum()),
    }
    return totals, note


def _mfu(trace, modeled: pd.DataFrame, dev) -> tuple:
    """(MFU, peak TFLOP/s used, step time us, warnings): matrix-family FLOPs of ops in the full step
    windows / (their total duration x the matrix peak of the dtype with the most GEMM FLOPs)."""
    mat = modeled[modeled["family"].isin(MATRIX_FAMILIES)] if len(modeled) else modeled
    if dev is None or mat.empty:
        return None, None, None, []
    by_dtype = mat.groupby("dtype")["flops"].sum().sort_values(ascending=False)
    dtype = by_dtype.index[0]
    peak = peak_of(dev, "matrix", dtype, bool(mat["tf32"].any()))
    windows, stubs = full_step_windows(trace)
    if not peak or windows.empty:
        return None, peak, None, list(stubs)
    host = pd.DataFrame({"rank": mat["rank"].to_numpy(), "step": mat["step"].to_numpy()})
    inside = step_rows(windows, host) >= 0
    wall = windows["dur_us"].to_numpy(dtype=np.float64)
    window_us = float(np.maximum(wall, queued_gpu_us(trace, windows)).sum())  # a host ahead: the GPU's time
    flops = float(mat["flops"].to_numpy()[inside].sum())
    note = [] if len(trace.steps) else ["no ProfilerStep# windows: MFU divides by the span of the trace's activity"]
    if window_us > 1.01 * wall.sum():
        note.append(f"MFU divides by the GPU time the steps queued ({window_us / 1e3:,.2f} ms), not by their windows "
                    f"({wall.sum() / 1e3:,.2f} ms): the host ran ahead of the GPU")
    return (flops / (window_us * 1e-6) / (peak * 1e12) if window_us > 0 else None), peak, window_us, note + list(stubs)
