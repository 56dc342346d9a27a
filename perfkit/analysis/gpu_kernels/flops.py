"""FLOPs and bytes moved of one op, from its recorded input shapes (``record_shapes=True``).

Each model reads the op's ``Input Dims``, ``Input type`` and (convolution strides and padding, the
causal flag of attention) ``Concrete Inputs``, as PyTorch's profiler writes them. The formulas are the
usual ones, and the same as TraceLens's perf models (``TraceLens/PerfModel/perf_model.py``):

- GEMM ``C[M,N] = A[M,K] B[K,N]`` (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``linear``, ``matmul``,
  ``_scaled_mm``): ``2*M*N*K`` FLOPs per batch (a bias add is not counted); bytes = A + B + C (+ bias).
- Convolution: ``2 * N * prod(output spatial) * prod(weight dims)`` forward (the weight already holds
  ``C_in/groups``); the backward computes the input and the weight gradients, each one forward's worth,
  as ``output_mask`` asks. Output size from the strides, padding and dilation in ``Concrete Inputs``.
- Attention ``softmax(Q K^T) V``: ``4 * B * H * S_q * S_k * D`` forward (two GEMMs), half of it when
  causal; the backward 2.5x the forward (five GEMMs instead of two; FlashAttention-2 paper, section 3.2).
- Elementwise, reduction and norm ops: bytes only = the tensor inputs plus one output the size of the
  largest input (none for a reduction; one byte per element for a comparison, whose output is bool);
  FLOPs = one per element of the largest input. An in-place op (``add_``) writes its first input
  instead of a new output; ``copy_`` reads its source and writes its destination, ``fill_`` and
  ``zero_`` only write (counted as reads too, an H200 ``copy_`` from bf16 to fp32 read 123% of the
  memory roof, ``fill_`` 120% on a GH200). Gathers (``index_select``, ``embedding``) are left
  unmodeled: they read only the rows they select.

Functions return ``Model(family, flops, bytes, dtype)`` or a short reason string when the op cannot
be modeled (no shapes, a missing argument, a shape no GPU could hold: a negative dimension or more than
``MAX_ELEMENTS`` elements, a convolution stride below 1): unmodeled ops are never guessed.
"""
from __future__ import annotations

import json
import math
from typing import NamedTuple

from .kernel_classes import torch_dtype

GEMM_OPS = {  # op -> (index of A, index of B, index of a bias input or None, layout)
    "aten::mm": (0, 1, None, "mk,kn"), "aten::addmm": (1, 2, 0, "mk,kn"), "aten::_addmm_activation": (1, 2, 0, "mk,kn"),
    "aten::bmm": (0, 1, None, "mk,kn"), "aten::baddbmm": (1, 2, 0, "mk,kn"), "aten::matmul": (0, 1, None, "mk,kn"),
    "aten::linear": (0, 1, 2, "mk,nk"), "aten::_scaled_mm": (0, 1, None, "mk,kn"),
}
# op -> (stride, padding, dilation, transposed) indices in its arguments (None: not an argument).
CONV_OPS = {
    "aten::convolution": (3, 4, 5, 6), "aten::_convolution": (3, 4, 5, 6),
    "aten::conv1d": (3, 4, 5, None), "aten::conv2d": (3, 4, 5, None), "aten::conv3d": (3, 4, 5, None),
    "aten::cudnn_convolution": (3, 2, 4, None), "aten::miopen_convolution": (4, 3, 5, None),
    "aten::cudnn_convolution_transpose": (4, 3, 5, "yes"), "aten::conv_transpose2d": (3, 4, 7, "yes"),
}
CONV_BACKWARD = "aten::convolution_backward"
# op -> (index of q, index of is_causal, layout, backward)
ATTENTION_OPS = {
    "aten::scaled_dot_product_attention": (0, 5, "bhsd", False),
    "aten::_scaled_dot_product_flash_attention": (0, 4, "bhsd", False),
    "aten::_scaled_dot_product_efficient_attention": (0, 6, "bhsd", False),
    "aten::_scaled_dot_product_cudnn_attention": (0, 6, "bhsd", False),
    "aten::_flash_attention_forward": (0, 8, "bshd", False),
    "aten::_efficient_attention_forward": (0, 9, "bshd", False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 11, "bhsd", True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 11, "bhsd", True),
    "aten::_flash_attention_backward": (1, 11, "bshd", True),
    "aten::_efficient_attention_backward": (1, 11, "bshd", True),
}
ATTENTION_BACKWARD_FACTOR = 2.5
MATRIX_FAMILIES = ("gemm", "conv", "attention")
# Elements of one tensor beyond which a recorded shape cannot be real: 2^40 (1.1e12) elements are 2 TB in
# bf16, ten times the memory of the largest GPU perfkit knows (a B200's 180 GB).
MAX_ELEMENTS = 1 << 40
IMPOSSIBLE_SHAPE = "impossible shape"


class _Impossible(ValueError):
    """A recorded shape or convolution argument no GPU could run (see ``MAX_ELEMENTS``)."""
BYTE_FAMILIES = ("elementwise", "reduction", "norm")


