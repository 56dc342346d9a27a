"""Kernel classes from the op that launched them, then the name; Tensor Cores only for matrix work."""
from __future__ import annotations

import pytest

from perfkit.analysis.gpu_kernels.kernel_classes import (CLASSES, kernel_class, kernel_function, name_dtype, op_class,
                                                     tensor_core, torch_dtype)

# Each class an op gives, held on a kernel whose name points elsewhere (the op decides: module doc).
ELSEWHERE = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)"
OP_DECIDES = [
    ("gemm", "aten::addmm", ELSEWHERE),
    ("conv", "aten::miopen_convolution", "Cijk_Ailk_Bljk_SB_MT64x64x16_MI32x32x2x1_SN"),
    ("attention", "aten::_flash_attention_forward", "void at::native::reduce_kernel<512, 1>(float)"),
    ("norm", "vllm::fused_add_rms_norm", "void vllm::fused_add_kernel<_typeConvert<c10::BFloat16> >()"),
    ("reduction", "aten::_softmax", ELSEWHERE),
    ("elementwise", "_C_cache_ops::reshape_and_cache_flash", "void flash_fwd_kernel<bf16>(long)"),
    ("elementwise", "_C::static_scaled_fp8_quant", "sm90_xmma_gemm_bf16bf16_bf16f32"),
]


@pytest.mark.parametrize("cls, op, name", OP_DECIDES, ids=[f"{c}-{o}" for c, o, _ in OP_DECIDES])
def test_the_op_decides_against_a_name_that_points_elsewhere(cls, op, name):
    assert kernel_class(name, "kernel") != cls  # the name alone says another class
    assert kernel_class(name, "kernel", op) == cls


def test_every_class_an_op_gives_is_held():
    assert {c for c, _, _ in OP_DECIDES} == set(CLASSES) - {"comm", "memcpy", "memset", "triton", "other"}


@pytest.mark.parametrize("name, cls", [
    # an op that says nothing (vllm::moe_forward): the kernel's function decides, not its template arguments
    ("void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::BlockScaleQuantizationType)2, "
     "__nv_bfloat16, 32, true>(int, int, int, int, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*, "
     "flashinfer::QuantizationSFLayout)", "elementwise"),  # the B200 serving trace's: read whole, "flash" -> attention
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>(long)",
     "elementwise"),
    ("void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::KernelParams<float> >(int)", "other"),
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1", "gemm"),
    # a function that says nothing: the rest of the name decides
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_sliced1x4_ldg4_nn_align4>(Params)", "gemm"),
    ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<Ktraits> >(Params)", "attention"),
])
def test_a_name_is_read_by_its_function_first(name, cls):
    assert kernel_class(name, "kernel", "vllm::moe_forward") == cls


@pytest.mark.parametrize("name, function", [
    ("std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
     "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)", "vllm::fused_add_rms_norm_kernel"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*)", "at::native::::cunn_SoftMaxForward"),
    ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT"),
])
def test_kernel_function(name, function):
    assert kernel_function(name) == function


@pytest.mark.parametrize("name, op, cls", [
    ("void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(_typeConvert<c10::BFloat16>)", "vllm::fused_add_rms_norm",
     "norm"),                                                         # the name alone reads "conv"
    ("Cijk_Ailk_Bljk_SB_MT64x64x16_MI32x32x2x1_SN", "aten::miopen_convolution", "conv"),  # a GEMM-like name
    ("void quantize_with_block_size<(BlockScaleQuantizationType)1, __nv_bfloat16, 16>(attn)", "trtllm::fp4_quantize",
     "elementwise"),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", "aten::mm", "gemm"),
    ("triton_tem_fused_mm_0", None, "gemm"),                          # no op: the name decides
    ("triton_tem_fused_mm_0", "CompiledFunction", "gemm"),            # an op that says nothing: the name decides
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "aten::mm", "comm"),  # a collective is always one
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >", "aten::fill_", "elementwise"),
])
def test_kernel_class_from_its_op_then_its_name(name, op, cls):
    assert kernel_class(name, "kernel", op) == cls


@pytest.mark.parametrize("op, cls", [("aten::conv2d", "conv"), ("aten::_convert_indices", None),
                                     ("aten::native_layer_norm", "norm"), ("aten::softmax", "reduction"),
                                     ("aten::add", None)])
