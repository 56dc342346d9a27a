"""Per op: its kernels' time, its FLOPs and bytes (from shapes), and where it sits on the roofline.

``op_instances`` is one row per op that owns GPU work (see :mod:`.attribute`); ``op_table`` groups
them by (op, family, dtype) and places each group against the device's roofs: achieved TFLOP/s and
GB/s over the op's kernel time, arithmetic intensity (FLOP/byte), compute- or memory-bound against the
ridge point of the peak that applies (matrix units when its kernels run on Tensor Cores, vector units
otherwise), and the percentage of the roof that binds it.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .args import Model, compact, parse_args
from .kernel_classes import torch_dtype
from .devices import DEVICES
from .flops import GEMM_OPS, MATRIX_FAMILIES, gemm_mnk, model, op_family

INSTANCE_COLUMNS = ["label", "op", "family", "rank", "step", "kernel_us", "tc_us", "notc_us", "tf32", "dtype",
                    "flops", "bytes", "read_bytes", "modeled", "reason", "m", "n", "k", "input_dims"]
OP_COLUMNS = ["op", "family", "dtype", "calls", "flops", "bytes", "kernel_us", "tensor_core_share", "tflops_per_s",
              "gbs", "intensity", "unit", "peak_tflops", "pct_of_peak", "bound"]
# One row per op and input shape (TraceLens's per-shape table): ``shape`` is the op's Input Dims as recorded,
# ``roofline_us`` the time the roof allows for its FLOPs and bytes (max of compute and memory time).
SHAPE_COLUMNS = ["op", "shape", "dtype", "family", "calls", "kernel_us", "flops", "bytes", "tflops_per_s", "gbs",
                 "intensity", "unit", "peak_tflops", "roofline_us", "pct_of_peak", "bound"]


# Rates no GPU reaches, whatever the device: twice the highest dense peak perfkit knows (B200 fp4) and ten
# times the highest memory bandwidth (caches can beat HBM a few times over, never tenfold). An op above
# either has shapes or kernel times that are wrong: it is left unmodeled (its reason says so), never shown.
MAX_TFLOPS = 2 * max(max(d.matrix.values(), default=0) for d in DEVICES.values())
MAX_GBS = 10 * max(d.mem_bw_gbs for d in DEVICES.values())
IMPOSSIBLE_RATE = "impossible rate"
# The bound of an op above the memory roof that read, and wrote, at most the device's L2 per call (``capped``): its
# inputs can come from the cache, where the previous kernel wrote them, and its output stay there, so the figure is
# not a modeling error (a fill_ writing 128 MB past a 50 MB L2 is).
L2_BOUND = "memory (L2)"


def op_instances(trace, links: pd.DataFrame, shapes: pd.DataFrame) -> pd.DataFrame:
    """One row per owner op (``INSTANCE_COLUMNS``); ``flops``/``bytes`` NaN and ``reason`` set when unmodeled."""
    owned = links[links["owner"] >= 0]
    if owned.empty:
        return pd.DataFrame(columns=INSTANCE_COLUMNS)
    ev = trace.events
    per = _per_owner(owned)
    labels = per.index.to_numpy()
    # Only the owners' names: converting the whole 2M-row name column to strings costs most of kernels().
    per["op"] = ev["name"].iloc[labels].to_numpy().astype(str)
    per["rank"] = ev["rank"].to_numpy()[labels]
    per["step"] = ev["step"].to_numpy()[labels]
    per["family"] = [op_family(o) or c for o, c in zip(per["op"], per["main_class"])]
    parents = ev["parent"].to_numpy()[labels]
    per["parent_op"] = np.where(parents >= 0, ev["name"].iloc[np.clip(parents, 0, None)].to_numpy().astype(str), "")
    text = shapes.reindex(labels)
    for col in ("input_dims", "input_types", "concrete_inputs"):
        per[col] = text[col].astype(object).fillna("").to_numpy() if col in text else ""
    per = _impossible_rates(_with_models(per))
    return per.reset_index(names="label")[INSTANCE_COLUMNS]


def _impossible_rates(per: pd.DataFrame) -> pd.DataFrame:
    """Instances whose FLOPs or bytes over their kernel time exceed ``MAX_TFLOPS``/``MAX_GBS`` unmodeled."""
    us = per["kernel_us"].where(per["kernel_us"] > 0)
    tflops, gbs = per["flops"] / us / 1e6, per["bytes"] / us / 1e3
    over = ((tflops > MAX_TFLOPS) | (gbs > MAX_GBS)).to_numpy()
    if over.any():
        per.loc[over, "reason"] = [f"{IMPOSSIBLE_RATE} ({t:,.3g} TFLOP/s, {b:,.3g} GB/s over {k:g} us: more than any "
                                   "GPU): not modeled" for t, b, k in zip(tflops[over], gbs[over], per["kernel_us"][over])]
        per.loc[over, ["flops", "bytes", "read_bytes"]] = np.nan
        per.loc[over, "modeled"] = False
    return per


def _per_owner(owned: pd.DataFrame) -> pd.DataFrame:
    dur = owned["dur_us"].to_numpy()
    tc = owned["tensor_core"]
    frame = pd.DataFrame({
        "owner": owned["owner"].to_numpy(), "kernel_us": dur,
        "tc_us": np.where(tc.fillna(False).to_numpy(dtype=bool), dur, 0.0),
        "notc_us": np.where((~tc.fillna(True)).to_numpy(dtype=bool) & owned["class"].isin(MATRIX_FAMILIES).to_numpy(),
                            dur, 0.0),
        "tf32": (owned["name_dtype"] == "tf32").to_numpy(),
    })
    per = frame.groupby("owner").agg(kernel_us=("kernel_us", "sum"), tc_us=("tc_us", "sum"),
                                     notc_us=("notc_us", "sum"), tf32=("tf32", "any"))
    by_class = owned.groupby(["owner", "class"])["dur_us"].sum().reset_index()
    main = by_class.sort_values("dur_us", ascending=False, kind="stable").drop_duplicates("owner")
    per["main_class"] = main.set_index("owner")["class"].reindex(per.index).to_numpy()
    return per


def _with_models(per: pd.DataFrame) -> pd.DataFrame:
    keys = ["op", "family", "input_dims", "input_types", "concrete_inputs", "parent_op"]
    distinct = per[keys].drop_duplicates()
    rows = []
    for op, family, dims, types, concrete, parent in distinct.itertuples(index=False):
        d, t, c = parse_args(dims, types, concrete)
        m = model(op, family, d, t, c, parent)
        mnk = gemm_mnk(op, d) if isinstance(m, Model) and op in GEMM_OPS else (np.nan,) * 4
        dtype = m.dtype if isinstance(m, Model) else _first_type(t)
        rows.append((op, family, dims, types, concrete, parent, *(
            (m.flops, m.bytes, m.read_bytes, True, "") if isinstance(m, Model) else (np.nan, np.nan, np.nan, False, m)),
            dtype, *mnk[1:]))
    models = pd.DataFrame(rows, columns=keys + ["flops", "bytes", "read_bytes", "modeled", "reason", "dtype", "m", "n",
                                                "k"])
    out = per.reset_index(names="label").merge(models, on=keys, how="left").set_index("label")
    out.loc[out["family"].isin(("memcpy", "memset", "comm")), "reason"] = "copies and collectives are not modeled"
    return out


def _first_type(types: list):
    for t in types:
        known = torch_dtype(t) if isinstance(t, str) else None
        if known:
            return known[0]
    return None


def op_table(instances: pd.DataFrame, device) -> pd.DataFrame:
    """Instances grouped by (op, family, dtype), placed on the device's roofline (``OP_COLUMNS``).
    Without a known device, ``peak_tflops``, ``pct_of_peak`` and ``bound`` are empty."""
    if instances.empty:
        return pd.DataFrame(columns=OP_COLUMNS)
    return _grouped(instances, ["op", "family", "dtype"], device)[OP_COLUMNS]


def shape_table(instances: pd.DataFrame, device) -> pd.DataFrame:
    """Instances with modeled FLOPs grouped by (op, input shape, dtype), placed on the roofline
    (``SHAPE_COLUMNS``), most kernel time first. ``roofline_us``: the time the device's roofs allow for the
    group's FLOPs and bytes; ``pct_of_peak`` is that over the measured time."""
    modeled = instances[instances["modeled"].astype(bool)] if len(instances) else instances
    if modeled.empty:
        return pd.DataFrame(columns=SHAPE_COLUMNS)
    shape = modeled["input_dims"].astype(str)
    text = {t: compact(t) for t in shape.unique()}
    g = _grouped(modeled.assign(shape=shape.map(text)), ["op", "shape", "family", "dtype"], device)
    bw = device.mem_bw_gbs if device is not None else 0.0
    compute_us = g["flops"] / (g["peak_tflops"].astype(float) * 1e6)
    memory_us = g["bytes"] / (bw * 1e3) if bw else pd.Series(float("nan"), index=g.index)
    g["roofline_us"] = np.fmax(compute_us, memory_us).where(g["peak_tflops"].notna())
    return g[SHAPE_COLUMNS]


