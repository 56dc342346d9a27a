"""The byte models of ``perfkit.analysis.gpu_kernels.bytes_moved`` on hand-written shapes: what each op reads and
writes, counted by hand."""
from __future__ import annotations

import pytest

from perfkit.analysis.gpu_kernels.args import Model, Tensor, result_size
from perfkit.analysis.gpu_kernels.bytes_moved import (
    OUT_ARITY, ROTARY, _in_place, _iteration_space, _upsampled, memory_bound, rotary, triton, upsample,
)

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


BF16, FP32 = "c10::BFloat16", "float"
SMALL = 64 * 512 * 4  # bytes of a float [64, 512, 1]


@pytest.mark.parametrize("family, name, dims, types, model", [
    # a reduction writes no full-size result; softmax does; a vector norm is a reduction whatever its family
    ("reduction", "aten::sum", [X, []], [FP32, "Scalar"], Model("reduction", N, 4 * N, "fp32", 4 * N)),
    ("reduction", "aten::_softmax", [X, [], []], [FP32, "Scalar", "Scalar"],
     Model("reduction", N, 8 * N, "fp32", 4 * N)),
    ("elementwise", "aten::linalg_vector_norm", [X], [FP32], Model("elementwise", N, 4 * N, "fp32", 4 * N)),
    # in place: every input read, the first written back in its own type (bf16, not the promoted fp32)
    ("elementwise", "aten::add_", [X, X], [BF16, FP32], Model("elementwise", N, 8 * N, "fp32", 6 * N)),
    ("elementwise", "aten::__and__", [X, X], ["bool", "long int"],    # a dunder op is out of place
     Model("elementwise", N, 17 * N, "int64", 9 * N)),
    ("elementwise", "aten::addcmul_", [X, [64, 512, 1], X], ["", FP32, FP32],   # self unknown: out of place, a floor
     Model("elementwise", N, SMALL + 8 * N, "fp32", SMALL + 4 * N)),
    # copy_ reads its source and writes its destination (a cast: the source's size read); a 0-dim third not counted
    ("elementwise", "aten::copy_", [X, X, []], [BF16, FP32, "bool"], Model("elementwise", N, 6 * N, "fp32", 4 * N)),
    ("elementwise", "aten::copy_", [X, X], [FP32, BF16], Model("elementwise", N, 6 * N, "fp32", 2 * N)),
    ("elementwise", "aten::copy_", [X, X], ["", FP32], Model("elementwise", N, 8 * N, "fp32", 4 * N)),
    # fill_ only writes, with a scalar or a 0-dim tensor value; without self's type, the value alone
    ("elementwise", "aten::fill_", [X, []], ["c10::Half", "Scalar"], Model("elementwise", N, 2 * N, "fp16", 0)),
    ("elementwise", "aten::fill_", [X, []], ["c10::Half", FP32], Model("elementwise", N, 2 * N, "fp16", 0)),
    ("elementwise", "aten::fill_", [X, []], ["", FP32], Model("elementwise", 1, 8, "fp32", 4)),
    # an out tensor of another type than the inputs, bigger than each: written in its type, the FLOPs its size
    ("elementwise", "aten::mul", [[64, 1], [1, 512], [64, 512]], [BF16, BF16, FP32],
     Model("elementwise", 64 * 512, 128 + 1024 + 64 * 512 * 4, "bf16", 128 + 1024)),
    # the dtype is the largest input's; shapes that do not broadcast write the largest input's size
    ("elementwise", "aten::mul", [X, [1]], [BF16, FP32], Model("elementwise", N, 6 * N + 4, "bf16", 2 * N + 4)),
    ("elementwise", "aten::mul", [[2, 3], [4]], [FP32, FP32], Model("elementwise", 6, 64, "fp32", 40)),
])
def test_memory_bound_models(family, name, dims, types, model):
    assert memory_bound(family, name, dims, types) == model


GATHER = "gathers move only the rows they select: bytes not modeled"
NO_TENSORS = "no tensor inputs with known types"
NO_SHAPE = "upsample input without shape"
NO_SCALES = "upsample without output_size or scale factors (Concrete Inputs not recorded)"


