"""An op's recorded arguments as the FLOP and byte models read them: tensors (shape, dtype, bytes per element),
list arguments of ``Concrete Inputs``, and the result type of tensors combined (PyTorch's type promotion).

``Input Dims``, ``Input type`` and ``Concrete Inputs`` are parsed once per distinct op shape (``parse_args``); a
shape no GPU could hold raises :class:`Impossible` (the model then says so instead of guessing).
"""
from __future__ import annotations

import json
import math
from typing import NamedTuple

from .kernel_classes import torch_dtype

# Elements of one tensor beyond which a recorded shape cannot be real: 2^40 (1.1e12) elements are 2 TB in
# bf16, ten times the memory of the largest GPU perfkit knows (a B200's 180 GB).
MAX_ELEMENTS = 1 << 40
IMPOSSIBLE_SHAPE = "impossible shape"


class Impossible(ValueError):
    """A recorded shape or convolution argument no GPU could run (see ``MAX_ELEMENTS``)."""


class Model(NamedTuple):
    family: str
    flops: float
    bytes: float  # read plus written
    dtype: object
    read_bytes: float = float("nan")  # read alone (NaN: not counted apart), for the L2 rule of ``opmodel.capped``


class Tensor(NamedTuple):
    index: int
    shape: list
    dtype: str
    size: int  # bytes per element

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * self.size


def parse_args(dims: str, types: str, concrete: str) -> tuple[list, list, list]:
    """The three raw JSON arguments as lists ([] where absent or unreadable)."""
    return loads(dims), loads(types), loads(concrete)


def loads(text: str) -> list:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def compact(text: str) -> str:
    """Recorded JSON (``Input Dims``, pretty-printed over many lines by some exporters) on one line:
    ``[[1, 768, 8], [], []]``; the text itself when it is not JSON."""
    try:
        return json.dumps(json.loads(text), separators=(", ", ": ")) if text else ""
    except ValueError:
        return " ".join(str(text).split())


def tensor(dims: list, types: list, i) -> Tensor | None:
    """Argument ``i`` when it is a tensor of a known type (a 0-dim tensor has shape []), else None."""
    if i is None or i >= len(dims) or not isinstance(dims[i], list) or i >= len(types):
        return None
    shape, known = dims[i], torch_dtype(types[i])
    if known is None or not all(isinstance(d, int) for d in shape):
        return None
    if any(d < 0 for d in shape) or math.prod(shape) > MAX_ELEMENTS:
        raise Impossible(f"argument {i} is {shape}")
    return Tensor(i, shape, known[0], known[1])


def shaped(dims: list, types: list, i) -> Tensor | None:
    """Argument ``i`` when it is a tensor with at least one dimension (what the GEMM and attention models take)."""
    t = tensor(dims, types, i)
    return t if t is not None and t.shape else None


def tensors(dims: list, types: list) -> list[Tensor]:
    """Every tensor argument of a known type, in order."""
    return [t for t in (tensor(dims, types, i) for i in range(len(dims))) if t is not None]


def ints(concrete: list, i, rank: int):
    """A list argument of ``Concrete Inputs`` ("[1, 1]", or one value for every dimension) as ``rank`` ints, or
    None."""
    values = numbers(concrete, i)
    if values is None:
        return None
    try:
        values = [int(v) for v in values]
    except (TypeError, ValueError, OverflowError):
        return None
    if any(abs(v) > MAX_ELEMENTS for v in values):
        raise Impossible(f"argument {i} is {values}")
    return values * rank if len(values) == 1 else values if len(values) == rank else None


def numbers(concrete: list, i) -> list | None:
    """The values of ``Concrete Inputs`` argument ``i`` as a list ("[2., 2.]" -> [2.0, 2.0], "3" -> ["3"]), or
    None when it was not recorded."""
    if i is None or i >= len(concrete) or concrete[i] in ("", None):
        return None
    text = str(concrete[i])
    if not text.startswith("["):
        return [text]
    return loads(text) or [v for v in (p.strip() for p in text.strip("[]").split(",")) if v]  # "[2., 2.]": not JSON


def broadcast(shapes: list) -> list | None:
    """The broadcast shape of ``shapes`` (PyTorch's rules), or None when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-rank, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return out


_CATEGORY = {"bool": 0, "uint8": 1, "int8": 1, "int16": 1, "int32": 1, "int64": 1, "complex64": 3, "complex128": 3}


def result_size(inputs: list[Tensor]) -> tuple[str, int]:
    """(dtype, bytes per element) of an op's result by PyTorch's type promotion: the highest category (bool < int <
    float < complex) among tensors with dimensions decides, a 0-dim tensor only when its category is higher;
    within a category the widest type, and bf16 with fp16 gives fp32 (``torch.result_type``)."""
    dimensioned = [t for t in inputs if t.shape]
    top = max((_CATEGORY.get(t.dtype, 2) for t in dimensioned), default=-1)
    zero = [t for t in inputs if not t.shape and _CATEGORY.get(t.dtype, 2) > top]
    pool = zero or dimensioned or inputs
    top = max(_CATEGORY.get(t.dtype, 2) for t in pool)
    pool = [t for t in pool if _CATEGORY.get(t.dtype, 2) == top]
    widest = max(pool, key=lambda t: t.size)
    if widest.size == 2 and {t.dtype for t in pool} >= {"bf16", "fp16"}:
        return "fp32", 4
    return widest.dtype, widest.size