def _grouped(instances: pd.DataFrame, keys: list, device) -> pd.DataFrame:
    """Instances summed per ``keys`` with their achieved rates and place on ``device``'s roofline."""
    inst = instances.assign(dtype=instances["dtype"].fillna("-"))
    g = inst.groupby(keys, sort=False).agg(
        calls=("label", "size"), flops=("flops", lambda s: s.sum(min_count=1)),
        bytes=("bytes", lambda s: s.sum(min_count=1)), read_bytes=("read_bytes", lambda s: s.sum(min_count=1)),
        kernel_us=("kernel_us", "sum"), tc_us=("tc_us", "sum"),
        notc_us=("notc_us", "sum"), tf32=("tf32", "any")).reset_index()
    us = g["kernel_us"].where(g["kernel_us"] > 0)
    g["tensor_core_share"] = g["tc_us"] / us
    g["tflops_per_s"] = g["flops"] / us / 1e6
    g["gbs"] = g["bytes"] / us / 1e3
    g["intensity"] = g["flops"] / g["bytes"].where(g["bytes"] > 0)
    g["unit"] = [unit_of(f, tc, notc, k, d) for f, tc, notc, k, d in
                 zip(g["family"], g["tc_us"], g["notc_us"], g["kernel_us"], g["dtype"])]
    g["peak_tflops"] = [peak_of(device, u, d, tf) for u, d, tf in zip(g["unit"], g["dtype"], g["tf32"])]
    bound, pct = _roofline(g, device)
    g["bound"] = pd.Series(bound, index=g.index, dtype=object)
    g["pct_of_peak"] = pd.Series(pct, index=g.index, dtype=float)
    g["dtype"] = g["dtype"].replace("-", None)
    return g.sort_values("kernel_us", ascending=False, kind="stable", ignore_index=True)


