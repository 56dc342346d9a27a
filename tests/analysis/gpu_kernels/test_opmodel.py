"""Roofs of ``perfkit.analysis.gpu_kernels.opmodel``: which unit's peak an op is held to, measured peaks as floors,
and no percentage above 100."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.gpu_kernels.devices import DEVICES, Device
from perfkit.analysis.gpu_kernels.opmodel import _roofline, capped, peak_of, raised_roofs, unit_of


@pytest.mark.parametrize("tc, notc, dtype, unit", [
    (60.0, 40.0, "bf16", "matrix"),   # most time on Tensor Cores
    (40.0, 60.0, "bf16", "vector"),   # most time known to be off them
    (0.0, 0.0, "bf16", "matrix"),     # unknown, in a type the matrix units take
    (0.0, 0.0, "fp32", "vector"),     # unknown, fp32: the CUDA cores unless a name says otherwise
    (0.0, 49.0, "fp16", "matrix"),    # 51% unknown
    (0.0, 51.0, "fp16", "vector"),    # 49% unknown
])
def test_unit_of_table(tc, notc, dtype, unit):
    assert unit_of("gemm", tc, notc, 100.0, dtype) == unit
    assert unit_of("elementwise", tc, notc, 100.0, dtype) == "vector"


def _shapes(**rows) -> pd.DataFrame:
    return pd.DataFrame([dict(op="aten::mm", dtype="bf16", unit="matrix", bound="compute", tflops_per_s=0.0, gbs=0.0,
                              pct_of_peak=50.0) | r for r in rows.values()])


def test_measured_peaks_are_floors_the_trace_can_raise():
    measured = Device("NVIDIA H200", "NVIDIA H200", {"bf16": 797.0}, {"fp32": 50.9}, 4272.0, "test", True)
    rows = _shapes(a=dict(tflops_per_s=836.7, pct_of_peak=105.0),
                   b=dict(op="aten::fill_", dtype="fp32", unit="vector", bound="memory", gbs=4524.6, pct_of_peak=105.9))
    raised, notes = raised_roofs(measured, rows)
    assert raised.matrix["bf16"] == pytest.approx(836.7) and raised.mem_bw_gbs == pytest.approx(4524.6)
    assert "2 op shape(s) ran faster than the peaks file says" in notes[0]
    same, none = raised_roofs(measured, _shapes(a=dict(tflops_per_s=700.0, pct_of_peak=99.9)))
    assert same is measured and none == []
    datasheet = DEVICES["H200"]  # a datasheet is a ceiling: never raised
    assert raised_roofs(datasheet, rows) == (datasheet, [])


def test_no_percentage_above_100_leaves_the_table():
    table = _shapes(a=dict(pct_of_peak=171.7), b=dict(pct_of_peak=100.0))
    out, notes = capped(table, "op group(s)")
    assert np.isnan(out.loc[0, "pct_of_peak"]) and out.loc[0, "bound"] == "above roof"
    assert out.loc[1, "pct_of_peak"] == 100.0 and "1 op group(s) ran above their roof (aten::mm bf16 172%)" in notes[0]


@pytest.mark.parametrize("name", ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "rcclGenericKernel",
                                  "void c10d::symmetric_memory::multimem_all_reduce_kernel<float, 4>(...)",
                                  "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)"])
def test_one_definition_of_a_collective_on_every_surface(name):
    from perfkit.analysis.classify import is_comm
    from perfkit.analysis.gpu_kernels.kernel_classes import kernel_class

    assert kernel_class(name) == "comm" and is_comm(pd.Series([name])).all()


def _gemm_trace(path, a, b, kernel_us=10.0):
    from tracebuilder import TraceBuilder

    builder = TraceBuilder(gpu_name="NVIDIA H100 80GB HBM3")
    builder.step(0, 0, 1000)
    op = builder.cpu_op("aten::mm", 10, 50)
    op["args"].update({"Input Dims": [a, b], "Input type": ["float", "float"]})
    builder.launch("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 20, 5, gpu_ts=100, gpu_dur=kernel_us)
    return builder.write(path)


@pytest.mark.parametrize("a, b, impossible", [
    ([2**20, 2**20], [2**20, 2**19], True),   # 1.2e18 FLOPs in 10 us: 1.2e23 FLOP/s, no GPU
    ([4096, 4096], [4096, 4096], False),      # 1.4e11 FLOPs in 10 us: 13,744 TFLOP/s, under MAX_TFLOPS
])
def test_a_rate_no_gpu_reaches_is_left_unmodeled_and_said(tmp_path, a, b, impossible):
    from perfkit.analysis.gpu_kernels.breakdown import kernels
    from perfkit.analysis.gpu_kernels.opmodel import IMPOSSIBLE_RATE, MAX_TFLOPS
    from perfkit.trace import load_trace

    result = kernels(load_trace(_gemm_trace(tmp_path / "t.json", a, b), use_cache=False))
    row = result.instances.iloc[0]
    assert str(row["reason"]).startswith(IMPOSSIBLE_RATE) == impossible
    assert any("no GPU could run" in w for w in result.warnings) == impossible
    rates = result.ops["tflops_per_s"].dropna()
    assert (rates <= MAX_TFLOPS).all() and (0 <= result.totals["mfu"] <= 1 if result.totals["mfu"] is not None else True)


@pytest.mark.parametrize("second_start, overlapping", [
    (100 + 300 - 1, False),   # 1 us: rounding
    (100 + 300 - 5, False),   # 5 us of 595 busy: under 1%
    (100 + 300 - 7, True),    # 7 us: over 1% of busy time
    (150, True),              # half of each kernel
])
def test_overlap_on_one_stream_is_said_and_no_share_exceeds_one(tmp_path, second_start, overlapping):
    """Two kernels of one name on one stream, the second starting before the first ends (1 us of rounding
    tolerated): said once, and the name's share is of the time it covers."""
    from tracebuilder import TraceBuilder

    from perfkit.analysis.gpu_kernels.breakdown import kernels
    from perfkit.trace import load_trace

    b = TraceBuilder()
    b.step(0, 0, 2000)
    b.launch("gemm_kernel", 10, 5, gpu_ts=100, gpu_dur=300)
    b.launch("gemm_kernel", 20, 5, gpu_ts=second_start, gpu_dur=300)
    result = kernels(load_trace(b.write(tmp_path / "t.json"), use_cache=False))
    assert any("start before the previous one on their stream ends" in w for w in result.warnings) == overlapping
    assert result.kernels["share"].max() <= 1.0


