"""perfkit.kernels on synthetic traces with exact expectations, the name rules and the device table."""
import json

import pytest

from perfkit import load_trace
from perfkit.analysis.gpu_kernels import gpu_bound_findings, kernels
from perfkit.analysis.gpu_kernels.kernel_classes import kernel_class, name_dtype, tensor_core
from perfkit.analysis.gpu_kernels.devices import DEVICES, find_device
from perfkit.analysis.gpu_kernels.args import parse_args
from perfkit.analysis.gpu_kernels.flops import attention, conv, gemm
from perfkit.cli import main
from perfkit.errors import ParameterError
from tracebuilder import TraceBuilder


def _op(b, name, ts, dur, dims, types, concrete=None):
    op = b.cpu_op(name, ts, dur)
    op["args"].update({"Input Dims": dims, "Input type": types})
    if concrete is not None:
        op["args"]["Concrete Inputs"] = concrete
    return op


def _gemm_trace(tmp_path, *, gpu="NVIDIA H100 80GB HBM3", kernel="sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128",
                dtype="c10::BFloat16", shapes=True, n=4096, gemm_us=200):
    b = TraceBuilder(gpu_name=gpu)
    b.step(1, ts=0, dur=1000)
    linear = b.cpu_op("aten::linear", ts=10, dur=100)
    if shapes:
        linear["args"].update({"Input Dims": [[8, 512, 1024], [n, 1024], [n]], "Input type": [dtype] * 3})
        _op(b, "aten::addmm", 20, 80, [[n], [4096, 1024], [1024, n], [], []], [dtype] * 3 + ["Scalar"] * 2)
    else:
        b.cpu_op("aten::addmm", 20, 80)
    b.launch(kernel, ts=30, dur=5, gpu_ts=100, gpu_dur=gemm_us)
    b.launch("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>",
             ts=200, dur=5, gpu_ts=100 + gemm_us + 100, gpu_dur=100)
    return load_trace(b.write(tmp_path / "t.json"))


def test_gemm_flops_rate_and_peak(tmp_path):
    r = kernels(_gemm_trace(tmp_path))
    flops = 2 * 4096 * 4096 * 1024
    assert r.totals["gemm_flops"] == flops
    assert r.totals["gemm_us"] == 200 and r.totals["tensor_core_share"] == 1.0
    assert r.totals["gemm_tflops_per_s"] == pytest.approx(flops / 200e-6 / 1e12)
    row = r.ops[r.ops["op"] == "aten::addmm"].iloc[0]
    assert row["unit"] == "matrix" and row["peak_tflops"] == 989.4 and row["dtype"] == "bf16"
    assert row["bound"] == "compute"  # 2*4096*4096*1024 / ~50 MB moved: ~1000 FLOP/B, ridge ~295
    assert row["pct_of_peak"] == pytest.approx(100 * flops / 200e-6 / 1e12 / 989.4)
    # MFU: FLOPs / (step time 1000 us x bf16 peak)
    assert r.totals["mfu"] == pytest.approx(flops / 1000e-6 / 989.4e12)
    k = r.kernels.iloc[0]
    assert (k["class"], k["tensor_core"], k["dtype"], k["calls"]) == ("gemm", True, "bf16", 1)
    assert k["share"] == pytest.approx(200 / 300)
    assert r.warnings == ()


def test_fp32_sgemm_on_a100_is_the_leading_finding(tmp_path):
    trace = _gemm_trace(tmp_path, gpu="NVIDIA A100-SXM4-80GB", kernel="ampere_sgemm_128x64_tn", dtype="float")
    found = gpu_bound_findings(trace)
    assert "FP32 GEMM" in found[0].title and found[0].severity == "high"
    assert 'set_float32_matmul_precision("high")' in found[0].fix and "bfloat16" in found[0].fix
    assert found[0].evidence["fp32_cuda_core_us"] == 200
    r = kernels(trace)
    assert r.totals["tensor_core_share"] == 0.0
    assert r.ops.iloc[0]["unit"] == "vector" and r.ops.iloc[0]["peak_tflops"] == 19.5


