"""The byte and FLOP models of ``perfkit.analysis.gpu_kernels.flops`` on hand-written shapes: what each op reads and
writes, counted by hand."""
from __future__ import annotations

import pytest

from perfkit.analysis.gpu_kernels.flops import IMPOSSIBLE_SHAPE, MAX_ELEMENTS, memory_bound, model, parse_args

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
