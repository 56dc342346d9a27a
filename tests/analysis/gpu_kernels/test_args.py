"""An op's recorded arguments as the FLOP and byte models read them (``perfkit.analysis.gpu_kernels.args``): the raw
JSON read leniently, tensors of known types with the impossible-shape line (``MAX_ELEMENTS``) one row each side,
``Concrete Inputs`` lists, broadcasting and PyTorch's type promotion, each from hand-written arguments."""
from __future__ import annotations

import pytest

from perfkit.analysis.gpu_kernels.args import (
    MAX_ELEMENTS, Impossible, Tensor, broadcast, compact, ints, loads, numbers, parse_args, result_size, shaped,
    tensor, tensors,
)


@pytest.mark.parametrize("text, value", [
    ("", []), (None, []),
    ("[[1, 2], []]", [[1, 2], []]),
    ("[1, 2", []),            # not JSON
    ('{"a": 1}', []),         # JSON, not a list
    ("5", []),
])
def test_loads_gives_a_list_or_nothing(text, value):
    assert loads(text) == value


def test_parse_args_reads_each_argument_apart():
    assert parse_args("[[3]]", '["float"]', '["", "2"]') == ([[3]], ["float"], ["", "2"])
    assert parse_args("", "x", '{"a": 1}') == ([], [], [])


@pytest.mark.parametrize("text, one_line", [
    ('[\n  [1,\n   768],\n  {"a":1}\n]', '[[1, 768], {"a": 1}]'),  # pretty-printed JSON: the exporter's separators
    ("", ""), (None, ""),
    ("not  json\n at all", "not json at all"),                    # not JSON: its words on one line
])
def test_compact_puts_recorded_json_on_one_line(text, one_line):
    assert compact(text) == one_line


DIMS = [[2, 3], [], "x", [4], [2, "n"], [-1], [0, 5]]
TYPES = ["float", "c10::Half", "float", "Scalar", "float", "float", "long int"]


@pytest.mark.parametrize("i, expected", [
    (0, Tensor(0, [2, 3], "fp32", 4)),
    (1, Tensor(1, [], "fp16", 2)),       # a 0-dim tensor
    (2, None),                           # not a list of dims
    (3, None),                           # not a tensor type
    (4, None),                           # a symbolic dimension
    (6, Tensor(6, [0, 5], "int64", 8)),  # an empty tensor is real
    (7, None),                           # past the recorded dims
    (None, None),
])
def test_tensor_is_a_known_type_with_int_dims(i, expected):
    assert tensor(DIMS, TYPES, i) == expected


def test_a_tensor_needs_its_type_recorded():
    assert tensor([[2], [3]], ["float"], 1) is None
    assert tensor([[2], [3]], ["float"], 0) == Tensor(0, [2], "fp32", 4)


@pytest.mark.parametrize("shape, impossible", [
    ([-1], True), ([0], False),
    ([1 << 20, 1 << 20], False),          # exactly MAX_ELEMENTS
    ([1 << 20, (1 << 20) + 1], True),     # one row past it
])
def test_a_shape_no_gpu_could_hold_raises(shape, impossible):
    if impossible:
        with pytest.raises(Impossible, match=rf"argument 0 is \[{shape[0]}"):
            tensor([shape], ["float"], 0)
    else:
        assert tensor([shape], ["float"], 0).shape == shape


def test_tensor_elements_and_bytes():
    t = Tensor(0, [2, 3, 4], "fp16", 2)
    assert (t.elements, t.nbytes) == (24, 48)
    assert Tensor(0, [], "fp32", 4).elements == 1


def test_shaped_wants_at_least_one_dimension():
    assert shaped(DIMS, TYPES, 0) == Tensor(0, [2, 3], "fp32", 4)
    assert shaped(DIMS, TYPES, 1) is None  # 0-dim
    assert shaped(DIMS, TYPES, 3) is None  # not a tensor


def test_tensors_are_every_known_tensor_in_order():
    assert [t.index for t in tensors(DIMS[:4] + DIMS[6:], TYPES[:4] + TYPES[6:])] == [0, 1, 4]