def test_fp32_finding_on_v100_offers_fp16_not_bf16(tmp_path):
    trace = _gemm_trace(tmp_path, gpu="Tesla V100-SXM2-32GB", kernel="volta_sgemm_128x64_nt", dtype="float")
    fix = gpu_bound_findings(trace)[0].fix
    assert "float16" in fix and "GradScaler" in fix and "set_float32_matmul_precision" not in fix


def test_odd_shapes_finding(tmp_path):
    trace = _gemm_trace(tmp_path, n=30522, gemm_us=5000)  # 51 TFLOP/s: 5% of the bf16 peak
    odd = [f for f in kernels(trace).findings if "multiples of 8" in f.title]
    assert odd and odd[0].evidence["top_shape_mnk"] == "4096x30522x1024"


def test_without_shapes_kernel_table_and_warning(tmp_path):
    r = kernels(_gemm_trace(tmp_path, shapes=False))
    assert any("record_shapes=True" in w for w in r.warnings)
    assert r.totals["gemm_flops"] == 0 and r.totals["unmodeled_us"] == 300
    assert len(r.kernels) == 2 and r.ops["flops"].isna().all()


def test_unknown_device_gives_no_percentages(tmp_path):
    r = kernels(_gemm_trace(tmp_path, gpu="Imaginary GPU 9000"))
    assert any("unknown device" in w and "--peaks" in w for w in r.warnings)
    assert r.ops["pct_of_peak"].isna().all() and r.totals["mfu"] is None
    assert r.totals["gemm_flops"] == 2 * 4096 * 4096 * 1024
    assert kernels(_gemm_trace(tmp_path, gpu="Imaginary GPU 9000"), device="H100-SXM").totals["mfu"] is not None
    with pytest.raises(ParameterError, match="not a known GPU"):
        kernels(_gemm_trace(tmp_path), device="X9")


