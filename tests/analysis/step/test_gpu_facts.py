"""What the fixes read of a trace's GPU events (``perfkit.analysis.step.gpu_facts``): copy direction and bytes,
fp32 matrix kernels, the launching op's bytes, memory-bound classes, the pinned rate and the async copy's launch."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from perfkit.analysis.step import gpu_facts as gf
from perfkit.analysis.step.fixes import ASYNC_COPY_US, MIN_RATE_BYTES, PINNED_HTOD_GBS
from perfkit.errors import ParameterError
from perfkit.trace import load_trace
from tracebuilder import TraceBuilder

H100 = "NVIDIA H100 80GB HBM3"
SGEMM = "volta_sgemm_128x64_nn"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>()"
BF16_GEMM = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
             "kernel__5x_cublas")
TF32_GEMM = "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32"
REDUCE = "void at::native::reduce_kernel<512, 1>()"


def _mm(b, ts, dtype):
    op = b.cpu_op("aten::mm", ts, 50)
    op["args"].update({"Input Dims": [[128, 128], [128, 128]], "Input type": [dtype, dtype]})


def _trace(tmp_path, gpu_name=H100, copies=True):
    """Pinned copies of 4 MiB in 50 us (83.9 GB/s), 2 MiB in 100 us (21.0 GB/s), 1 KiB (too small for a rate),
    launched in 4, 8 and 6 us; a pageable DtoH; an fp32 mm on an sgemm (10 us) and a fill (4 us); a bf16 mm; a TF32
    GEMM and a reduction launched outside any op."""
    b = TraceBuilder(gpu_name=gpu_name)
    b.step(0, 0, 5000)
    if copies:
        b.memcpy("HtoD", "Pinned", 10, 4, 100, 50, 4 << 20)
        b.memcpy("HtoD", "Pinned", 20, 8, 200, 100, 2 << 20)
        b.memcpy("HtoD", "Pinned", 30, 6, 300, 1, 1024)
        b.memcpy("DtoH", "Pageable", 40, 30, 400, 10, 1 << 20)
    _mm(b, 500, "float")
    b.launch(SGEMM, 510, 5, gpu_ts=600, gpu_dur=10)
    b.launch(FILL, 520, 5, gpu_ts=620, gpu_dur=4)
    _mm(b, 700, "c10::BFloat16")
    b.launch(BF16_GEMM, 710, 5, gpu_ts=800, gpu_dur=10)
    b.launch(TF32_GEMM, 900, 5, gpu_ts=950, gpu_dur=4)
    b.launch(REDUCE, 1000, 5, gpu_ts=1050, gpu_dur=4)
    return load_trace(b.write(tmp_path / "t.json"), use_cache=False)


def _by_name(trace, facts):
    names = trace.events["name"].reindex(facts.index).astype(str)
    return [(n, *row) for n, row in zip(names, facts[["htod", "bytes", "fp32_matrix", "op_bytes", "memory_bound"]]
                                        .itertuples(index=False))]


def test_the_facts_of_each_gpu_event(tmp_path):
    trace = _trace(tmp_path)
    facts = gf.gpu_facts(trace)
    assert facts is gf.gpu_facts(trace)  # once per trace
    assert facts.facts.index.name == "label"
    assert _by_name(trace, facts.facts) == [
        ("Memcpy HtoD (Pinned -> Device)", True, 4 << 20, False, 0.0, False),
        ("Memcpy HtoD (Pinned -> Device)", True, 2 << 20, False, 0.0, False),
        ("Memcpy HtoD (Pinned -> Device)", True, 1024, False, 0.0, False),
        ("Memcpy DtoH (Device -> Pageable)", False, 1 << 20, False, 0.0, False),
        (SGEMM, False, -1, True, 3 * 128 * 128 * 4.0, False),   # fp32 SIMT GEMM; the op's bytes on its longest kernel
        (FILL, False, -1, True, 0.0, False),                   # the op's other kernel: its bytes counted once
        (BF16_GEMM, False, -1, False, 3 * 128 * 128 * 2.0, False),
        (TF32_GEMM, False, -1, False, 0.0, False),             # tf32 is matrix-unit work; no op: no bytes
        (REDUCE, False, -1, False, 0.0, True),
    ]
    assert (facts.device.key, facts.device_name) == ("H100-SXM", H100)
    assert facts.pinned_gbs == pytest.approx(np.median([(4 << 20) / 50e3, (2 << 20) / 100e3]))
    assert facts.pinned_source == "the trace's own pinned copies" and facts.async_copy_us == 6.0


def test_without_pinned_copies_the_rate_is_the_devices_link(tmp_path):
    facts = gf.gpu_facts(_trace(tmp_path, copies=False))
    assert facts.pinned_gbs == PINNED_HTOD_GBS["H100-SXM"] and facts.pinned_source == "NVIDIA H100 SXM's host link"
    assert facts.async_copy_us == ASYNC_COPY_US


def test_an_unknown_gpu_gets_the_slowest_link(tmp_path):
    facts = gf.gpu_facts(_trace(tmp_path, gpu_name="NVIDIA Mystery", copies=False))
    assert facts.device is None and facts.device_name == "NVIDIA Mystery"
    assert facts.pinned_gbs == min(PINNED_HTOD_GBS.values())
    assert facts.pinned_source == "the slowest host link perfkit knows (PCIe 3 x16): the GPU is not in its table"


@pytest.mark.parametrize("nbytes, dur, rated", [(MIN_RATE_BYTES, 10.0, True), (MIN_RATE_BYTES - 1, 10.0, False),
                                                (MIN_RATE_BYTES, 0.0, False)])
def test_a_pinned_copy_sets_the_rate_from_a_mebibyte(tmp_path, nbytes, dur, rated):
    b = TraceBuilder(gpu_name=H100)
    b.step(0, 0, 1000)
    b.memcpy("HtoD", "Pinned", 10, 4, 100, dur, nbytes)
    b.memcpy("HtoD", "Pageable", 20, 4, 200, 10, 8 << 20)  # pageable: never the pinned rate
    facts = gf.gpu_facts(load_trace(b.write(tmp_path / "t.json"), use_cache=False))
    expected = nbytes / dur / 1e3 if rated else PINNED_HTOD_GBS["H100-SXM"]
    assert facts.pinned_gbs == pytest.approx(expected) and facts.async_copy_us == 4.0


def test_a_trace_without_gpu_events(tmp_path):
    b = TraceBuilder(gpu_name=H100)
    b.step(0, 0, 1000)
    b.cpu_op("aten::add", 10, 50)
    facts = gf.gpu_facts(load_trace(b.write(tmp_path / "t.json"), use_cache=False))
    assert facts.facts.empty
    assert list(facts.facts.columns) == ["htod", "bytes", "fp32_matrix", "op_bytes", "memory_bound"]
    assert facts.async_copy_us == ASYNC_COPY_US


def test_a_device_or_shapes_that_cannot_be_read_leave_facts_out(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise ParameterError("no")

    trace = _trace(tmp_path, copies=False)
    monkeypatch.setattr(gf, "device_for", refuse)
    monkeypatch.setattr(gf, "op_instances", refuse)
    facts = gf._gpu_facts(trace)
    assert facts.device is None and facts.device_name == ""
    assert facts.pinned_gbs == min(PINNED_HTOD_GBS.values())
    rows = _by_name(trace, facts.facts)
    assert [r[4] for r in rows] == [0.0] * 5  # no op bytes
    assert [r[3] for r in rows] == [True, True, False, False, False]  # the names alone say fp32 (sgemm, FillFunctor<float>)


def test_the_accessors_read_each_gpu_events_fact(tmp_path):
    trace = _trace(tmp_path)
    facts = gf.gpu_facts(trace)
    labels = list(facts.facts.index)
    g = SimpleNamespace(gpu={"label": np.array([labels[0], labels[4], labels[8], 10**9])})  # the last: no facts
    assert facts.htod(g).tolist() == [True, False, False, False] and facts.htod(g).dtype == bool
    assert facts.gpu_bytes(g).tolist() == [4 << 20, -1.0, -1.0, 0.0] and facts.gpu_bytes(g).dtype == np.float64
    assert facts.fp32_matrix(g).tolist() == [False, True, False, False] and facts.fp32_matrix(g).dtype == bool
    assert facts.op_bytes(g).tolist() == [0.0, 3 * 128 * 128 * 4.0, 0.0, 0.0]
    assert facts.memory_bound(g).tolist() == [False, False, True, False] and facts.memory_bound(g).dtype == bool