class Model(NamedTuple):
    family: str
    flops: float
    bytes: float
    dtype: object


def op_family(name: str):
    """"gemm", "conv" or "attention" for an op perfkit models by name, else None."""
    if name in GEMM_OPS:
        return "gemm"
    if name in CONV_OPS or name == CONV_BACKWARD:
        return "conv"
    if name in ATTENTION_OPS:
        return "attention"
    return None


def parse_args(dims: str, types: str, concrete: str) -> tuple[list, list, list]:
    """The three raw JSON arguments as lists ([] where absent or unreadable)."""
    return _loads(dims), _loads(types), _loads(concrete)


def _loads(text: str) -> list:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def model(name: str, family: str, dims: list, types: list, concrete: list):
    """The op's :class:`Model`, or a reason string when it cannot be modeled."""
    if not dims:
        return "no Input Dims (record_shapes=False)"
    try:
        return _model(name, family, dims, types, concrete)
    except _Impossible as exc:
        return f"{IMPOSSIBLE_SHAPE} ({exc}): not modeled"


def _model(name: str, family: str, dims: list, types: list, concrete: list):
    if family in MATRIX_FAMILIES and op_family(name) != family:
        return f"no FLOP model for {name}"
    if family == "gemm":
        return gemm(name, dims, types)
    if family == "conv":
        return conv_backward(dims, types, concrete) if name == CONV_BACKWARD else conv(name, dims, types, concrete)
    if family == "attention":
        return attention(name, dims, types, concrete)
    if family in BYTE_FAMILIES:
        return memory_bound(family, name, dims, types)
    return f"{family} ops are not modeled"


def _tensor(dims: list, types: list, i):
    """(shape, dtype, bytes per element) of argument ``i`` when it is a tensor of a known type."""
    if i is None or i >= len(dims) or not isinstance(dims[i], list) or not dims[i] or i >= len(types):
        return None
    shape, known = dims[i], torch_dtype(types[i])
    if known is None or not all(isinstance(d, int) for d in shape):
        return None
    if any(d < 0 for d in shape) or math.prod(shape) > MAX_ELEMENTS:
        raise _Impossible(f"argument {i} is {shape}")
    return shape, known[0], known[1]


def gemm(name: str, dims: list, types: list):
    a_i, b_i, bias_i, _ = GEMM_OPS[name]
    a, b = _tensor(dims, types, a_i), _tensor(dims, types, b_i)
    if a is None or b is None:
        return "GEMM operands without shapes"
    (sa, dtype, size), (sb, _, size_b) = a, b
    batch, m, n, k = gemm_mnk(name, dims)
    bias = _tensor(dims, types, bias_i)
    moved = (math.prod(sa) * size + math.prod(sb) * size_b + batch * m * n * size
             + (math.prod(bias[0]) * bias[2] if bias else 0))
    return Model("gemm", 2.0 * batch * m * n * k, float(moved), dtype)


def gemm_mnk(name: str, dims: list) -> tuple:
    """(batch, M, N, K) of a GEMM op whose operands have shapes. ``linear``'s leading dims fold into
    M; ``matmul``/``bmm`` batch dims broadcast (the larger batch counts)."""
    a_i, b_i, _, layout = GEMM_OPS[name]
    sa, sb = dims[a_i], dims[b_i]
    k = sa[-1]
    if layout == "mk,nk":
        return 1, math.prod(sa[:-1]), (sb[0] if len(sb) > 1 else 1), k
    m, n = (sa[-2] if len(sa) > 1 else 1), (sb[-1] if len(sb) > 1 else 1)
    return max(math.prod(sa[:-2]), math.prod(sb[:-2])), m, n, k


def _ints(concrete: list, i, rank: int):
    """A list argument of ``Concrete Inputs`` ("[1, 1]") as ``rank`` ints, or None."""
    if i is None or i >= len(concrete) or not concrete[i]:
        return None
    values = _loads(concrete[i]) if str(concrete[i]).startswith("[") else [concrete[i]]
    try:
        values = [int(v) for v in values]
    except (TypeError, ValueError, OverflowError):
        return None
    if any(abs(v) > MAX_ELEMENTS for v in values):
        raise _Impossible(f"argument {i} is {values}")
    return values * rank if len(values) == 1 else values if len(values) == rank else None


