"""The byte and FLOP models of ``perfkit.analysis.kernels.flops`` on hand-written shapes: what each op reads and
writes, counted by hand."""
from __future__ import annotations

import pytest

from perfkit.analysis.kernels.flops import memory_bound

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
