"""The byte and FLOP models of ``perfkit.analysis.gpu_kernels.flops`` on hand-written shapes: what each op reads and
writes, counted by hand."""
from __future__ import annotations

import math

import pytest

from perfkit.analysis.gpu_kernels.bytes_moved import memory_bound, triton
from perfkit.analysis.gpu_kernels.args import IMPOSSIBLE_SHAPE, MAX_ELEMENTS, parse_args
from perfkit.analysis.gpu_kernels.flops import (attention, conv_backward, gemm, gemm_mnk, grouped_gemm, is_causal, model,
                                             op_family)

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


# -- which ops are modeled, and why an op is not ----------------------------------------------------------------
@pytest.mark.parametrize("name, family", [
    ("aten::addmm", "gemm"), ("aten::_grouped_mm", "gemm"), ("aten::conv2d", "conv"),
    ("aten::convolution_backward", "conv"), ("aten::_flash_attention_forward", "attention"), ("aten::add", None),
])
def test_the_family_of_an_op_by_name(name, family):
    assert op_family(name) == family


@pytest.mark.parametrize("name, family, dims, reason", [
    ("aten::mm", "gemm", [], "no Input Dims (record_shapes=False)"),
    ("aten::add", "gemm", [[2, 2]], "no FLOP model for aten::add"),          # called gemm, not a GEMM op perfkit knows
    ("aten::foo", "other", [[2, 2]], "other ops are not modeled"),
    ("aten::mm", "gemm", [[2, 2], []], "GEMM operands without shapes"),
])
def test_ops_that_cannot_be_modeled_say_why(name, family, dims, reason):
    assert model(name, family, dims, ["float"] * len(dims), []) == reason


@pytest.mark.parametrize("name, dims, mnk", [
    ("aten::linear", [[4, 8, 32], [16, 32]], (1, 32, 16, 32)),   # leading dims fold into M; B is [N, K]
    ("aten::linear", [[4, 32], [32]], (1, 4, 1, 32)),            # a 1-D weight: N = 1
    ("aten::mm", [[4, 32], [32, 16]], (1, 4, 16, 32)),
    ("aten::matmul", [[32], [32, 16]], (1, 1, 16, 32)),          # a vector times a matrix: M = 1
    ("aten::matmul", [[4, 32], [32]], (1, 4, 1, 32)),            # a matrix times a vector: N = 1
    ("aten::matmul", [[3, 1, 4, 32], [5, 32, 16]], (5, 4, 16, 32)),  # the larger batch counts
    ("aten::bmm", [[6, 4, 32], [6, 32, 16]], (6, 4, 16, 32)),
])
def test_gemm_dimensions(name, dims, mnk):
    assert gemm_mnk(name, dims) == mnk


@pytest.mark.parametrize("concrete, mask_flops", [
    ([], 2), (["", "", "", "", "", "", "", "False", "", "", "[true, true, false]"], 2),
    (["", "", "", "", "", "", "", "False", "", "", "[true, false, false]"], 1),
    (["", "", "", "", "", "", "", "False", "", "", "[false, false, true]"], 0),
    (["", "", "", "", "", "", "", "False", "", "", "not a list"], 2),
])
def test_convolution_backward_counts_the_gradients_asked_for(concrete, mask_flops):
    dims = [[2, 8, 4, 4], [2, 3, 4, 4], [8, 3, 3, 3]]  # grad_output, input, weight
    m = conv_backward(dims, ["float"] * 3, concrete)
    one = 2.0 * 2 * 16 * (8 * 3 * 3 * 3)
    elements = 2 * 8 * 16 + 2 * 3 * 16 + 8 * 27
    assert m.flops == one * mask_flops and m.bytes == elements * 4 * (1 + mask_flops / 2) and m.family == "conv"


def test_a_transposed_convolution_backward_counts_the_input_positions():
    dims = [[2, 8, 8, 8], [2, 3, 4, 4], [3, 8, 3, 3]]
    m = conv_backward(dims, ["float"] * 3, ["", "", "", "", "", "", "", "True"])
    assert m.flops == 2 * (2.0 * 2 * 16 * (3 * 8 * 9))


def test_convolution_backward_without_shapes():
    assert conv_backward([[2, 8], [2, 3, 4, 4], [8, 3, 3, 3]], ["float"] * 3, []) == \
        "convolution backward inputs without shapes"


