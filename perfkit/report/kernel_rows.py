"""The gpu_kernels investigation's perf-log rows: GEMM TFLOP/s, Tensor Core share of GEMM time and
model FLOP/s utilisation of a ``perfkit.kernels`` result (rows.py holds the other investigations'
rows; this one lives apart to keep that module under 400 lines)."""
from __future__ import annotations

from .rows import exact, finite_rows, row

INVESTIGATION = "gpu_kernels"


def kernel_rows(result, subject: str, device: str, investigation: str = INVESTIGATION) -> list[dict]:
    """Perf-log rows of a ``kernels`` result, each higher-is-better and only when defined:

    * ``gemm_tflops_per_s``: GEMM FLOPs (2*M*N*K of the ops with shapes) / their kernel time, TFLOP/s;
    * ``tensor_core_share_pct``: % of GEMM kernel time in kernels whose names say Tensor Cores;
    * ``mfu_pct``: matrix FLOPs in the full profiled steps / (step time x the device's matrix peak), %.

    Totals over a trace file are fixed by the file (CI exact); a trace without GPU events gives no rows."""
    if not result.has_gpu:
        return []
    t = result.totals
    base = dict(subject=subject, device=device, higher_is_better=True)
    values = [("gemm_tflops_per_s", t.get("gemm_tflops_per_s"), "TFLOP/s", 1.0),
              ("tensor_core_share_pct", t.get("tensor_core_share"), "%", 100.0),
              ("mfu_pct", t.get("mfu"), "%", 100.0)]
    rows = [row(investigation, metric, value * scale, unit, ci=_ci(subject, value * scale), **base)
            for metric, value, unit, scale in values if value is not None]
    return finite_rows(rows)


def _ci(subject: str, value: float):
    return exact(value) if subject.startswith("trace ") else None
