"""The gpu_kernels investigation's roofline: achieved FLOP/s against arithmetic intensity, one point
per op class (``KernelsResult.roofline()``), under the device's memory roof and its matrix (Tensor
Core) and vector (CUDA core) roofs. Without GPU events the figure says "no GPU"; without a known
device it draws the points and says there are no roofs; without shapes it says so."""
from __future__ import annotations

import numpy as np

from .figure import label, message_figure, new_figure, no_gpu_figure, plain_ticks

TITLE = "Roofline: achieved FLOP/s per op class against the device's roofs"
_COLORS = {"gemm": "#c44e52", "conv": "#dd8452", "attention": "#8172b3", "elementwise": "#4c72b0",
           "reduction": "#55a868", "norm": "#64b5cd"}
_VECTOR_DTYPE = "fp32"


def roofline(result, *, title: str = TITLE):
    """Log-log roofline of a ``perfkit.kernels`` result: TFLOP/s (1e12 FLOP/s) against FLOP per byte
    moved, one point per op family with modeled FLOPs (area ~ its kernel time). Roofs: the memory
    roof (bandwidth x intensity), a matrix roof per dtype of the modeled ops that the device has a peak
    for (else its highest matrix peak) and the fp32 vector roof. A result without GPU events gives
    the "no GPU" figure; one without modeled ops, a figure that says so."""
    if not result.has_gpu:
        return no_gpu_figure("the trace has no kernels, copies or memsets", title)
    points = result.roofline()
    points = points[(points["tflops_per_s"] > 0) & (points["intensity"] > 0)]
    if points.empty:
        return message_figure(title, "no op with recorded shapes launched GPU work, so nothing has FLOPs to "
                                     "plot: profile with record_shapes=True")
    fig = new_figure(8.0, 4.8)
    ax = fig.add_subplot()
    x = points["intensity"].to_numpy(dtype=float)
    y = points["tflops_per_s"].to_numpy(dtype=float)
    size = 30 + 400 * points["kernel_us"].to_numpy(dtype=float) / points["kernel_us"].sum()
    for fam, xi, yi, si in zip(points["family"], x, y, size):
        ax.scatter([xi], [yi], s=si, color=_COLORS.get(fam, "#777777"), zorder=3, edgecolors="black", linewidths=0.5)
        ax.annotate(label(fam), (xi, yi), textcoords="offset points", xytext=(6, 4), fontsize=8)
    device = result.device
    lo, hi = _x_range(x, device)
    top = float(y.max())
    if device is None:
        name = result.device_name or "the trace names no device"
        ax.set_title(label(f"{title}\nno roofs: unknown device {name} (use --peaks FILE or device=...)", 160),
                     fontsize=9)
    else:
        top = _roofs(ax, device, _dtypes(result), lo, hi)
        ax.set_title(label(f"{title} ({device.name})", 160), fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_ticks(ax.xaxis)
    plain_ticks(ax.yaxis)
    ax.set_xlim(lo, hi)
    ax.set_ylim(float(y.min()) / 5, max(top, float(y.max())) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved TFLOP/s (1e12 FLOP/s)")
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig


def _dtypes(result) -> list[str]:
    """The dtypes of the modeled matrix ops the device has a matrix peak for, most FLOPs first."""
    ops = result.ops
    if ops.empty or result.device is None:
        return []
    mat = ops[(ops["unit"] == "matrix") & ops["flops"].notna()]
    by = mat.groupby("dtype")["flops"].sum().sort_values(ascending=False)
    return [d for d in by.index if d in result.device.matrix]


def _x_range(x: np.ndarray, device) -> tuple[float, float]:
    lo, hi = float(x.min()) / 4, float(x.max()) * 4
    if device is not None and device.mem_bw_gbs:
        ridges = [v for v in device.ridge.values() if v]
        hi = max(hi, max(ridges) * 4) if ridges else hi
    return max(lo, 1e-3), hi


def _roofs(ax, device, dtypes: list[str], lo: float, hi: float) -> float:
    """Draw the roofs; returns the highest one (TFLOP/s), where the y axis can stop."""
    xs = np.logspace(np.log10(lo), np.log10(hi), 200)
    bw = device.mem_bw_gbs * 1e9 / 1e12  # TFLOP/s per (FLOP/byte)
    ax.plot(xs, bw * xs, color="black", linewidth=1, linestyle=":",
            label=f"memory roof {device.mem_bw_gbs:,.0f} GB/s")
    shown = dtypes or [max(device.matrix, key=device.matrix.get)]
    for i, dtype in enumerate(shown[:3]):
        peak = device.matrix[dtype]
        ax.plot(xs, np.minimum(peak, bw * xs), color="#c44e52", linewidth=1.6 - 0.4 * i,
                label=f"matrix {dtype} {peak:,.1f} TFLOP/s")
    vector = device.vector.get(_VECTOR_DTYPE)
    if vector:
        ax.plot(xs, np.minimum(vector, bw * xs), color="#4c72b0", linewidth=1.2,
                label=f"vector {_VECTOR_DTYPE} {vector:,.1f} TFLOP/s")
    return max(device.matrix[d] for d in shown[:3])