@pytest.mark.parametrize("name, dims, types, concrete, reason", [
    ("aten::index_select", [X, [], [64]], [FP32, "Scalar", "long int"], [], GATHER),
    ("fbgemm::split_embedding_codegen_lookup_adagrad_function", [X], [FP32], [], GATHER),
    ("aten::mul", [[], []], ["Scalar", "Scalar"], [], NO_TENSORS),
    ("aten::abs", [[], X], ["", FP32], [], NO_TENSORS),           # only the out tensor known: nothing read
    ("aten::upsample_nearest2d", [[1, 4, 10, 10], [], []], ["", "", ""], ["", "[20, 20]", ""], NO_SHAPE),
    ("aten::upsample_nearest2d", [[4, 10], [], []], [FP32, "", ""], ["", "[20]", ""], NO_SHAPE),
    ("aten::upsample_nearest2d", [[1, 4, 10, 10], [], []], [FP32, "", ""], ["", "[a, b]", ""],
     "upsample with an unreadable output_size or scale factors"),
    ("aten::upsample_nearest2d", [[1, 4, 10, 10], [], []], [FP32, "", ""], ["", "", ""], NO_SCALES),
    ("aten::_upsample_bilinear2d_aa", [[1, 4, 10, 10], [], []], [FP32, "", ""], ["", "", "2."], NO_SCALES),
])
def test_memory_bound_says_why_it_has_no_model(name, dims, types, concrete, reason):
    assert memory_bound("elementwise", name, dims, types, concrete) == reason


@pytest.mark.parametrize("name, family", [("aten::upsample_nearest2d", "elementwise"),
                                          ("aten::_upsample_bilinear2d_aa", "reduction")])
def test_an_upsample_is_modeled_by_its_output_size(name, family):
    m = memory_bound(family, name, [[1, 4, 10, 10], [], []], [FP32, "", ""], ["", "[20, 20]", ""])
    assert m == Model(family, 1600, 4 * 400 + 4 * 1600, "fp32", 4 * 400)


@pytest.mark.parametrize("spatial, concrete, out", [
    ([10, 10], ["", "[20, 30]"], [20, 30]),
    ([10, 10], ["", "None", "2.", "3."], [20, 30]),            # output_size not given: the scales after it
    ([10, 10], ["", "", "False", "2.", "3."], [20, 30]),       # align_corners is not a scale
    ([10, 10], ["", "", "True", "2.", "3."], [20, 30]),
    ([10, 10], ["", "", "[2., 3.]"], [20, 30]),
    ([10], ["", "", "", "3."], [30]),
    ([10], ["", "", "[2.5]"], [25]),
    ([10, 10], ["", "", "2."], None),                          # one scale for two dimensions
    ([10, 10], ["", "", ""], None), ([10, 10], [], None),
])
def test_upsampled_size(spatial, concrete, out):
    assert _upsampled(spatial, concrete) == out


ROT_DIMS = [[8], [8, 16], [8, 4], [], [100, 4], []]
ROT_TYPES = ["long int", BF16, BF16, "Scalar", BF16, "Scalar"]
ROT_REASON = "rotary embedding without shapes for positions, query and cos/sin cache"


def test_rotary_model():
    m = rotary(ROT_DIMS, ROT_TYPES)
    read = 8 * 8 + 2 * (128 + 32) + 8 * 4 * 2
    assert m == Model("elementwise", 160, read + 2 * (128 + 32), "bf16", read)
    assert memory_bound("elementwise", ROTARY, ROT_DIMS, ROT_TYPES) == m
    no_key = rotary(ROT_DIMS, ROT_TYPES[:2] + [""] + ROT_TYPES[3:])
    assert no_key == Model("elementwise", 128, 64 + 256 + 64 + 256, "bf16", 64 + 256 + 64)


@pytest.mark.parametrize("i, dims_i, type_i", [(0, [8], ""), (1, [8, 16], ""), (4, [100, 4], ""),
                                               (4, [100, 4, 1], BF16)])
def test_rotary_without_its_shapes(i, dims_i, type_i):
    dims, types = list(ROT_DIMS), list(ROT_TYPES)
    dims[i], types[i] = dims_i, type_i
    assert rotary(dims, types) == ROT_REASON


def test_a_triton_kernels_dtype_is_its_largest_buffers():
    m = triton([[1000], [900]], [FP32, "c10::Float8_e4m3fn"], ["", ""])
    assert (m.family, m.flops, m.bytes, m.dtype) == ("triton", 1000, 4900, "fp32")
    assert triton([[], []], ["Scalar", FP32], ["4", ""]) == "Triton kernel without tensor arguments (record_shapes=False)"


@pytest.mark.parametrize("concrete, count, space", [
    (["4", "8"], 2, 32), (["", "16", "8"], 3, 128), (["", "8"], 2, 8), (["", "x", "8"], 3, 8),
    (["", "8"], 1, 0), (["", "", ""], 3, 0), ([], 2, 0),
])
def test_iteration_space_is_the_trailing_whole_numbers(concrete, count, space):
    assert _iteration_space(concrete, count) == space


@pytest.mark.parametrize("name, in_place", [("aten::add_", True), ("aten::add", False), ("aten::__and__", False),
                                            ("aten::__iand__", False)])
def test_in_place(name, in_place):
    assert _in_place(name) is in_place
