"""The byte and FLOP models of ``perfkit.analysis.gpu_kernels.flops`` on hand-written shapes: what each op reads and
writes, counted by hand."""
from __future__ import annotations

import math

import pytest

from perfkit.analysis.gpu_kernels.bytes_moved import memory_bound
from perfkit.analysis.gpu_kernels.args import IMPOSSIBLE_SHAPE, MAX_ELEMENTS, parse_args
from perfkit.analysis.gpu_kernels.flops import attention, gemm, grouped_gemm, model

X = [64, 512, 1024]  # 33,554,432 elements
N = 64 * 512 * 1024


@pytest.mark.parametrize("name, dims, types, moved", [
    ("aten::add", [X, X, []], ["float", "float", "Scalar"], 3 * 4 * N),           # read two, write one
    ("aten::add_", [X, X, []], ["float", "float", "Scalar"], 3 * 4 * N),          # read two, write the first back
    ("aten::copy_", [X, X, []], ["c10::BFloat16", "float", "Scalar"], 2 * N + 4 * N),  # write bf16, read fp32
    ("aten::fill_", [X, []], ["float", "Scalar"], 4 * N),                         # write only
    ("aten::zero_", [X], ["float"], 4 * N),
    ("aten::ne", [X, []], ["float", "Scalar"], 4 * N + N),                        # the output is bool
    ("aten::clamp_min", [X, []], ["float", "Scalar"], 2 * 4 * N),
    ("aten::clamp_min_", [X, []], ["float", "Scalar"], 2 * 4 * N),
])
def test_elementwise_bytes(name, dims, types, moved):
    m = memory_bound("elementwise", name, dims, types)
    assert m.bytes == moved and m.flops == N


def test_a_reduction_writes_no_output_the_size_of_its_input():
    assert memory_bound("reduction", "aten::sum", [X, [], []], ["float", "", ""]).bytes == 4 * N


@pytest.mark.parametrize("name, family, dims, types, concrete", [
    ("aten::mm", "gemm", [[-4, 8], [8, 16]], ["float", "float"], []),                      # a negative dim
    ("aten::mm", "gemm", [[2**21, 2**20], [2**20, 8]], ["float", "float"], []),             # 2^41 elements
    ("aten::conv2d", "conv", [[1, 3, 8, 8], [4, 3, 3, 3], []], ["float", "float", ""],
     ["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "1"]),                                      # stride 0
    ("aten::conv2d", "conv", [[1, 3, 8, 8], [4, 3, 3, 3], []], ["float", "float", ""],
     ["", "", "", "[1, 1]", "[-1, 0]", "[1, 1]", "1"]),                                     # negative padding
    ("aten::conv2d", "conv", [[1, 3, 2, 2], [4, 3, 5, 5], []], ["float", "float", ""],
     ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"]),                                      # no output pixel
])
def test_an_impossible_shape_is_not_modeled(name, family, dims, types, concrete):
    reason = model(name, family, dims, types, concrete)
    assert isinstance(reason, str) and reason.startswith(IMPOSSIBLE_SHAPE)


def test_the_largest_possible_tensor_is_still_modeled():
    side = 2**20  # 2^40 elements exactly: MAX_ELEMENTS
    assert side * side == MAX_ELEMENTS
    assert model("aten::mm", "gemm", [[side, side], [side, 1]], ["float", "float"], []).flops == 2.0 * side * side


def test_a_stride_too_large_for_a_float_is_not_a_traceback():
    d, t, c = parse_args("[[1, 3, 8, 8], [4, 3, 3, 3], []]", '["float", "float", ""]',
                         '["", "", "", "[1e400, 1]", "[0, 0]", "[1, 1]", "1"]')
    assert isinstance(model("aten::conv2d", "conv", d, t, c), str)


Q = [64, 16, 512, 64]  # b, h, s, d (bhsd): one forward is 4*b*h*s*s*d FLOPs
FULL = 4.0 * 64 * 16 * 512 * 512 * 64


@pytest.mark.parametrize("name, dims, concrete, flops", [
    # the efficient kernels' causal flag is custom_mask_type (argument 9 forward, 14 backward), an int
    ("aten::_efficient_attention_forward", [[64, 512, 16, 64]] * 3, [""] * 8 + ["0.", "1", "True"], FULL / 2),
    ("aten::_efficient_attention_forward", [[64, 512, 16, 64]] * 3, [""] * 8 + ["0.", "0", "True"], FULL),
    ("aten::_efficient_attention_backward", [[64, 512, 16, 64]] * 4, [""] * 11 + ["0.", "", "", "1", "False"],
     2.5 * FULL / 2),
    ("aten::_efficient_attention_backward", [[64, 512, 16, 64]] * 4, [""] * 11 + ["True", "", "", "0", "False"],
     2.5 * FULL),                                                         # dropout_p is not the flag
    ("aten::_cudnn_attention_forward", [Q] * 3, [""] * 6 + ["512", "512", "True", "0.", "True", "False"], FULL / 2),
    ("aten::_cudnn_attention_backward", [Q] * 5, [""] * 11 + ["512", "512", "0.", "True"], 2.5 * FULL / 2),
    ("aten::_scaled_dot_product_cudnn_attention_backward", [Q] * 5, [""] * 11 + ["512", "512", "0.", "False"],
     2.5 * FULL),
])
def test_attention_reads_its_own_causal_flag(name, dims, concrete, flops):
    types = ["float"] * len(dims)
    assert attention(name, dims + [[]] * (len(concrete) - len(dims)), types + [""] * (len(concrete) - len(dims)),
                     concrete).flops == flops


@pytest.mark.parametrize("a, b, flops, out", [
    ([4096, 1024], [8, 1024, 512], 2.0 * 4096 * 1024 * 512, 4096 * 512),      # rows of A split among 8 groups
    ([8, 256, 1024], [1024, 4096], 2.0 * 256 * 1024 * 4096, 256 * 4096),      # columns of B split
    ([256, 8192], [8192, 512], 2.0 * 256 * 8192 * 512, 256 * 512),            # groups along K
    ([8, 256, 1024], [8, 1024, 512], 2.0 * 8 * 256 * 1024 * 512, 8 * 256 * 512),  # batched
])
def test_grouped_gemm(a, b, flops, out):
    m = grouped_gemm("aten::_grouped_mm", [a, b, [8], [], []], ["c10::BFloat16", "c10::BFloat16", "int", "", ""])
    assert m.flops == flops and m.bytes == 2 * math.prod(a) + 2 * math.prod(b) + 2 * out


def test_an_fp8_gemm_writes_its_output_tensor_type():
    """vLLM's cutlass_scaled_mm(out, a, b, a_scales, b_scales, bias): fp8 operands, a bf16 output."""
    dims = [[888, 4096], [888, 2048], [2048, 4096], [888, 1], [1, 4096], []]
    types = ["c10::BFloat16", "c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float", ""]
    m = gemm("_C::cutlass_scaled_mm", dims, types)
    assert m.flops == 2.0 * 888 * 4096 * 2048 and m.dtype == "fp8"
    assert m.bytes == 888 * 2048 + 2048 * 4096 + 2 * 888 * 4096
