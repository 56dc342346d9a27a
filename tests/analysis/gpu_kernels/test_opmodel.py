"""Roofs of ``perfkit.analysis.gpu_kernels.opmodel``: which unit's peak an op is held to, measured peaks as floors,
and no percentage above 100."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.gpu_kernels.devices import DEVICES, Device
from perfkit.analysis.gpu_kernels.opmodel import L2_BOUND, _roofline, capped, peak_of, raised_roofs, unit_of


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


# -- op_instances, op_table, shape_table on one small trace: every column by hand ---------------------------------
BF16 = "c10::BFloat16"
TC_GEMM = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
           "kernel__5x_cublas")
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()"
NE = "void at::native::vectorized_elementwise_kernel<4, at::native::CompareNEFunctor<float>>()"


def _op(b, name, ts, dims=None, types=None, dur=50):
    e = b.cpu_op(name, ts, dur)
    if dims is not None:
        e["args"]["Input Dims"] = dims
    if types is not None:
        e["args"]["Input type"] = types
    return e


@pytest.fixture(scope="module")
def ops_trace(tmp_path_factory):
    """On an H100 SXM: two bf16 mm of one shape (the first inside a linear, with a fill kernel of 10 us besides its
    30 us Tensor Core GEMM), an fp32 add, an fp32 mm on a CUDA-core sgemm (10 us) and a TF32 GEMM (4 us), an ne
    under isnan (one tensor read twice) and one not, a copy, an op of an unmodeled family with a type, one with
    neither shapes nor types."""
    from tracebuilder import TraceBuilder

    from perfkit.analysis.gpu_kernels.attribute import kernel_links
    from perfkit.trace import load_trace
    from perfkit.trace.loader.shapes import op_shapes

    b = TraceBuilder(gpu_name="NVIDIA H100 80GB HBM3")
    b.step(0, 0, 5000)
    b.cpu_op("aten::linear", 5, 200)
    _op(b, "aten::mm", 10, [[256, 512], [512, 1024]], [BF16, BF16])
    b.launch(TC_GEMM, 20, 5, gpu_ts=100, gpu_dur=30)
    b.launch(FILL, 30, 5, gpu_ts=140, gpu_dur=10)
    _op(b, "aten::mm", 1000, [[256, 512], [512, 1024]], [BF16, BF16])
    b.launch(TC_GEMM, 1010, 5, gpu_ts=1100, gpu_dur=30)
    _op(b, "aten::add", 300, [[1024, 1024], [1024, 1024], []], ["float", "float", "Scalar"])
    b.launch(ADD, 310, 5, gpu_ts=400, gpu_dur=20)
    _op(b, "aten::mm", 1500, [[128, 128], [128, 128]], ["float", "float"])
    b.launch("volta_sgemm_128x64_nn", 1510, 5, gpu_ts=1600, gpu_dur=10)
    b.launch("sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", 1520, 5, gpu_ts=1620, gpu_dur=4)
    b.cpu_op("aten::isnan", 2000, 100)
    _op(b, "aten::ne", 2010, [[1000], [1000]], ["float", "float"])
    b.launch(NE, 2020, 5, gpu_ts=2100, gpu_dur=5)
    _op(b, "aten::ne", 2200, [[1000], [1000]], ["float", "float"])
    b.launch(NE, 2220, 5, gpu_ts=2300, gpu_dur=5)
    _op(b, "aten::copy_", 500, [[512]], ["float"])
    b.memcpy("HtoD", "Pageable", 510, 5, 600, 50, 1 << 20)
    _op(b, "aten::mystery", 700, [[4]], ["Scalar", BF16])
    b.launch("mystery_kernel", 710, 5, gpu_ts=800, gpu_dur=40)
    _op(b, "aten::unshaped", 2500)
    b.launch("other_kernel", 2510, 5, gpu_ts=2600, gpu_dur=6)
    trace = load_trace(b.write(tmp_path_factory.mktemp("ops") / "t.json"), use_cache=False)
    links = kernel_links(trace)
    return trace, links, op_shapes(trace, use_cache=False)


def _records(frame, columns):
    return [tuple(None if (isinstance(v, float) and np.isnan(v)) or v is None else v for v in row)
            for row in frame[columns].itertuples(index=False)]


def test_op_instances_column_by_column(ops_trace):
    from perfkit.analysis.gpu_kernels.opmodel import INSTANCE_COLUMNS, op_instances

    inst = op_instances(*ops_trace)
    assert list(inst.columns) == INSTANCE_COLUMNS
    mm_bf16 = (2 * 256 * 1024 * 512, 256 * 512 * 2 + 512 * 1024 * 2 + 256 * 1024 * 2, 256 * 512 * 2 + 512 * 1024 * 2)
    assert _records(inst, ["op", "family", "rank", "step", "kernel_us", "tc_us", "notc_us", "tf32", "dtype"]) == [
        ("aten::mm", "gemm", 0, 0, 40.0, 30.0, 0.0, False, "bf16"),      # the fill kernel counts, off Tensor Cores unknown
        ("aten::mm", "gemm", 0, 0, 30.0, 30.0, 0.0, False, "bf16"),
        ("aten::add", "elementwise", 0, 0, 20.0, 0.0, 0.0, False, "fp32"),  # off Tensor Cores, but not matrix work
        ("aten::mm", "gemm", 0, 0, 14.0, 4.0, 10.0, True, "fp32"),       # sgemm off them, a TF32 kernel on them
        ("aten::ne", "elementwise", 0, 0, 5.0, 0.0, 0.0, False, "fp32"),
        ("aten::ne", "elementwise", 0, 0, 5.0, 0.0, 0.0, False, "fp32"),
        ("aten::copy_", "memcpy", 0, 0, 50.0, 0.0, 0.0, False, "fp32"),
        ("aten::mystery", "other", 0, 0, 40.0, 0.0, 0.0, False, "bf16"),  # its first tensor type
        ("aten::unshaped", "other", 0, 0, 6.0, 0.0, 0.0, False, None),
    ]
    assert _records(inst, ["flops", "bytes", "read_bytes", "modeled", "m", "n", "k"]) == [
        (*mm_bf16, True, 256, 1024, 512), (*mm_bf16, True, 256, 1024, 512),
        (1024 * 1024, 3 * 4 * 1024 * 1024, 2 * 4 * 1024 * 1024, True, None, None, None),
        (2 * 128 ** 3, 3 * 4 * 128 * 128, 2 * 4 * 128 * 128, True, 128, 128, 128),
        (1000, 5000, 4000, True, None, None, None),   # under isnan: self != self reads one tensor
        (1000, 9000, 8000, True, None, None, None),
        (None, None, None, False, None, None, None), (None, None, None, False, None, None, None),
        (None, None, None, False, None, None, None),
    ]
    reasons = list(inst["reason"])
    assert reasons[:6] == [""] * 6 and reasons[6] == "copies and collectives are not modeled"
    assert reasons[7] == "other ops are not modeled" and reasons[8] == "no Input Dims (record_shapes=False)"
    assert list(inst["input_dims"])[0] == "[[256, 512], [512, 1024]]" and list(inst["input_dims"])[8] == ""
    ev = ops_trace[0].events
    assert list(ev["name"].iloc[inst["label"]]) == list(inst["op"])


def test_op_instances_without_owned_kernels(ops_trace):
    from perfkit.analysis.gpu_kernels.opmodel import INSTANCE_COLUMNS, op_instances

    trace, links, shapes = ops_trace
    empty = op_instances(trace, links.assign(owner=-1), shapes)
    assert empty.empty and list(empty.columns) == INSTANCE_COLUMNS


def test_op_table_on_the_roofline(ops_trace):
    from perfkit.analysis.gpu_kernels.opmodel import OP_COLUMNS, op_instances, op_table

    inst = op_instances(*ops_trace)
    h100 = DEVICES["H100-SXM"]
    table = op_table(inst, h100)
    assert list(table.columns) == OP_COLUMNS
    assert _records(table, ["op", "dtype", "calls", "kernel_us", "unit", "bound"]) == [  # most kernel time first
        ("aten::mm", "bf16", 2, 70.0, "matrix", "memory"), ("aten::copy_", "fp32", 1, 50.0, "vector", None),
        ("aten::mystery", "bf16", 1, 40.0, "vector", None), ("aten::add", "fp32", 1, 20.0, "vector", "memory"),
        ("aten::mm", "fp32", 1, 14.0, "vector", "compute"), ("aten::ne", "fp32", 2, 10.0, "vector", "memory"),
        ("aten::unshaped", None, 1, 6.0, "vector", None),
    ]
    mm = table.iloc[0]
    flops, nbytes = 2 * 2.0 * 256 * 1024 * 512, 2 * 1835008.0
    assert (mm["flops"], mm["bytes"]) == (flops, nbytes) and mm["tensor_core_share"] == pytest.approx(60 / 70)
    assert mm["tflops_per_s"] == pytest.approx(flops / 70e-6 / 1e12) and mm["gbs"] == pytest.approx(nbytes / 70e-6 / 1e9)
    assert mm["intensity"] == pytest.approx(flops / nbytes) and mm["peak_tflops"] == h100.peak_tflops("bf16", "matrix")
    assert mm["pct_of_peak"] == pytest.approx(100 * nbytes / 70e-6 / 1e9 / h100.mem_bw_gbs)  # under the ridge: memory
    small = table.iloc[4]
    assert small["peak_tflops"] == h100.peak_tflops("fp32", "vector") and small["tensor_core_share"] == pytest.approx(4 / 14)
    assert small["pct_of_peak"] == pytest.approx(100 * 2 * 128 ** 3 / 14e-6 / 1e12 / small["peak_tflops"])
    assert np.isnan(table.iloc[1]["flops"]) and np.isnan(table.iloc[1]["intensity"]) and table.iloc[1]["peak_tflops"] is not None
    assert pd.isna(table.iloc[6]["peak_tflops"]) and np.isnan(table.iloc[6]["pct_of_peak"])
    blind = op_table(inst, None)
    assert blind["peak_tflops"].isna().all() and blind["bound"].isna().all() and blind["pct_of_peak"].isna().all()
    assert list(blind["tflops_per_s"].fillna(-1)) == list(table["tflops_per_s"].fillna(-1))
    assert op_table(inst.iloc[:0], h100).empty and list(op_table(inst.iloc[:0], h100).columns) == OP_COLUMNS


def test_shape_table_and_the_time_its_roof_allows(ops_trace):
    from perfkit.analysis.gpu_kernels.opmodel import SHAPE_COLUMNS, op_instances, shape_table

    inst = op_instances(*ops_trace)
    h100 = DEVICES["H100-SXM"]
    table = shape_table(inst, h100)
    assert list(table.columns) == SHAPE_COLUMNS
    assert _records(table, ["op", "shape", "dtype", "family", "calls", "kernel_us", "bound"]) == [
        ("aten::mm", "[[256, 512], [512, 1024]]", "bf16", "gemm", 2, 70.0, "memory"),
        ("aten::add", "[[1024, 1024], [1024, 1024], []]", "fp32", "elementwise", 1, 20.0, "memory"),
        ("aten::mm", "[[128, 128], [128, 128]]", "fp32", "gemm", 1, 14.0, "compute"),
        ("aten::ne", "[[1000], [1000]]", "fp32", "elementwise", 2, 10.0, "memory"),
    ]
    flops, nbytes = 2 * 2.0 * 256 * 1024 * 512, 2 * 1835008.0
    compute_us, memory_us = flops / (h100.peak_tflops("bf16", "matrix") * 1e6), nbytes / (h100.mem_bw_gbs * 1e3)
    assert table.iloc[0]["roofline_us"] == pytest.approx(max(compute_us, memory_us))
    small = table.iloc[2]
    assert small["roofline_us"] == pytest.approx(2 * 128 ** 3 / (h100.peak_tflops("fp32", "vector") * 1e6))
    blind = shape_table(inst, None)
    assert blind["roofline_us"].isna().all() and len(blind) == 4
    assert shape_table(inst[~inst["modeled"]], h100).empty
    assert list(shape_table(inst.iloc[:0], h100).columns) == SHAPE_COLUMNS


def test_shape_table_without_a_memory_figure(ops_trace):
    from perfkit.analysis.gpu_kernels.opmodel import op_instances, shape_table

    inst = op_instances(*ops_trace)
    no_bw = dataclasses.replace(DEVICES["H100-SXM"], mem_bw_gbs=0.0)
    table = shape_table(inst, no_bw)
    compute_us = 2 * 2.0 * 256 * 1024 * 512 / (no_bw.peak_tflops("bf16", "matrix") * 1e6)
    assert table.iloc[0]["roofline_us"] == pytest.approx(compute_us) and table["bound"].isna().all()


@pytest.mark.parametrize("kernel_us, impossible", [(1e-6, True), (10.0, False), (0.0, False)])
def test_impossible_rates_table(kernel_us, impossible):
    from perfkit.analysis.gpu_kernels.opmodel import IMPOSSIBLE_RATE, MAX_GBS, _impossible_rates

    per = pd.DataFrame({"kernel_us": [kernel_us], "flops": [1e9], "bytes": [1e3], "read_bytes": [5e2],
                        "modeled": [True], "reason": [""]})
    out = _impossible_rates(per.copy())
    assert bool(out.loc[0, "reason"].startswith(IMPOSSIBLE_RATE)) == impossible
    assert out.loc[0, "modeled"] == (not impossible) and np.isnan(out.loc[0, "flops"]) == impossible
    assert np.isnan(out.loc[0, "bytes"]) == impossible and np.isnan(out.loc[0, "read_bytes"]) == impossible
    if impossible:
        assert out.loc[0, "reason"] == (f"{IMPOSSIBLE_RATE} (1e+09 TFLOP/s, 1e+06 GB/s over 1e-06 us: more than any "
                                        "GPU): not modeled")
    by_bytes = per.assign(flops=[0.0], bytes=[MAX_GBS * 1e3 * 10.0 * 1.01], kernel_us=[10.0])
    assert not _impossible_rates(by_bytes.copy()).loc[0, "modeled"]
    assert _impossible_rates(by_bytes.assign(bytes=[MAX_GBS * 1e3 * 10.0 * 0.99])).loc[0, "modeled"]


# -- _grouped, raised_roofs, capped and _listed on small frames ----------------------------------------------------
def _instances(*rows):
    base = {"op": "aten::mm", "family": "gemm", "dtype": "bf16", "flops": 1e9, "bytes": 1e6, "read_bytes": 5e5,
            "kernel_us": 10.0, "tc_us": 10.0, "notc_us": 0.0, "tf32": False, "modeled": True, "input_dims": "[[1]]"}
    return pd.DataFrame([base | {"label": i} | r for i, r in enumerate(rows)])


def test_grouped_sums_each_group_and_keeps_first_seen_order_at_a_tie():
    from perfkit.analysis.gpu_kernels.opmodel import _grouped

    inst = _instances({"op": "b", "kernel_us": 5.0, "tc_us": 5.0}, {"op": "a", "kernel_us": 5.0, "tc_us": 0.0},
                      {"op": "b", "kernel_us": 5.0, "tc_us": 0.0, "flops": np.nan, "read_bytes": np.nan},
                      {"op": "c", "kernel_us": 20.0, "dtype": None})
    g = _grouped(inst, ["op", "family", "dtype"], None)
    assert list(g["op"]) == ["c", "b", "a"] and list(g.index) == [0, 1, 2]  # most time first; b was seen before a
    c, b, a = g.to_dict("records")
    assert (b["calls"], b["flops"], b["bytes"], b["read_bytes"], b["kernel_us"], b["tc_us"]) == (2, 1e9, 2e6, 5e5,
                                                                                                10.0, 5.0)
    assert pd.isna(c["dtype"]) and a["dtype"] == "bf16"
    assert b["tensor_core_share"] == 0.5 and b["unit"] == "matrix"  # half on Tensor Cores
    assert a["unit"] == "matrix"   # nothing known off Tensor Cores and bf16: the matrix units
    assert g["pct_of_peak"].dtype == np.float64 and g["bound"].dtype == object


def test_grouped_nan_sums_stay_nan():
    from perfkit.analysis.gpu_kernels.opmodel import _grouped

    g = _grouped(_instances({"flops": np.nan, "bytes": np.nan, "read_bytes": np.nan}), ["op", "family", "dtype"], None)
    assert np.isnan(g.loc[0, "flops"]) and np.isnan(g.loc[0, "bytes"]) and np.isnan(g.loc[0, "read_bytes"])


@pytest.mark.parametrize("nbytes, intensity", [(0.0, None), (1.0, 1e9), (2.0, 5e8)])
def test_grouped_intensity_needs_bytes(nbytes, intensity):
    from perfkit.analysis.gpu_kernels.opmodel import _grouped

    got = _grouped(_instances({"bytes": nbytes}), ["op", "family", "dtype"], None).loc[0, "intensity"]
    assert (np.isnan(got) if intensity is None else got == intensity)


@pytest.mark.parametrize("kernel_us, rated", [(0.0, False), (1.0, True), (0.5, True)])
def test_grouped_rates_need_kernel_time(kernel_us, rated):
    from perfkit.analysis.gpu_kernels.opmodel import _grouped

    g = _grouped(_instances({"kernel_us": kernel_us, "tc_us": kernel_us}), ["op", "family", "dtype"], None).iloc[0]
    if rated:
        assert g["tflops_per_s"] == pytest.approx(1e9 / kernel_us / 1e6) and g["gbs"] == pytest.approx(1e6 / kernel_us / 1e3)
        assert g["tensor_core_share"] == 1.0
    else:
        assert np.isnan(g["tflops_per_s"]) and np.isnan(g["gbs"]) and np.isnan(g["tensor_core_share"])


def test_grouped_holds_fp32_matrix_work_to_tf32_only_where_it_ran_so():
    """MI300X has fp32 matrix units: fp32 GEMM work on them is held to the fp32 matrix peak, unless a kernel ran
    TF32; and the dtype decides the unit where Tensor Core use is unknown."""
    from perfkit.analysis.gpu_kernels.opmodel import _grouped

    mi300x = DEVICES["MI300X"]
    inst = _instances({"op": "x", "dtype": "fp32", "tf32": False}, {"op": "y", "dtype": "fp32", "tf32": True},
                      {"op": "z", "dtype": "bf16", "tc_us": 0.0}, {"op": "w", "dtype": "fp32", "tc_us": 0.0})
    g = _grouped(inst, ["op", "family", "dtype"], mi300x).set_index("op")
    assert g.loc["x", "peak_tflops"] == mi300x.matrix["fp32"] and g.loc["y", "peak_tflops"] == mi300x.matrix["tf32"]
    assert (g.loc["z", "unit"], g.loc["w", "unit"]) == ("matrix", "vector")


def test_unit_of_at_its_edges():
    assert unit_of("gemm", 0.6, 0.0, 1.0, "fp32") == "matrix"     # a kernel time under 1 us still counts
    assert unit_of("gemm", 50.0, 0.0, 100.0, "fp32") == "matrix"  # exactly half on Tensor Cores
    assert unit_of("gemm", 49.9, 50.1, 100.0, "fp32") == "vector"


def test_raised_roofs_raises_each_roof_it_beats_and_says_so():
    measured = Device("NVIDIA H200", "NVIDIA H200", {"bf16": 797.0, "tf32": 400.0}, {"fp32": 50.0}, 4000.0, "test",
                      True)
    rows = _shapes(
        a=dict(bound="memory", unit="vector", dtype="fp32", gbs=4100.0, pct_of_peak=102.5),  # a memory roof first
        b=dict(dtype="fp32", unit="matrix", tflops_per_s=420.0, pct_of_peak=105.0),         # fp32 matrix: TF32
        c=dict(dtype="bf16", unit="vector", tflops_per_s=60.0, pct_of_peak=120.0),          # no bf16 vector: fp32's
        e=dict(dtype="bf16", unit="matrix", tflops_per_s=700.0, pct_of_peak=100.5),         # under the old: kept
        f=dict(dtype="bf16", unit="matrix", tflops_per_s=999.0, pct_of_peak=100.0),         # at 100%: not over
        g=dict(dtype="bf16", unit="matrix", bound=L2_BOUND, tflops_per_s=999.0, pct_of_peak=150.0),  # from L2
        h=dict(dtype="fp64", unit="vector", tflops_per_s=30.0, pct_of_peak=101.0))          # no fp64 vector: fp32's
    raised, notes = raised_roofs(measured, rows)
    assert raised.matrix == {"bf16": 797.0, "tf32": 420.0}
    assert raised.vector == {"fp32": 60.0} and raised.mem_bw_gbs == 4100.0
    assert raised.measured and raised.name == "NVIDIA H200" and measured.matrix["tf32"] == 400.0  # the old unchanged
    assert notes == ["5 op shape(s) ran faster than the peaks file says (matrix tf32 400 -> 420.0 TFLOP/s, "
                     "vector fp32 50 -> 60.0 TFLOP/s, memory 4000 -> 4100 GB/s): measured peaks "
                     "are a floor of what the card does, so those roofs are raised to the rates reached here; measure "
                     "again (perfkit validate --write-peaks) to keep a file that holds"]


def test_raised_roofs_without_a_faster_memory_row_says_no_memory_change():
    measured = Device("X", "X", {"bf16": 100.0}, {"fp32": 10.0}, 1000.0, "test", True)
    raised, notes = raised_roofs(measured, _shapes(a=dict(tflops_per_s=150.0, pct_of_peak=150.0)))
    assert raised.mem_bw_gbs == 1000.0 and raised.vector == {"fp32": 10.0} and raised.matrix == {"bf16": 150.0}
    assert "(matrix bf16 100 -> 150.0 TFLOP/s)" in notes[0] and "memory" not in notes[0].split(":")[0]
    assert raised_roofs(None, _shapes(a=dict(pct_of_peak=150.0))) == (None, [])
    assert raised_roofs(measured, _shapes(a=dict(pct_of_peak=150.0)).iloc[:0]) == (measured, [])


def test_capped_keeps_l2_rows_and_says_each_kind():
    table = _shapes(a=dict(pct_of_peak=171.7), b=dict(op="aten::add", dtype="", bound=L2_BOUND, pct_of_peak=130.0),
                    c=dict(pct_of_peak=100.0))
    out, notes = capped(table, "op group(s)")
    assert np.isnan(out.loc[0, "pct_of_peak"]) and out.loc[0, "bound"] == "above roof"
    assert out.loc[1, "pct_of_peak"] == 130.0 and out.loc[1, "bound"] == L2_BOUND
    assert out.loc[2, "pct_of_peak"] == 100.0 and out.loc[2, "bound"] == "compute"
    assert table.loc[0, "pct_of_peak"] == 171.7  # the input is left alone
    assert notes == [
        "1 op group(s) ran above the memory roof (aten::add - 130%) with inputs that fit in the GPU's L2 (read and "
        "written per call each at most its size): the previous kernel can leave them there, so their percentage of "
        "the memory roof is shown, marked 'memory (L2)'",
        "1 op group(s) ran above their roof (aten::mm bf16 172%): their FLOPs or bytes are overcounted or the roof "
        "is not theirs, so no percentage is shown for them"]
    only_l2, l2_notes = capped(table.iloc[[1, 2]], "shapes")
    assert list(only_l2["pct_of_peak"]) == [130.0, 100.0] and len(l2_notes) == 1 and l2_notes[0].startswith("1 shapes ran above the memory roof")
    empty, none = capped(table.iloc[:0], "x")
    assert empty.empty and none == []
    assert capped(table.iloc[[2]], "x")[1] == []
    assert out["pct_of_peak"].dtype == np.float64


def test_capped_lists_at_most_three():
    table = _shapes(**{k: dict(op=f"op{k}", pct_of_peak=101.0 + i) for i, k in enumerate("abcd")})
    _, notes = capped(table, "x")
    assert "(opa bf16 101%, opb bf16 102%, opc bf16 103%)" in notes[0] and notes[0].startswith("4 x ran")


def test_the_l2_line_is_inclusive_on_both_sides():
    """Reads and writes of exactly the L2 (50 MB) per call still fit."""
    fits = {"gbs": 1_500.0, "read_bytes": 50e6, "bytes": 100e6}
    assert _roofline(_groups(**fits), FakeDevice(_PEAKS)) == (["memory (L2)"], [150.0])
    assert _roofline(_groups(**fits, calls=1), FakeDevice(_PEAKS, l2_mb=49.0))[0] == ["memory"]
    assert _roofline(_groups(gbs=1_001.0), FakeDevice(_PEAKS))[0] == ["memory (L2)"]  # just above the roof


def test_the_ridge_in_flop_per_byte():
    """100 TFLOP/s over 2,000 GB/s: a ridge of 50 FLOP/byte."""
    assert _roofline(_groups(intensity=50.0), FakeDevice(_PEAKS, mem_bw_gbs=2_000.0))[0] == ["compute"]
    assert _roofline(_groups(intensity=49.9), FakeDevice(_PEAKS, mem_bw_gbs=2_000.0))[0] == ["memory"]


@pytest.mark.parametrize("row, matrix, vector, change", [
    # a type the matrix units have no roof for: nothing to raise (the row's percentage was not of this device's roofs)
    (dict(dtype="fp16"), {"bf16": 100.0}, {"fp32": 10.0}, None),
    (dict(dtype="fp32"), {"bf16": 100.0}, {"fp32": 10.0}, None),  # fp32 matrix work, neither TF32 nor FP32 matrix
    (dict(dtype="fp16"), {"bf16": 100.0, "fp32": 50.0}, {}, None),  # on matrix units no type falls back to fp32's
    # fp32 on matrix units without TF32 (an AMD peaks file): the fp32 matrix roof, the one peak_of held it to
    (dict(dtype="fp32"), {"bf16": 100.0, "fp32": 100.0}, {"fp32": 10.0}, ("matrix", "fp32")),
    (dict(dtype="fp32", peak_tflops=100.0), {"fp32": 100.0, "tf32": 400.0}, {}, ("matrix", "fp32")),  # held to fp32
    (dict(dtype="fp32", peak_tflops=400.0), {"fp32": 100.0, "tf32": 400.0}, {}, ("matrix", "tf32")),  # ran TF32
    (dict(dtype="fp32"), {"fp32": 100.0, "tf32": 400.0}, {}, ("matrix", "tf32")),  # no peak given: TF32, as before
    # vector units: the type's own roof, else fp32's; none without either (a matrix-only peaks file)
    (dict(dtype="fp64", unit="vector"), {"bf16": 100.0}, {"fp64": 5.0, "fp32": 10.0}, ("vector", "fp64")),
    (dict(dtype="fp64", unit="vector", peak_tflops=10.0), {}, {"fp64": 5.0, "fp32": 10.0}, ("vector", "fp64")),
    (dict(dtype="bf16", unit="vector"), {"bf16": 100.0}, {}, None),
])
def test_raised_roofs_raises_the_roof_the_row_was_held_to_or_none(row, matrix, vector, change):
    measured = Device("X", "X", matrix, vector, 1000.0, "test", True)
    rows = _shapes(a=dict(tflops_per_s=500.0, pct_of_peak=150.0) | row)
    raised, notes = raised_roofs(measured, rows)
    if change is None:  # never a KeyError: the device is left as it is, with nothing to say
        assert (raised, notes) == (measured, [])
        return
    unit, key = change
    old = getattr(measured, unit)[key]
    assert getattr(raised, unit) == getattr(measured, unit) | {key: 500.0}
    assert notes[0].startswith(f"1 op shape(s) ran faster than the peaks file says ({unit} {key} {old:g} -> 500.0 "
                               "TFLOP/s): ")


def test_raised_roofs_counts_only_the_rows_whose_roof_it_raised():
    measured = Device("X", "X", {"bf16": 100.0}, {"fp32": 10.0}, 1000.0, "test", True)
    rows = _shapes(a=dict(dtype="fp16", tflops_per_s=500.0, pct_of_peak=150.0),
                   b=dict(tflops_per_s=200.0, pct_of_peak=200.0))
    raised, notes = raised_roofs(measured, rows)
    assert raised.matrix == {"bf16": 200.0} and notes[0].startswith("1 op shape(s) ran faster than the peaks file says "
                                                                    "(matrix bf16 100 -> 200.0 TFLOP/s)")


# -- each survivor of the mutation run: the exact line of each rule, the columns each step keeps --------------------
def test_per_owner_sums_time_by_tensor_core_use_and_names_the_longest_class():
    from perfkit.analysis.gpu_kernels.opmodel import _per_owner

    owned = pd.DataFrame({"owner": [5, 5, 7, 7], "dur_us": [30.0, 10.0, 3.0, 5.0], "class": ["gemm", "elementwise",
                                                                                         "gemm", "elementwise"],
                          "tensor_core": pd.array([True, None, False, False], dtype="boolean"),
                          "name_dtype": ["bf16", None, "tf32", None]})
    per = _per_owner(owned)
    assert list(per.index) == [5, 7] and list(per["main_class"]) == ["gemm", "elementwise"]  # the longest class
    assert list(per["kernel_us"]) == [40.0, 8.0] and list(per["tc_us"]) == [30.0, 0.0]
    assert list(per["notc_us"]) == [0.0, 3.0] and list(per["tf32"]) == [False, True]  # off them: matrix work only
    assert per["tc_us"].dtype == np.float64 and per["notc_us"].dtype == np.float64


def _owner_trace(tmp_path):
    """The trace's first event (label 0) an isnan around an ne, then an mm whose one kernel is of no class."""
    from tracebuilder import TraceBuilder

    from perfkit.analysis.gpu_kernels.attribute import kernel_links
    from perfkit.trace import load_trace
    from perfkit.trace.loader.shapes import op_shapes

    b = TraceBuilder(gpu_name="NVIDIA H100 80GB HBM3")
    b.cpu_op("aten::isnan", 0, 100)
    _op(b, "aten::ne", 10, [[1000], [1000]], ["float", "float"])
    b.launch(NE, 20, 5, gpu_ts=200, gpu_dur=5)
    _op(b, "aten::mm", 300, [[64, 64], [64, 64]], ["float", "float"])
    b.launch("mystery_kernel", 310, 5, gpu_ts=400, gpu_dur=10)
    trace = load_trace(b.write(tmp_path / "t.json"), use_cache=False)
    return trace, kernel_links(trace), op_shapes(trace, use_cache=False)