def test_no_gpu_says_so(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::add", 0, 10)
    r = kernels(load_trace(b.write(tmp_path / "cpu.json")))
    assert not r.has_gpu and "no GPU activity" in r.warnings[0] and r.findings == ()
    assert json.loads(json.dumps(r.to_json()))["kernels"] == []


def test_cli_text_json_and_bad_device(tmp_path, capsys):
    path = tmp_path / "t.json"
    _gemm_trace(tmp_path)  # writes t.json
    assert main(["kernels", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sm90_xmma_gemm" in out and "aten::addmm" in out and "Tensor Cores 100%" in out
    assert main(["kernels", str(path), "--json", "--top", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"device", "kernels", "ops", "totals", "findings", "warnings"}
    assert len(doc["kernels"]) == 1 and doc["device"]["mem_bw_gbs"] == 3350
    assert doc["totals"]["gemm_flops"] == 2 * 4096 * 4096 * 1024
    assert main(["kernels", str(path), "--device", "nope"]) == 2
    assert "not a known GPU" in capsys.readouterr().err


@pytest.mark.parametrize("name, cls, tc, dtype", [
    ("ampere_sgemm_32x32_sliced1x4_tn", "gemm", False, "fp32"),
    ("volta_sgemm_64x64_nt", "gemm", False, "fp32"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8", "gemm", False, "fp32"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "gemm", True, "tf32"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "gemm", True, "bf16"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "gemm", True, None),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>", "gemm", True, "bf16"),
    ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "conv", False, "fp32"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "conv", True, "tf32"),
    ("volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1", "conv", True, "fp16"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN", "gemm", True, "bf16"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0", "gemm", True, "fp32"),
    ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64>>", "attention", True, None),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "comm", False, "fp32"),
    ("void at::native::vectorized_layer_norm_kernel<float, float>(int, float)", "norm", False, "fp32"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::Half>>", "reduction", False, "fp16"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>>", "elementwise",
     False, "bf16"),
    ("triton_poi_fused_add_cos_sin_0", "triton", None, None),
    ("some_custom_kernel", "other", None, None),
])
def test_kernel_name_rules(name, cls, tc, dtype):
    assert kernel_class(name) == cls
    assert tensor_core(name, cls) is tc
    assert name_dtype(name) == dtype


def test_copies_by_category():
    assert kernel_class("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy") == "memcpy"
    assert kernel_class("Memset (Device)", "gpu_memset") == "memset"


@pytest.mark.parametrize("kineto_name, key", [
    ("Tesla V100-SXM2-16GB", "V100-SXM2"), ("Tesla T4", "T4"), ("NVIDIA A10", "A10"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA A100-PG509-200", "A100-40GB"), ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA GeForce RTX 3090", "RTX-3090"), ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H200", "H200"),
    ("NVIDIA GH200 480GB", "GH200"), ("NVIDIA B200", "B200"), ("AMD Instinct MI250X", "MI250X"),
    ("AMD Instinct MI300X VF", "MI300X"),
])
def test_device_table(kineto_name, key):
    d = find_device(kineto_name)
    assert d is not None and d.key == key
    assert d.mem_bw_gbs > 0 and "datasheet" in d.source or "whitepaper" in d.source
    assert d.matrix and all(v > 0 for v in d.matrix.values())


def test_every_device_has_a_source_and_a_ridge():
    for d in DEVICES.values():
        assert d.source and d.mem_bw_gbs > 0
        # every ridge above one FLOP per byte, but the H800's FP64, cut to 1 TFLOPS by export rules
        assert all(r > 1 for k, r in d.ridge.items() if not (d.key.startswith("H800") and k.endswith("fp64")))


def test_flop_models():
    g = gemm("aten::bmm", *parse_args("[[4, 64, 32], [4, 32, 16]]", '["float", "float"]', "")[:2])
    assert g.flops == 2 * 4 * 64 * 16 * 32 and g.bytes == 4 * 4 * (64 * 32 + 32 * 16 + 64 * 16)
    c = conv("aten::cudnn_convolution", [[8, 3, 224, 224], [64, 3, 7, 7]], ["float", "float"],
             ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"])
    assert c.flops == 2 * 8 * 112 * 112 * 64 * 3 * 7 * 7
    a = attention("aten::_scaled_dot_product_flash_attention", [[2, 8, 128, 64]] * 3, ["c10::BFloat16"] * 3,
                  ["", "", "", "0.", "True", "False", ""])
    assert a.flops == 4 * 2 * 8 * 128 * 128 * 64 / 2 and a.dtype == "bf16"
    assert isinstance(conv("aten::cudnn_convolution", [[8, 3, 9, 9], [4, 3, 3, 3]], ["float"] * 2, []), str)


@pytest.mark.parametrize("op, dims, types, flops", [
    # a MoE's grouped GEMM: 4,096 routed tokens by 8 experts' [1024, 512] weights
    ("aten::_grouped_mm", [[4096, 1024], [8, 1024, 512], [8], [], []],
     ["c10::BFloat16", "c10::BFloat16", "int", "", ""], 2.0 * 4096 * 1024 * 512),
    ("aten::_scaled_grouped_mm", [[4096, 1024], [8, 1024, 512], [4096], [8, 512], [8], [], [], [], []],
     ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "int", "", "", "", "Scalar"],
     2.0 * 4096 * 1024 * 512),
    ("aten::_scaled_mm", [[888, 4096], [4096, 2048], [], [], [], [], [], []],
     ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", "", "", "Scalar", "Scalar"], 2.0 * 888 * 4096 * 2048),
])
def test_grouped_and_fp8_gemms_are_modeled_where_their_shapes_are_recorded(tmp_path, op, dims, types, flops):
    b = TraceBuilder(gpu_name="NVIDIA H800")
    b.step(1, ts=0, dur=1000)
    _op(b, op, 10, 100, dims, types)
    b.launch("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x64", ts=20, dur=5, gpu_ts=100, gpu_dur=50)
    r = kernels(load_trace(b.write(tmp_path / "t.json")))
    (row,) = r.instances.to_dict("records")
    assert row["modeled"] and row["family"] == "gemm" and row["flops"] == flops
    assert r.device.key == "H800" and r.ops.iloc[0]["pct_of_peak"] > 0