@pytest.mark.parametrize("name, concrete, i, causal", [
    ("aten::scaled_dot_product_attention", ["", "", "", "", "", "True"], 5, True),
    ("aten::scaled_dot_product_attention", ["", "", "", "", "", "False"], 5, False),
    ("aten::scaled_dot_product_attention", [], 5, False),                      # not recorded
    ("aten::_efficient_attention_forward", ["1"], 0, True), ("aten::_efficient_attention_forward", ["2"], 0, True),
    ("aten::_efficient_attention_forward", ["0"], 0, False),
    ("aten::_efficient_attention_forward", ["True"], 0, False),                 # a mask type, not a flag
])
def test_the_causal_flag(name, concrete, i, causal):
    assert is_causal(name, concrete, i) is causal


# -- each family's whole model, counted by hand: family, FLOPs, bytes, type (and bytes read for a GEMM) ------------
F = "float"
CONV = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]  # conv2d: stride, padding, dilation at 3, 4, 5


@pytest.mark.parametrize("name, dims, concrete, expected", [
    # addmm(bias[16], A[4, 8], B[8, 16]): 2*4*16*8 FLOPs; reads A 128 B + B 512 B + bias 64 B, writes C 256 B
    ("aten::addmm", [[16], [4, 8], [8, 16]], [], ("gemm", 1_024.0, 960.0, "fp32", 704.0)),
    # conv2d 3x3, stride 1, padding 1: [2, 3, 8, 8] -> [2, 4, 8, 8]
    ("aten::conv2d", [[2, 3, 8, 8], [4, 3, 3, 3], []], CONV, ("conv", 2.0 * 2 * 64 * 108, (384 + 108 + 512) * 4.0, "fp32")),
    # stride 2, no padding, dilation 2 on a 10x6 input and a 3x1 kernel: (10 - 4 - 1) // 2 + 1 = 3, (6 - 0 - 1) // 2 + 1 = 3
    ("aten::conv2d", [[1, 3, 10, 6], [4, 3, 3, 1], []], ["", "", "", "[2, 2]", "[0, 0]", "[2, 2]", "1"],
     ("conv", 2.0 * 9 * 36, (180 + 36 + 36) * 4.0, "fp32")),
    # 1-D, a 3x3 input shrunk to one output position is possible
    ("aten::conv1d", [[1, 3, 8], [4, 3, 3], []], ["", "", "", "[1]", "[0]", "[1]", "1"],
     ("conv", 2.0 * 6 * 36, (24 + 36 + 24) * 4.0, "fp32")),
    ("aten::conv2d", [[1, 3, 3, 3], [4, 3, 3, 3], []], ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"],
     ("conv", 2.0 * 1 * 108, (27 + 108 + 4) * 4.0, "fp32")),
    # transposed (by name, or convolution's flag): the input's positions times the weight; out: C_out = weight dim 1
    ("aten::conv_transpose2d", [[2, 4, 5, 5], [4, 3, 3, 3], []], [], ("conv", 2.0 * 2 * 25 * 108, (200 + 108 + 150) * 4.0,
                                                                      "fp32")),
    ("aten::convolution", [[2, 4, 5, 5], [4, 3, 3, 3], []], ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "True"],
     ("conv", 2.0 * 2 * 25 * 108, (200 + 108 + 150) * 4.0, "fp32")),
    # attention [B, H, S, D] = [1, 2, 4, 8]: 2 * 1 * 2 * 4 * 4 * (8 + 8) FLOPs; q, k, v and the output in fp32
    ("aten::_scaled_dot_product_flash_attention", [[1, 2, 4, 8]] * 3, [], ("attention", 1_024.0, 256 * 4.0, "fp32")),
    ("aten::_scaled_dot_product_flash_attention", [[1, 2, 4, 8]] * 3, ["", "", "", "", "True"],
     ("attention", 512.0, 256 * 4.0, "fp32")),
    # [B, S, H, D] with 6 keys: 2 * 2 * 4 * 6 * 16 FLOPs; q 64 + k 96 + v 96 + out 64 elements
    ("aten::_flash_attention_forward", [[1, 4, 2, 8], [1, 6, 2, 8], [1, 6, 2, 8]], [],
     ("attention", 1_536.0, 320 * 4.0, "fp32")),
    # the backward: 2.5x the forward's FLOPs, twice its bytes
    ("aten::_scaled_dot_product_flash_attention_backward", [[1, 2, 4, 8]] * 4, [], ("attention", 2_560.0, 2_048.0, "fp32")),
])
def test_the_whole_model_of_each_family(name, dims, concrete, expected):
    got = model(name, op_family(name), dims, [F] * len(dims), concrete)
    assert tuple(got)[:len(expected)] == expected