def test_op_instances_read_label_zero_as_an_op_and_the_ops_own_family(tmp_path):
    from perfkit.analysis.gpu_kernels.opmodel import op_instances

    trace, links, shapes = _owner_trace(tmp_path)
    assert trace.events["name"].iloc[0] == "aten::isnan"
    inst = op_instances(trace, links, shapes).set_index("op")
    assert inst.loc["aten::ne", "bytes"] == 5000  # under isnan (label 0): one tensor read
    assert inst.loc["aten::mm", "family"] == "gemm" and inst.loc["aten::mm", "flops"] == 2 * 64 ** 3
    unclassed = links.assign(**{"class": "other"})  # the op's own family first, its kernels' class after
    assert op_instances(trace, unclassed, shapes).set_index("op").loc["aten::mm", "family"] == "gemm"
    first = op_instances(trace, links.assign(owner=np.where(links["owner"] >= 0, 0, -1)), shapes)
    assert list(first["label"]) == [0] and list(first["op"]) == ["aten::isnan"]  # an owner of label 0 is one
    bare = op_instances(trace, links, shapes.drop(columns=["concrete_inputs"]))  # an older shapes table
    assert list(bare["flops"]) == list(inst.reset_index()["flops"])


def test_copies_fills_and_collectives_are_not_modeled():
    from perfkit.analysis.gpu_kernels.opmodel import _with_models

    per = pd.DataFrame({"op": ["aten::copy_", "aten::fill_", "nccl:all_reduce", "aten::mystery"],
                        "family": ["memcpy", "memset", "comm", "other"], "input_dims": "", "input_types": "",
                        "concrete_inputs": "", "parent_op": ""}, index=[3, 4, 5, 6])
    reasons = list(_with_models(per)["reason"])
    assert reasons[:3] == ["copies and collectives are not modeled"] * 3 and reasons[3] != reasons[0]