# -- the unit's line, the peak an op is held to, the roof that binds it ------------------------------------------
@pytest.mark.parametrize("tc, notc, kernel_us, unit", [
    (50.0, 0.0, 100.0, "matrix"), (49.0, 51.0, 100.0, "vector"),   # half on Tensor Cores is enough
    (0.0, 50.0, 100.0, "matrix"),                                  # half unknown, in bf16
    (0.0, 0.0, 0.0, "vector"),                                     # no kernel time
])
def test_unit_of_at_half_the_kernel_time(tc, notc, kernel_us, unit):
    assert unit_of("gemm", tc, notc, kernel_us, "bf16") == unit


class FakeDevice:
    """peak_tflops(dtype, unit) from a table; ``matrix``: the types its matrix units take."""

    def __init__(self, peaks, matrix=("tf32", "bf16"), mem_bw_gbs=1_000.0, l2_mb=50.0):
        self.peaks, self.matrix, self.mem_bw_gbs, self.l2_mb = peaks, matrix, mem_bw_gbs, l2_mb

    def peak_tflops(self, dtype, unit):
        return self.peaks.get((dtype, unit))


_PEAKS = {("fp32", "vector"): 60.0, ("tf32", "matrix"): 400.0, ("fp32", "matrix"): 120.0, ("bf16", "matrix"): 800.0}


@pytest.mark.parametrize("device, unit, dtype, tf32, peak", [
    (None, "matrix", "bf16", False, None), (FakeDevice(_PEAKS), "matrix", None, False, None),
    (FakeDevice(_PEAKS), "matrix", "-", False, None),
    (FakeDevice(_PEAKS), "matrix", "fp32", False, 400.0),                   # FP32 matrix work on NVIDIA is TF32
    (FakeDevice(_PEAKS), "matrix", "fp32", True, 400.0),
    (FakeDevice(_PEAKS, matrix=("fp32", "bf16")), "matrix", "fp32", False, 120.0),  # a GPU with FP32 matrix units
    (FakeDevice(_PEAKS, matrix=("fp32", "bf16")), "matrix", "fp32", True, 400.0),   # unless TF32 was allowed
    (FakeDevice(_PEAKS), "matrix", "bf16", False, 800.0),
    (FakeDevice(_PEAKS), "vector", "bf16", False, 60.0),                   # no bf16 vector peak: the FP32 one
    (FakeDevice(_PEAKS), "matrix", "fp8", False, None),                    # no fp8 matrix peak: unknown
])
def test_the_peak_an_op_is_held_to(device, unit, dtype, tf32, peak):
    assert peak_of(device, unit, dtype, tf32) == peak


def _groups(**columns) -> pd.DataFrame:
    base = {"flops": 1e9, "intensity": 10.0, "peak_tflops": 100.0, "tflops_per_s": 50.0, "gbs": 500.0,
            "read_bytes": 1e6, "bytes": 2e6, "calls": 1}
    return pd.DataFrame([base | columns])


@pytest.mark.parametrize("columns, bound, pct", [
    ({"intensity": 100.0}, "compute", 50.0),               # at the ridge (100 TFLOP/s over 1,000 GB/s): compute
    ({"intensity": 99.9}, "memory", 50.0),                 # under it: held to the memory roof
    ({"gbs": 1_500.0}, "memory (L2)", 150.0),              # above the memory roof, reads and writes within L2
    ({"gbs": 1_500.0, "read_bytes": 60e6, "bytes": 61e6}, "memory", 150.0),  # reads more than L2 holds
    ({"gbs": 1_500.0, "read_bytes": 1e6, "bytes": 61e6}, "memory", 150.0),   # writes more than L2 holds
    ({"gbs": 1_500.0, "read_bytes": 100e6, "bytes": 200e6, "calls": 4}, "memory (L2)", 150.0),  # per call within L2
    ({"gbs": 1_000.0}, "memory", 100.0),                   # at the roof: not above it
    ({"peak_tflops": None}, None, None), ({"intensity": float("nan")}, None, None), ({"flops": float("nan")}, None, None),
])
def test_the_roof_that_binds_an_op(columns, bound, pct):
    assert _roofline(_groups(**columns), FakeDevice(_PEAKS)) == ([bound], [pct])


def test_no_device_no_roof():
    assert _roofline(_groups(), None) == ([None], [None])