# Matrix work in these types runs on Tensor Cores (matrix cores) whenever the GPU has them: where no kernel
# name says so either way, its roof is the matrix unit's (an MI300X bf16 flash attention at 280.6 TFLOP/s
# read 171.7% of the fp32 vector roof).
MATRIX_DTYPES = ("bf16", "fp16", "fp8", "int8", "tf32")


def unit_of(family: str, tc_us: float, notc_us: float, kernel_us: float, dtype=None) -> str:
    """"matrix" when most of the op's kernel time is on Tensor Cores, or when its Tensor Core status is unknown
    for most of it and its type is one the matrix units take (``MATRIX_DTYPES``); else "vector"."""
    if family not in MATRIX_FAMILIES or kernel_us <= 0:
        return "vector"
    if tc_us >= 0.5 * kernel_us:
        return "matrix"
    unknown = kernel_us - tc_us - notc_us
    return "matrix" if dtype in MATRIX_DTYPES and unknown >= 0.5 * kernel_us else "vector"


def peak_of(device, unit: str, dtype, tf32: bool):
    """Peak TFLOP/s for ``dtype`` on ``unit`` of ``device`` (FP32 on NVIDIA matrix units is TF32), or None."""
    if device is None or dtype in (None, "-"):
        return None
    if unit == "matrix" and dtype == "fp32":
        return device.peak_tflops("fp32", "matrix") if not tf32 and "fp32" in device.matrix else \
            device.peak_tflops("tf32", "matrix")
    return device.peak_tflops(dtype, unit) or (device.peak_tflops("fp32", "vector") if unit == "vector" else None)


def _roofline(g: pd.DataFrame, device) -> tuple[list, list]:
    """Per group: the roof that binds it ("compute", "memory", or "memory (L2)": above the memory roof with what it
    reads and what it writes per call each within the device's last cache, ``L2_BOUND``) and its percentage of
    that roof."""
    bound, pct = [], []
    bw = device.mem_bw_gbs if device is not None else 0.0
    l2 = device.l2_mb * 1e6 if device is not None else 0.0
    read, written = g["read_bytes"] / g["calls"], (g["bytes"] - g["read_bytes"]) / g["calls"]
    for flops, ai, peak, tflops, gbs, per_read, per_write in zip(g["flops"], g["intensity"], g["peak_tflops"],
                                                                 g["tflops_per_s"], g["gbs"], read, written):
        if not bw or pd.isna(peak) or pd.isna(ai) or pd.isna(flops):  # a column of peaks holds NaN, not None
            bound.append(None)
            pct.append(None)
            continue
        ridge = peak * 1e12 / (bw * 1e9)
        compute = ai >= ridge
        share = 100.0 * (tflops / peak if compute else gbs / bw)
        cached = not compute and share > 100.0 and per_read <= l2 and per_write <= l2  # NaN compares False
        bound.append("compute" if compute else L2_BOUND if cached else "memory")
        pct.append(share)
    return bound, pct


