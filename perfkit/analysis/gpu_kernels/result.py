"""``KernelsResult``: the kernel table, the per-op roofline table, totals, findings and warnings."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...results import findings_frame, html_section, html_table, html_text, html_warnings
from ...text import jsonable
from .opmodel import INSTANCE_COLUMNS, OP_COLUMNS, SHAPE_COLUMNS

KERNEL_COLUMNS = ["name", "cat", "calls", "total_us", "share", "class", "tensor_core", "dtype"]
ROOFLINE_COLUMNS = ["family", "flops", "bytes", "kernel_us", "tflops_per_s", "intensity"]


@dataclass(frozen=True, eq=False, repr=False)
class KernelsResult:
    """``kernels``: per GPU event name (``KERNEL_COLUMNS``; ``share`` of GPU busy time, ``tensor_core``
    True/False/None). ``ops``: per (op, family, dtype) (``opmodel.OP_COLUMNS``). ``shapes``: per (op, input
    shape, dtype) with modeled FLOPs, on the roofline (``opmodel.SHAPE_COLUMNS``). ``instances``: one row
    per op that owns GPU work. ``timeline``: the steps' GPU time as computation, exposed communication, exposed
    copies and idle (``time_split.gpu_timeline``; empty without steps). ``totals``: see
    :func:`perfkit.analysis.gpu_kernels.kernels`. ``device``:
    the :class:`~.devices.Device` or None when unknown. ``has_gpu``: False for a trace without GPU events."""

    device: object
    device_name: str
    kernels: pd.DataFrame
    ops: pd.DataFrame
    shapes: pd.DataFrame
    instances: pd.DataFrame
    timeline: dict
    totals: dict
    findings: tuple
    warnings: tuple
    has_gpu: bool

    @classmethod
    def empty(cls, device, device_name: str, warnings: tuple) -> "KernelsResult":
        return cls(device=device, device_name=device_name, kernels=pd.DataFrame(columns=KERNEL_COLUMNS),
                   ops=pd.DataFrame(columns=OP_COLUMNS), shapes=pd.DataFrame(columns=SHAPE_COLUMNS),
                   instances=pd.DataFrame(columns=INSTANCE_COLUMNS), timeline={},
                   totals={}, findings=(), warnings=warnings, has_gpu=False)

    def to_frame(self) -> pd.DataFrame:
        return self.kernels.copy()

    def top(self, n: int = 20) -> pd.DataFrame:
        return self.kernels.head(n).reset_index(drop=True)

    def roofline(self) -> pd.DataFrame:
        """One point per op family with modeled FLOPs: summed FLOPs, bytes and kernel time, achieved
        TFLOP/s and arithmetic intensity (FLOP/byte) (``ROOFLINE_COLUMNS``)."""
        inst = self.instances
        if inst.empty:
            return pd.DataFrame(columns=ROOFLINE_COLUMNS)
        m = inst[inst["modeled"].astype(bool)]
        g = m.groupby("family").agg(flops=("flops", "sum"), bytes=("bytes", "sum"), kernel_us=("kernel_us", "sum"))
        g = g[g["kernel_us"] > 0].reset_index()
        g["tflops_per_s"] = g["flops"] / g["kernel_us"] / 1e6
        g["intensity"] = g["flops"] / g["bytes"].where(g["bytes"] > 0)
        return g[ROOFLINE_COLUMNS]

    def gemm_by_dtype(self) -> pd.DataFrame:
        """GEMM-class kernel time per (dtype, tensor_core): calls, total_us, share of GEMM time."""
        k = self.kernels[self.kernels["class"] == "gemm"]
        if k.empty:
            return pd.DataFrame(columns=["dtype", "tensor_core", "calls", "total_us", "gemm_share"])
        g = (k.assign(dtype=k["dtype"].fillna("?"), tensor_core=k["tensor_core"].map({True: "yes", False: "no"}).fillna("?"))
             .groupby(["dtype", "tensor_core"]).agg(calls=("calls", "sum"), total_us=("total_us", "sum")).reset_index())
        g["gemm_share"] = g["total_us"] / g["total_us"].sum()
        return g.sort_values("total_us", ascending=False, ignore_index=True)

    def to_json(self, top: int | None = None) -> dict:
        kernels = self.kernels if top is None else self.kernels.head(top)
        ops = self.ops if top is None else self.ops.head(top)
        shapes = self.shapes if top is None else self.shapes.head(top)
        return jsonable({
            "device": self._device_json(), "has_gpu": self.has_gpu,
            "kernels": [_kernel_json(r) for r in kernels.to_dict("records")],
            "ops": [_op_json(r) for r in ops.to_dict("records")],
            "shapes": [_shape_json(r) for r in shapes.to_dict("records")],
            "totals": dict(self.totals), "timeline": dict(self.timeline), "findings": [dict(f.__dict__) for f in self.findings],
            "warnings": list(self.warnings),
        })

    def _device_json(self) -> dict:
        if self.device is None:
            return {"name": self.device_name or None, "peaks": None, "mem_bw_gbs": None, "source": None}
        return {**self.device.to_json(), "name": self.device_name or self.device.name}

    def __repr__(self) -> str:
        if not self.has_gpu:
            return "<KernelsResult: no GPU activity>"
        t = self.totals
        tc = f"{t['tensor_core_share']:.0%}" if t.get("tensor_core_share") is not None else "n/a"
        return (f"<KernelsResult {len(self.kernels)} kernels, {t['busy_us'] / 1e3:,.3f} ms GPU busy, "
                f"GEMM {t['gemm_us'] / 1e3:,.3f} ms (Tensor Cores {tc}), {len(self.findings)} findings, "
                f"{len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        return html_section("What the GPU does with its time", html_text(repr(self)),
                            html_table(findings_frame(self.findings)), html_table(self.top()),
                            html_table(self.ops), html_warnings(self.warnings))


def _kernel_json(r: dict) -> dict:
    return {"name": r["name"], "calls": r["calls"], "total_us": r["total_us"], "share": r["share"],
            "class": r["class"], "tensor_core": r["tensor_core"], "dtype": r["dtype"]}


def _shape_json(r: dict) -> dict:
    """A row of ``shapes``: ``pct_of_roof`` is the share of the roofline the group reaches, ``bound`` which roof
    binds it (compute or memory)."""
    out = {k: r[k] for k in ("op", "shape", "dtype", "calls", "kernel_us", "flops", "bytes", "tflops_per_s", "gbs",
                             "intensity", "roofline_us", "bound")}
    out["pct_of_roof"] = r["pct_of_peak"]
    return out


def _op_json(r: dict) -> dict:
    out = {k: r[k] for k in ("op", "family", "dtype", "calls", "flops", "bytes", "kernel_us", "tflops_per_s", "gbs",
                             "intensity", "unit", "pct_of_peak", "bound")}
    out["modeled"] = bool(r["flops"] == r["flops"])  # NaN: no shapes or no model
    return out