def test_op_class_table(op, cls):
    assert op_class(op) == cls


@pytest.mark.parametrize("name, cls, tc", [
    ("moe_align_block_size_kernel<__nv_bfloat16>", "other", None),  # a type in the name is not a unit
    ("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm>", "gemm", True),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_ffma", "gemm", False),
    ("vectorized_layer_norm_kernel<c10::BFloat16>", "norm", False),
    # AMD Tensile: only an _MI<m>x<n>x<k> field names a matrix (MFMA) instruction, whatever the type
    pytest.param("Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0", "gemm", True, id="tensile-mfma"),
    pytest.param("Cijk_Ailk_Bljk_BBS_BH_MT64x64x16_SN_1LDSB0", "gemm", False, id="tensile-no-mi-shape"),
    pytest.param("Cijk_Alik_Bljk_SB_MT64x64x8_SN_GRVW1", "gemm", False, id="tensile-fp32-no-mi-shape"),
])
def test_tensor_cores_are_for_matrix_work(name, cls, tc):
    assert tensor_core(name, cls) == tc


# -- every branch of the name rules, one name each ------------------------------------------------------------------
@pytest.mark.parametrize("name, category, op, cls", [
    ("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy", "aten::addmm", "memcpy"),
    ("Memset (Device)", "gpu_memset", "aten::addmm", "memset"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", "aten::addmm", "comm"),  # a collective whatever the op
    ("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", "vllm::moe_forward", "gemm"),  # an op that says nothing: the name
    ("sm90_xmma_gemm_bf16bf16_bf16f32", "kernel", None, "gemm"),
    ("mystery_kernel", "kernel", None, "other"),
    ("cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<float> >(Params)", "kernel", None, "gemm"),
])
def test_each_category_collective_op_and_name(name, category, op, cls):
    assert kernel_class(name, category, op) == cls


@pytest.mark.parametrize("op, cls", [(None, None), ("", None), ("aten::unknown_op", None), ("aten::mm", "gemm")])
def test_an_op_the_rules_do_not_know_says_nothing(op, cls):
    assert op_class(op) == cls


@pytest.mark.parametrize("name, function", [
    ("std::enable_if<true, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(float*, int)",
     "vllm::fused_add_rms_norm_kernel"),
    ("plain_kernel", "plain_kernel"), ("", ""), ("<a> (b)", "<a> (b)"),
])
def test_the_function_a_name_runs(name, function):
    assert kernel_function(name) == function


@pytest.mark.parametrize("name, cls, on", [
    ("anything_with_bf16", "elementwise", False),      # a vector class never is
    ("weird_mma_kernel_wmma", "other", True),          # an unknown class with a matrix instruction
    ("weird_bf16_kernel", "other", None),              # a data type alone says nothing
    ("volta_sgemm_128x64_nn", "gemm", False),
    ("Cijk_Ailk_Bljk_HB_MT64x64x16_MI32x32x8x1_SN", "gemm", True),
    ("Cijk_Ailk_Bljk_SB_MT64x64x16_SN", "gemm", False),  # Tensile without an MFMA shape
    ("sm80_xmma_gemm_f16f16_f16f32", "gemm", True),
    ("some_gemm_kernel", "gemm", None),
])
def test_tensor_cores_by_name(name, cls, on):
    assert tensor_core(name, cls) is on


@pytest.mark.parametrize("name, dtype", [
    ("Cijk_Ailk_Bljk_HB_MT64x64x16_MI32x32x8x1_SN", "fp16"), ("Cijk_Ailk_Bljk_BBS_MT64", "bf16"),
    ("Cijk_Ailk_Bljk_XB_MT64", None), ("Cijk_Ailk_Bljk", None), ("Cijk_a_b__MT", None),
    ("sm90_xmma_gemm_e4m3e4m3_bf16f32", "fp8"), ("sm80_xmma_gemm_f32f32_tf32f32", "tf32"), ("ampere_sgemm", "fp32"),
    ("mystery", None),
])
def test_the_data_type_a_name_states(name, dtype):
    assert name_dtype(name) == dtype


def test_torch_input_types():
    assert (torch_dtype("c10::BFloat16"), torch_dtype("float"), torch_dtype("Scalar")) == (("bf16", 2), ("fp32", 4), None)
