"""The thresholds of ``perfkit.analysis.gpu_kernels.findings``, one row on each side of each, on kernel and
instance tables built in the test (no trace, no ../shared). GPU busy time is 10 ms throughout."""
from __future__ import annotations

import pandas as pd
import pytest

from perfkit.analysis.gpu_kernels import findings as kf
from perfkit.analysis.gpu_kernels.devices import Device

BUSY = 10_000.0  # us
# One bf16 matrix peak of 1000 TFLOP/s: LOW_GEMM_EFFICIENCY (30%) of it is 300 TFLOP/s.
DEVICE = Device("test", "Test GPU", {"bf16": 1000.0, "tf32": 500.0, "fp8": 2000.0}, {"fp32": 100.0}, 1000.0, "test")


@pytest.mark.parametrize("share, severity", [
    pytest.param(0.20, "high", id="HIGH_SHARE-at"),
    pytest.param(0.199, "medium", id="HIGH_SHARE-under"),
    pytest.param(0.05, "medium", id="MEDIUM_SHARE-at"),
    pytest.param(0.049, "low", id="MEDIUM_SHARE-under"),
])
def test_severity_by_share_of_gpu_time(share, severity):
    assert kf._severity(share) == severity


def kernels(cls: str, total_us: float, *, tensor_core=False, dtype="fp32", name="k") -> pd.DataFrame:
    return pd.DataFrame({"name": [name], "class": [cls], "tensor_core": [tensor_core], "dtype": [dtype],
                         "total_us": [total_us], "calls": [10]})


@pytest.mark.parametrize("total_us, fires", [
    pytest.param(100.0, True, id="MIN_SHARE-at"),
    pytest.param(99.0, False, id="MIN_SHARE-under"),
])
def test_fp32_on_cuda_cores_from_one_percent(total_us, fires):
    table = kernels("gemm", total_us, name="volta_sgemm_128x64_nn")
    assert bool(kf._fp32_cuda_cores(table, None, BUSY)) is fires


@pytest.mark.parametrize("total_us, severity", [
    pytest.param(2_500.0, "high", id="FUSE_SHARE-at"),
    pytest.param(2_499.0, None, id="FUSE_SHARE-under"),
])
def test_memory_bound_kernels_from_a_quarter(total_us, severity):
    found = kf._memory_bound(kernels("elementwise", total_us), None, BUSY)
    assert [f.severity for f in found] == ([severity] if severity else [])


def gemm(n: int, flops: float, *, dtype="bf16", kernel_us=100.0) -> pd.DataFrame:
    """One modeled GEMM instance, MxNxK 4096 x ``n`` x 4096, all of its time on Tensor Cores."""
    return pd.DataFrame({"family": ["gemm"], "modeled": [True], "m": [4096], "n": [n], "k": [4096],
                         "dtype": [dtype], "flops": [flops], "kernel_us": [kernel_us], "tc_us": [kernel_us],
                         "notc_us": [0.0], "tf32": [False]})


@pytest.mark.parametrize("instances, busy, fires", [
    pytest.param(gemm(4095, 2.99e10), BUSY, True, id="LOW_GEMM_EFFICIENCY-under"),  # 299 TFLOP/s
    pytest.param(gemm(4095, 3.0e10), BUSY, False, id="LOW_GEMM_EFFICIENCY-at"),     # 300 TFLOP/s
    pytest.param(gemm(4096, 1e9), BUSY, False, id="ALIGN-multiple-of-8"),
    pytest.param(gemm(4104, 1e9, dtype="fp8"), BUSY, True, id="ALIGN-fp8-wants-16"),
    pytest.param(gemm(4095, 1e9), 10_001.0, False, id="MIN_SHARE-under"),
])
def test_odd_gemm_shapes_far_below_peak(instances, busy, fires):
    assert bool(kf._odd_gemms(instances, DEVICE, busy)) is fires


@pytest.mark.parametrize("seq, fires", [
    pytest.param(32, True, id="MIN_ATTENTION_SEQ-at"),
    pytest.param(31, False, id="MIN_ATTENTION_SEQ-under"),
])
def test_softmax_over_attention_scores(seq, fires):
    instances = pd.DataFrame({"op": ["aten::_softmax"], "input_dims": [f"[[8, 12, {seq}, {seq}], [], []]"],
                              "kernel_us": [500.0]})
    assert bool(kf._unfused_attention(instances, BUSY)) is fires


def _tc(**change) -> pd.DataFrame:
    """``gemm(4096, ...)`` with columns changed: aligned, bf16, on Tensor Cores, 299 TFLOP/s (under 30% of 1000)."""
    g = gemm(4096, 2.99e10)
    for column, value in change.items():
        g[column] = [value]
    return g


@pytest.mark.parametrize("instances, busy, fires", [
    pytest.param(_tc(), BUSY, True, id="LOW_GEMM_EFFICIENCY-under"),
    pytest.param(_tc(flops=3.0e10), BUSY, False, id="LOW_GEMM_EFFICIENCY-at"),
    pytest.param(_tc(dtype="tf32"), BUSY, False, id="tf32-autocast-still-helps"),
    pytest.param(_tc(dtype="fp8", flops=5.99e10), BUSY, True, id="fp8-against-its-own-peak"),   # 599 < 600
    pytest.param(_tc(dtype="fp8", flops=6.0e10), BUSY, False, id="fp8-at-30%-of-its-peak"),
    pytest.param(_tc(tc_us=50.0), BUSY, True, id="half-on-tensor-cores"),
    pytest.param(_tc(tc_us=49.0), BUSY, False, id="under-half-on-tensor-cores"),
    pytest.param(_tc(m=4095), BUSY, False, id="M-unaligned-is-the-odd-shapes-finding"),
    pytest.param(_tc(n=4095), BUSY, False, id="N-unaligned"),
    pytest.param(_tc(k=4095), BUSY, False, id="K-unaligned"),
    pytest.param(_tc(), 10_001.0, False, id="MIN_SHARE-under"),
])
def test_tensor_core_gemms_far_below_peak_on_aligned_shapes(instances, busy, fires):
    found = kf._low_rate_tensor_cores(instances, DEVICE, busy)
    assert bool(found) is fires
    if fires:
        assert "Tensor Cores" in found[0].title and "autocast" not in found[0].fix.replace("mixed precision and", "")


def test_tensor_core_finding_quotes_the_rate_and_the_peak():
    (f,) = kf._low_rate_tensor_cores(_tc(), DEVICE, BUSY)
    assert f.title == ("1% of GPU time is bf16 GEMMs on Tensor Cores at 299 of the Test GPU's 1,000 TFLOP/s (30% of "
                       "peak; e.g. MxNxK 4096x4096x4096)")
    assert f.evidence["share_of_peak"] == pytest.approx(0.299) and "will not speed them up" in f.fix
    assert kf._low_rate_tensor_cores(_tc(), None, BUSY) == []  # no device, no peak to hold the rate to