def test_a_grouped_gemm_model_with_its_bias():
    got = model("aten::_grouped_mm", "gemm", [[8, 4], [2, 4, 16], [], [16]], [F] * 4, [])
    assert tuple(got)[:4] == ("gemm", 2.0 * 8 * 4 * 16, 128 + 512 + 128 * 4 + 64.0, "fp32")


@pytest.mark.parametrize("name, dims, concrete, reason", [
    ("aten::conv2d", [[2, 3], [4, 3, 3, 3], []], CONV, "convolution inputs without shapes"),
    ("aten::conv2d", [[1, 3, 8, 8], [], []], CONV, "convolution inputs without shapes"),
    ("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3], []], [], "convolution without stride/padding (Concrete Inputs not "
                                                           "recorded)"),
    ("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3], []], ["", "", "", "[1, 1]", "", "[1, 1]"],
     "convolution without stride/padding (Concrete Inputs not recorded)"),
    ("aten::convolution", [[1, 3, 8, 8], [4, 3, 3, 3], []], ["", "", "", "[1, 1]", "", "[1, 1]"],  # no flag at 6
     "convolution without stride/padding (Concrete Inputs not recorded)"),
    ("aten::_grouped_mm", [[8, 4], []], [], "grouped GEMM operands without 2-D or 3-D shapes"),
    ("aten::_grouped_mm", [[8], [2, 4, 16]], [], "grouped GEMM operands without 2-D or 3-D shapes"),
    ("aten::_scaled_dot_product_flash_attention", [[1, 2, 4, 8], [], [1, 2, 4, 8]], [],
     "attention inputs without 4-D shapes"),
    ("aten::_scaled_dot_product_flash_attention", [[1, 2, 4, 8], [1, 2, 4, 8], [2, 4, 8]], [],
     "attention inputs without 4-D shapes"),
    ("aten::_scaled_dot_product_flash_attention", [[1, 2, 4, 8], [2, 4, 8], [1, 2, 4, 8]], [],
     "attention inputs without 4-D shapes"),
])
def test_each_family_says_why_it_cannot_model(name, dims, concrete, reason):
    assert model(name, op_family(name), dims, [F] * len(dims), concrete) == reason


@pytest.mark.parametrize("concrete", [["", "", "", "[1, 1]", "[0, 0]", "[0, 1]", "1"],
                                      ["", "", "", "[1, 1]", "[-1, 0]", "[1, 1]", "1"]])
def test_a_dilation_below_one_or_a_negative_padding_is_impossible(concrete):
    assert model("aten::conv2d", "conv", [[1, 3, 8, 8], [4, 3, 3, 3], []], [F] * 3, concrete).startswith(IMPOSSIBLE_SHAPE)


def test_an_output_of_no_position_is_impossible():
    got = model("aten::conv2d", "conv", [[1, 3, 2, 2], [4, 3, 3, 3], []], [F] * 3,
                ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"])
    assert got == f"{IMPOSSIBLE_SHAPE} (the output of [1, 3, 2, 2] by [4, 3, 3, 3] would be [0, 0]): not modeled"


def test_the_model_hands_triton_memory_bound_and_backward_ops_on_whole():
    dims, types = [[64, 128], [64, 128]], [F, F]
    assert model("triton_poi_fused_add_0", "triton", dims, types, ["", ""]) == triton(dims, types, ["", ""])
    ne = ([[64, 128], [64, 128]], [F, F])
    assert model("aten::ne", "elementwise", *ne, [], parent="aten::isnan") == memory_bound(
        "elementwise", "aten::ne", *ne, [], "aten::isnan")
    back = ([[2, 8, 4, 4], [2, 3, 4, 4], [8, 3, 3, 3]], [F] * 3,
            ["", "", "", "", "", "", "", "False", "", "", "[true, false, false]"])
    assert model("aten::convolution_backward", "conv", *back) == conv_backward(*back)