def test_impossible_rates_at_their_exact_lines():
    from perfkit.analysis.gpu_kernels.opmodel import MAX_GBS, MAX_TFLOPS, _impossible_rates

    def modeled(flops, nbytes):
        per = pd.DataFrame({"kernel_us": [1.0], "flops": [flops], "bytes": [nbytes], "read_bytes": [0.0],
                            "modeled": [True], "reason": [""]})
        return bool(_impossible_rates(per).loc[0, "modeled"])

    assert modeled(MAX_TFLOPS * 1e6, 0.0) and modeled(0.0, MAX_GBS * 1e3)  # at the line: a GPU could
    assert not modeled(MAX_TFLOPS * 1e6 * (1 + 1e-7), 0.0) and not modeled(0.0, MAX_GBS * 1e3 * (1 + 1e-7))


def test_grouped_rates_exactly_and_first_seen_order_at_a_tie():
    from perfkit.analysis.gpu_kernels.opmodel import _grouped

    g = _grouped(_instances({"op": "b", "flops": 3e9, "bytes": 3e6}, {"op": "a"}), ["op", "family", "dtype"], None)
    assert list(g["op"]) == ["b", "a"]  # 10 us each: as first seen
    assert g.loc[0, "tflops_per_s"] == 3e9 / 10.0 / 1e6 and g.loc[0, "gbs"] == 3e6 / 10.0 / 1e3


