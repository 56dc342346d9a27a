"""The byte models of ``perfkit.analysis.gpu_kernels.bytes_moved`` on hand-written shapes: what each op reads and
writes, counted by hand."""
from __future__ import annotations

import pytest

from perfkit.analysis.gpu_kernels.args import Tensor, result_size
from perfkit.analysis.gpu_kernels.bytes_moved import OUT_ARITY, memory_bound, rotary, triton, upsample

X = [64, 512, 1024]
N = 64 * 512 * 1024


@pytest.mark.parametrize("name, dims, types, moved", [
    # an out= tensor is the result: written, not read (1.5x the bytes when it was counted as an input)
    ("aten::_softmax", [X, [], [], X], ["float", "Scalar", "Scalar", "float"], 2 * 4 * N),
    ("aten::_softmax", [X, [], []], ["float", "Scalar", "Scalar"], 2 * 4 * N),
    ("aten::mul", [X, [], X], ["float", "Scalar", "float"], 2 * 4 * N),
    ("aten::mul", [X, X], ["float", "float"], 3 * 4 * N),                    # two inputs, no out
    ("aten::clamp_min", [X, [], X], ["float", "Scalar", "float"], 2 * 4 * N),
    ("aten::div", [X, X, []], ["float", "float", "str"], 3 * 4 * N),         # rounding_mode, not an out tensor
    ("aten::div", [X, X, X], ["float", "float", "float"], 3 * 4 * N),        # div.out: the third is the result
    ("aten::where", [X, X, X], ["bool", "float", "float"], N + 3 * 4 * N),   # three inputs: where has no 3-arg out
])
def test_an_out_tensor_is_written_not_read(name, dims, types, moved):
    assert memory_bound("elementwise", name, dims, types).bytes == moved


@pytest.mark.parametrize("parent, moved", [("aten::isnan", 4 * N + N), ("aten::lt", 2 * 4 * N + N)])
def test_isnan_reads_its_input_once(parent, moved):
    """isnan(x) is x != x: one tensor under two argument names (140% of the roof when read twice)."""
    assert memory_bound("elementwise", "aten::ne", [X, X], ["float", "float"], parent=parent).bytes == moved


@pytest.mark.parametrize("dims, types, moved", [
    ([[1, 256, 4096], [1, 256, 1]], ["c10::BFloat16", "float"], 2 * 2**20 + 4 * 256 + 4 * 2**20),  # writes fp32
    ([[4096], [4096]], ["c10::BFloat16", "c10::Half"], 2 * 4096 + 2 * 4096 + 4 * 4096),            # bf16+fp16: fp32
    ([[4096], []], ["c10::Half", "float"], 2 * 4096 + 4 + 2 * 4096),          # a 0-dim float does not promote
    ([[4096], []], ["long int", "double"], 8 * 4096 + 8 + 8 * 4096),          # ... but a higher category does
    ([[8, 1, 64], [1, 32, 64]], ["float", "float"], 4 * 512 + 4 * 2048 + 4 * 8 * 32 * 64),       # broadcast output
])
def test_the_result_has_the_broadcast_shape_and_the_promoted_type(dims, types, moved):
    assert memory_bound("elementwise", "aten::mul", dims, types).bytes == moved


@pytest.mark.parametrize("types, dtype", [
    (("bf16", "fp32"), "fp32"), (("fp16", "bf16"), "fp32"), (("int64", "fp16"), "fp16"), (("bool", "int32"), "int32"),
])
def test_result_size(types, dtype):
    sizes = {"bf16": 2, "fp16": 2, "fp32": 4, "int64": 8, "int32": 4, "bool": 1}
    assert result_size([Tensor(i, [4], t, sizes[t]) for i, t in enumerate(types)])[0] == dtype


def test_a_vector_norm_writes_no_full_size_output():
    m = memory_bound("reduction", "aten::linalg_vector_norm", [X, [], [], [], []], ["float", "Scalar", "", "Scalar", ""])
    assert m.bytes == 4 * N


@pytest.mark.parametrize("dims, concrete, written", [
    ([[1, 768, 8], [], []], ["", "[128]", ""], 768 * 128),                            # output_size
    ([[1, 512, 128, 128], [], []], ["", "", "[2., 2.]"], 512 * 256 * 256),            # scale_factors (.vec)
    ([[1, 512, 128, 128], [], [], []], ["", "", "2.", "3."], 512 * 256 * 384),        # scales_h, scales_w
    ([[1, 4, 10, 10], [], [], []], ["", "[20, 20]", "False", ""], 4 * 20 * 20),       # bilinear: align_corners
])
def test_upsample_writes_the_size_it_asks_for(dims, concrete, written):
    x = 1
    for d in dims[0]:
        x *= d
    m = upsample("elementwise", dims, ["c10::BFloat16"] + [""] * (len(dims) - 1), concrete)
    assert m.bytes == 2 * x + 2 * written


def test_rotary_embedding_reads_only_the_rows_its_positions_select():
    """The B200 serving trace's shapes: 888 positions of a 131,072-row cos/sin cache (121.5% when read whole)."""
    dims = [[888], [888, 512], [888, 64], [], [131072, 64], []]
    types = ["long int", "c10::BFloat16", "c10::BFloat16", "Scalar", "c10::BFloat16", "Scalar"]
    m = rotary(dims, types)
    assert m.bytes == 888 * 8 + 2 * (888 * 512 * 2 + 888 * 64 * 2) + 888 * 64 * 2


def test_a_triton_kernel_touches_at_most_its_iteration_space():
    """Inductor's xnumel (the trailing integer) bounds what each buffer gives: a slice of a larger buffer."""
    dims = [[2, 38, 4429, 64], [2, 333, 2432], []]
    m = triton(dims, ["c10::BFloat16", "c10::BFloat16", "Scalar"], ["", "", "1619712"])
    assert m.bytes == 2 * 1619712 + 2 * 1619712
    whole = triton(dims[:2], ["c10::BFloat16", "c10::BFloat16"], ["", ""])
    assert whole.bytes == 2 * (2 * 38 * 4429 * 64) + 2 * 1619712


@pytest.mark.parametrize("name", sorted(OUT_ARITY))
def test_out_arity_is_the_out_overloads(name):
    """Each entry has an out overload with that many arguments, the out tensor last, and no other overload of that
    many arguments ends with a tensor (so a tensor there can only be the out)."""
    torch = pytest.importorskip("torch")
    schemas = torch._C._jit_get_schemas_for_operator(name)
    counts = OUT_ARITY[name] if isinstance(OUT_ARITY[name], tuple) else (OUT_ARITY[name],)
    for n in counts:
        outs = [s for s in schemas if len(s.arguments) == n and s.arguments[-1].is_out]
        others = [s for s in schemas if len(s.arguments) == n and not s.arguments[-1].is_out
                  and str(s.arguments[-1].type).startswith("Tensor")]
        assert outs and not others, (name, n)