def conv(name: str, dims: list, types: list, concrete: list):
    x, w = _tensor(dims, types, 0), _tensor(dims, types, 1)
    if x is None or w is None or len(x[0]) < 3:
        return "convolution inputs without shapes"
    (sx, dtype, size), (sw, _, _) = x, w
    s_i, p_i, d_i, t_i = CONV_OPS[name]
    rank = len(sx) - 2
    transposed = t_i == "yes" or (isinstance(t_i, int) and t_i < len(concrete) and concrete[t_i] == "True")
    stride, pad, dil = _ints(concrete, s_i, rank), _ints(concrete, p_i, rank), _ints(concrete, d_i, rank)
    if transposed:
        spatial, out_channels = sx[2:], None
    elif stride is None or pad is None or dil is None:
        return "convolution without stride/padding (Concrete Inputs not recorded)"
    elif min(stride) < 1 or min(dil) < 1 or min(pad) < 0:
        raise _Impossible(f"stride {stride}, padding {pad}, dilation {dil}")
    else:
        spatial = [(h + 2 * p - d * (k - 1) - 1) // s + 1 for h, p, d, k, s in zip(sx[2:], pad, dil, sw[2:], stride)]
        if min(spatial, default=1) < 1:
            raise _Impossible(f"the output of {sx} by {sw} would be {spatial}")
        out_channels = sw[0]
    flops = 2.0 * sx[0] * math.prod(spatial) * math.prod(sw)
    out = sx[0] * (out_channels or sw[1]) * math.prod(spatial if out_channels else sx[2:])
    moved = (math.prod(sx) + math.prod(sw) + out) * size
    return Model("conv", flops, float(moved), dtype)


def conv_backward(dims: list, types: list, concrete: list):
    g, x, w = (_tensor(dims, types, i) for i in (0, 1, 2))
    if g is None or x is None or w is None or len(g[0]) < 3:
        return "convolution backward inputs without shapes"
    (sg, dtype, size), (sx, _, _), (sw, _, _) = g, x, w
    transposed = len(concrete) > 7 and concrete[7] == "True"
    one = 2.0 * sg[0] * math.prod(sx[2:] if transposed else sg[2:]) * math.prod(sw)
    mask = _loads(concrete[10]) if len(concrete) > 10 and str(concrete[10]).startswith("[") else []
    grads = sum(bool(v) for v in mask[:2]) if mask else 2
    moved = (math.prod(sg) + math.prod(sx) + math.prod(sw)) * size * (1 + grads / 2)
    return Model("conv", one * grads, float(moved), dtype)


def attention(name: str, dims: list, types: list, concrete: list):
    q_i, causal_i, layout, backward = ATTENTION_OPS[name]
    q, k, v = (_tensor(dims, types, q_i + j) for j in range(3))
    if q is None or k is None or v is None or len(q[0]) != 4 or len(k[0]) != 4 or len(v[0]) != 4:
        return "attention inputs without 4-D shapes"
    (sq, dtype, size), (sk, _, _), (sv, _, _) = q, k, v
    if layout == "bshd":
        sq, sk, sv = ([s[0], s[2], s[1], s[3]] for s in (sq, sk, sv))
    b, h, s_q, d = sq
    s_k, d_v = sk[2], sv[3]
    flops = 2.0 * b * h * s_q * s_k * (d + d_v)
    if causal_i < len(concrete) and concrete[causal_i] == "True":
        flops /= 2
    moved = (math.prod(sq) + math.prod(sk) + math.prod(sv) + b * h * s_q * d_v) * size
    if backward:
        flops, moved = flops * ATTENTION_BACKWARD_FACTOR, moved * 2
    return Model("attention", flops, float(moved), dtype)


# Gathers read only the rows they select, not the whole table their inputs name: bytes unknown.
GATHER_OPS = ("aten::index_select", "aten::embedding", "aten::gather", "aten::index", "aten::take",
              "aten::embedding_dense_backward", "aten::index_put_", "aten::scatter_add_", "aten::embedding_bag")


# Ops whose output is bool (one byte per element), whatever their inputs.
COMPARISON_OPS = ("aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge", "aten::logical_and",
                  "aten::logical_or", "aten::logical_xor", "aten::logical_not", "aten::isnan", "aten::isinf",
                  "aten::isfinite", "aten::isneginf", "aten::isposinf", "aten::signbit")
# Ops that write their first input and read nothing of it.
WRITE_ONLY_OPS = ("aten::fill_", "aten::zero_")


def memory_bound(family: str, name: str, dims: list, types: list):
    if name in GATHER_OPS:
        return "gathers move only the rows they select: bytes not modeled"
    tensors = [t for t in (_tensor(dims, types, i) for i in range(len(dims))) if t is not None]
    if not tensors:
        return "no tensor inputs with known types"
    sizes = [math.prod(shape) * size for shape, _, size in tensors]
    largest = max(range(len(tensors)), key=lambda i: sizes[i])
    elements = math.prod(tensors[largest][0])
    first_is_tensor = _tensor(dims, types, 0) is not None
    if name in WRITE_ONLY_OPS and first_is_tensor:
        moved = sizes[0]
    elif name == "aten::copy_" and first_is_tensor:
        moved = sum(sizes[:2])  # the source read, the destination written
    elif _in_place(name) and first_is_tensor:
        moved = sum(sizes) + sizes[0]  # every input read, the first written back
    elif family == "reduction" and "softmax" not in name:
        moved = sum(sizes)
    else:
        moved = sum(sizes) + (elements if name in COMPARISON_OPS else sizes[largest])
    return Model(family, float(elements), float(moved), tensors[largest][1])


def _in_place(name: str) -> bool:
    """``aten::add_``, ``aten::clamp_min_``: an op that writes its first argument (not ``__iand__``-style)."""
    return name.endswith("_") and not name.endswith("__")