def test_the_l2_and_the_ridge_to_the_byte():
    # 1 byte over L2 per call (50 MB) reads past it; an intensity a hair under the ridge (50 FLOP/byte) is memory
    assert _roofline(_groups(gbs=1_500.0, read_bytes=50e6 + 1, bytes=50e6 + 1), FakeDevice(_PEAKS))[0] == ["memory"]
    assert _roofline(_groups(intensity=50.0 - 1e-8), FakeDevice(_PEAKS, mem_bw_gbs=2_000.0))[0] == ["memory"]


def test_shape_table_roofline_exactly_and_on_every_row_without_a_memory_figure(ops_trace):
    from perfkit.analysis.gpu_kernels.opmodel import SHAPE_COLUMNS, op_instances, shape_table

    inst = op_instances(*ops_trace)
    h100 = DEVICES["H100-SXM"]
    small = shape_table(inst, h100).iloc[2]
    assert small["roofline_us"] == 2 * 128 ** 3 / (h100.peak_tflops("fp32", "vector") * 1e6)
    no_bw = shape_table(inst, dataclasses.replace(h100, mem_bw_gbs=0.0))
    assert list(no_bw["roofline_us"]) == list(no_bw["flops"] / (no_bw["peak_tflops"].astype(float) * 1e6))
    assert list(shape_table(pd.DataFrame(), h100).columns) == SHAPE_COLUMNS  # no instances at all