def raised_roofs(device, shapes: pd.DataFrame) -> tuple:
    """(device, warnings): a measured device (``device.measured``) whose roofs this trace beats gets them
    raised to the best rate it reached, with a warning (a measured peak is a floor of what the card does:
    an H200's 8192-cube bf16 GEMM measured 797 TFLOP/s, a 1024x32768x4096 one in a training step ran 837).
    Datasheet peaks are left alone (a rate above them is a modeling error, ``capped``). Each row raises the roof
    ``peak_of`` held it to (``_roof_of``); a row whose roof the device lacks (fp16 work, a peaks file without fp16)
    raises none: with no roof it has no percentage."""
    if device is None or not device.measured or shapes.empty:
        return device, []
    over = shapes[(shapes["pct_of_peak"].astype(float) > 100.0) & (shapes["bound"] != L2_BOUND)]
    if over.empty:
        return device, []
    matrix, vector, bw = dict(device.matrix), dict(device.vector), device.mem_bw_gbs
    beaten = 0
    for r in over.to_dict("records"):
        if r["bound"] == "memory":
            bw, beaten = max(bw, float(r["gbs"])), beaten + 1
            continue
        peaks = matrix if r["unit"] == "matrix" else vector
        key = _roof_of(device.matrix if r["unit"] == "matrix" else device.vector, r["unit"], r["dtype"],
                       r.get("peak_tflops"))
        if key is None:  # no roof of this device for it: peak_of gives it none, so it has no percentage to show
            continue
        peaks[key], beaten = max(peaks[key], float(r["tflops_per_s"])), beaten + 1
    if not beaten:
        return device, []
    raised = dataclasses.replace(device, matrix=matrix, vector=vector, mem_bw_gbs=bw)
    changes = [f"{u} {k} {old[k]:g} -> {new[k]:.1f} TFLOP/s" for u, old, new in
               (("matrix", device.matrix, matrix), ("vector", device.vector, vector)) for k in new
               if new[k] != old[k]] + ([f"memory {device.mem_bw_gbs:g} -> {bw:.0f} GB/s"] if bw != device.mem_bw_gbs else [])
    return raised, [f"{beaten} op shape(s) ran faster than the peaks file says ({', '.join(changes)}): measured "
                    "peaks are a floor of what the card does, so those roofs are raised to the rates reached here; "
                    "measure again (perfkit validate --write-peaks) to keep a file that holds"]


def _roof_of(peaks: dict, unit: str, dtype, peak):
    """The key of ``peaks`` (one unit's) whose roof ``peak_of`` held a row of ``unit`` and ``dtype`` to: on matrix
    units fp32 work's is TF32 or FP32 (the one at the row's ``peak``, else TF32), on vector units a type without
    its own is held to FP32's; None when the device has no such roof."""
    if unit == "matrix" and dtype == "fp32":
        keys = [k for k in ("tf32", "fp32") if k in peaks]
        return next((k for k in keys if peaks[k] == peak), keys[0] if keys else None)
    return next((k for k in ((dtype,) if unit == "matrix" else (dtype, "fp32")) if k in peaks), None)


def capped(table: pd.DataFrame, what: str) -> tuple:
    """(table, warnings): rows above 100% of their roof lose their percentage and read "above roof" (a share of
    a peak above 100% is a modeling error: FLOPs or bytes overcounted, or the wrong roof), with one warning; rows
    above the memory roof whose inputs fit in L2 (``L2_BOUND``) keep it, with a warning that says so."""
    if table.empty:
        return table, []
    above = table["pct_of_peak"].astype(float) > 100.0
    cached = above & (table["bound"] == L2_BOUND)
    over = above & ~cached
    notes = [] if not cached.any() else [
        f"{int(cached.sum())} {what} ran above the memory roof ({_listed(table[cached])}) with inputs that fit in the "
        f"GPU's L2 (read and written per call each at most its size): the previous kernel can leave them there, so "
        f"their percentage of the memory roof is shown, marked {L2_BOUND!r}"]
    if not over.any():
        return table, notes
    names = _listed(table[over])
    table = table.copy()
    table.loc[over, "pct_of_peak"] = np.nan
    table.loc[over, "bound"] = "above roof"
    return table, notes + [f"{int(over.sum())} {what} ran above their roof ({names}): their FLOPs or bytes are "
                           "overcounted or the roof is not theirs, so no percentage is shown for them"]


def _listed(rows: pd.DataFrame) -> str:
    return ", ".join(f"{r['op']} {r['dtype'] or '-'} {r['pct_of_peak']:.0f}%" for r in rows.head(3).to_dict("records"))