@pytest.mark.parametrize("concrete, i, rank, expected", [
    (["[3]"], 0, 2, [3, 3]),           # one value for every dimension
    (["[5]"], 0, 1, [5]),
    (["[1, 2]"], 0, 2, [1, 2]),
    (["[1, 2, 3]"], 0, 2, None),       # neither one nor rank values
    (["7"], 0, 3, [7, 7, 7]),
    (["[a]"], 0, 1, None),             # not a number
    (["[null]"], 0, 1, None),
    (["[Infinity]"], 0, 1, None),
    (["[]"], 0, 1, None),
    ([""], 0, 1, None), ([], 0, 1, None), (["[1]"], None, 1, None),
    ([f"[{MAX_ELEMENTS}]"], 0, 1, [MAX_ELEMENTS]),
])
def test_ints_of_a_list_argument(concrete, i, rank, expected):
    assert ints(concrete, i, rank) == expected


@pytest.mark.parametrize("value", [MAX_ELEMENTS + 1, -MAX_ELEMENTS - 1])
def test_ints_past_any_real_size_raise(value):
    with pytest.raises(Impossible, match=rf"argument 1 is \[{value}\]"):
        ints(["", f"[{value}]"], 1, 1)


@pytest.mark.parametrize("concrete, i, values", [
    (["[1, 2]"], 0, [1, 2]),
    (["[2., 2.]"], 0, ["2.", "2."]),       # not JSON: split by hand
    (["[ 2., , 3.]"], 0, ["2.", "3."]),
    (["[X, 2.]"], 0, ["X", "2."]),        # a value kept as written: only the brackets go
    (["[]"], 0, []),
    (["3"], 0, ["3"]), ([3], 0, ["3"]),
    (["", None], 0, None), (["", None], 1, None),
    (["1"], 1, None), (["1"], None, None),
])
def test_numbers_of_a_concrete_input(concrete, i, values):
    assert numbers(concrete, i) == values


@pytest.mark.parametrize("shapes, out", [
    ([], []),
    ([[3, 1], [1, 4]], [3, 4]),
    ([[2, 1], [3]], [2, 3]),           # the shorter shape lines up with the last axes
    ([[5, 1, 4], [3, 1]], [5, 3, 4]),
    ([[1], [1]], [1]),
    ([[2], [1]], [2]),
    ([[2], [2]], [2]),
    ([[2], [3]], None),
])
def test_broadcast(shapes, out):
    assert broadcast(shapes) == out


def _t(dtype: str, size: int, shape=(4,)) -> Tensor:
    return Tensor(0, list(shape), dtype, size)


@pytest.mark.parametrize("inputs, result", [
    ([_t("fp16", 2)], ("fp16", 2)),
    ([_t("fp16", 2), _t("fp32", 4)], ("fp32", 4)),
    ([_t("bf16", 2), _t("fp16", 2)], ("fp32", 4)),                 # torch.result_type(bf16, fp16) is fp32
    ([_t("bf16", 2), _t("bf16", 2)], ("bf16", 2)),
    ([_t("bf16", 2), _t("fp16", 2), _t("fp64", 8)], ("fp64", 8)),
    ([_t("int64", 8), _t("fp16", 2)], ("fp16", 2)),                # float beats int, whatever the width
    ([_t("bool", 1), _t("uint8", 1)], ("uint8", 1)),
    ([_t("int8", 1), _t("int32", 4)], ("int32", 4)),
    ([_t("fp64", 8), _t("complex64", 8)], ("complex64", 8)),
    ([_t("fp8", 1), _t("complex64", 8)], ("complex64", 8)),
    ([_t("fp16", 2), _t("fp64", 8, ())], ("fp16", 2)),             # a 0-dim tensor of the same category: no say
    ([_t("int64", 8), _t("fp32", 4, ())], ("fp32", 4)),            # ... of a higher category: decides
    ([_t("bool", 1), _t("int32", 4, ())], ("int32", 4)),
    ([_t("fp32", 4), _t("complex128", 16, ())], ("complex128", 16)),
    ([_t("bool", 1, ()), _t("fp64", 8, ())], ("fp64", 8)),         # only 0-dim tensors
    ([_t("int64", 8, ()), _t("int8", 1, ())], ("int64", 8)),
    ([_t("bool", 1, ())], ("bool", 1)),
])
def test_result_size_follows_type_promotion(inputs, result):
    assert result_size(inputs) == result