def test_with_models_reads_the_concrete_inputs():
    import json

    from perfkit.analysis.gpu_kernels.opmodel import _with_models

    op, n = "aten::_efficient_attention_forward", 11
    dims, types = json.dumps([[64, 512, 16, 64]] * 3 + [[]] * (n - 3)), json.dumps(["float"] * 3 + [""] * (n - 3))
    per = pd.DataFrame({"op": op, "family": "attention", "input_dims": dims, "input_types": types,
                        "concrete_inputs": [json.dumps([""] * 8 + ["0.", flag, "True"]) for flag in ("1", "0")],
                        "parent_op": ""}, index=[1, 2])
    causal, full = _with_models(per)["flops"]
    assert full == 4.0 * 64 * 16 * 512 * 512 * 64 and causal == full / 2  # the causal flag is a concrete input
    addmm = pd.DataFrame({"op": "aten::addmm", "family": "gemm", "input_dims": "[[64], [64, 64], [64, 64]]",
                          "input_types": json.dumps(["float", BF16, BF16]), "concrete_inputs": "", "parent_op": ""},
                         index=[3])
    assert list(_with_models(addmm)["dtype"]) == ["bf16"]  # the model's type (its GEMM's), not the fp32 bias's


def test_ties_keep_their_first_seen_order_in_a_long_table():
    """A sort that is not stable reorders ties past 16 rows: the groups, and each owner's longest class."""
    from perfkit.analysis.gpu_kernels.opmodel import _grouped, _per_owner

    rows = ({"op": f"op{i:02d}", "kernel_us": 10.0 if i % 2 else 5.0, "tc_us": 0.0} for i in range(40))
    g = _grouped(_instances(*rows), ["op", "family", "dtype"], None)
    assert list(g["op"]) == [f"op{i:02d}" for i in range(1, 40, 2)] + [f"op{i:02d}" for i in range(0, 40, 2)]
    durations = [5.0, 5.0, 1.0, 9.0] * 10  # even owners: a tie; odd ones: gemm is longer
    owned = pd.DataFrame({"owner": np.repeat(np.arange(20), 2), "dur_us": durations, "class": ["elementwise", "gemm"] * 20,
                          "tensor_core": pd.array([None] * 40, dtype="boolean"), "name_dtype": None})
    assert list(_per_owner(owned)["main_class"]) == ["elementwise", "gemm"] * 10  # a tie: the first class grouped


def test_a_group_without_a_peak_has_no_bound_beside_one_with_a_peak():
    """A type no peak is known for has no roof, whatever the other rows: beside a row with a peak its peak is NaN,
    not None (it was held to the memory roof there, and shown a percentage of it)."""
    from perfkit.analysis.gpu_kernels.opmodel import _grouped

    g = _grouped(_instances({"op": "a"}, {"op": "b", "dtype": None}), ["op", "family", "dtype"], DEVICES["H100-SXM"])
    assert g["bound"].dtype == object and list(g["bound"]) == ["compute", None] and np.isnan(g.loc[1, "pct_of_peak"])
    alone = _grouped(_instances({"op": "b", "dtype": None}), ["op", "family", "dtype"], DEVICES["H100-SXM"])
    assert list(alone["bound"]) == [None]
