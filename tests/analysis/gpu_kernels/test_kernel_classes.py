"""Kernel classes from the op that launched them, then the name; Tensor Cores only for matrix work."""
from __future__ import annotations

import pytest

from perfkit.analysis.gpu_kernels.kernel_classes import kernel_class, op_class, tensor_core


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
