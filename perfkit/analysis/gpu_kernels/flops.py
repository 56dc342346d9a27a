"""FLOPs and bytes moved of one matrix op (GEMM, convolution, attention), from its recorded input shapes
(``record_shapes=True``); memory-bound ops (elementwise, reduction, norm, Triton) are :mod:`.bytes_moved`'s.

Each model reads the op's ``Input Dims``, ``Input type`` and (convolution strides and padding, the
causal flag of attention) ``Concrete Inputs``, as PyTorch's profiler writes them. The formulas are the
usual ones, and the same as TraceLens's perf models (``TraceLens/PerfModel/perf_model.py``):

- GEMM ``C[M,N] = A[M,K] B[K,N]`` (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``linear``, ``matmul``, the fp8
  ``_scaled_mm`` and vLLM's ``_C::cutlass_scaled_mm``): ``2*M*N*K`` FLOPs per batch (a bias add is not counted);
  bytes = A + B + C (+ bias), C in the type of a recorded output tensor, else of A.
- Grouped GEMM (``_grouped_mm``, fp8 ``_scaled_grouped_mm``: G groups): 2-D A ``[M_total, K]`` by 3-D B
  ``[G, K, N]``: ``2*M_total*K*N`` (each row of A goes to one group); 3-D A ``[G, M, K]`` by 2-D B ``[K, N_total]``:
  ``2*M*K*N_total``; 2-D by 2-D (groups along K): ``2*M*N*K_total``; 3-D by 3-D: ``2*G*M*N*K``.
- Convolution: ``2 * N * prod(output spatial) * prod(weight dims)`` forward (the weight already holds
  ``C_in/groups``); the backward computes the input and the weight gradients, each one forward's worth,
  as ``output_mask`` asks. Output size from the strides, padding and dilation in ``Concrete Inputs``.
- Attention ``softmax(Q K^T) V`` (SDPA's flash, efficient and cuDNN kernels, forward and backward): ``4 * B *
  H * S_q * S_k * D`` forward (two GEMMs), half of it when causal (a ``True`` ``is_causal``, or the efficient
  kernels' ``custom_mask_type`` 1 or 2, causal from the top left or the bottom right); the backward takes the
  forward's q, k and v and does 2.5x its FLOPs (five GEMMs instead of two; FlashAttention-2 paper, section 3.2).

Functions return ``Model(family, flops, bytes, dtype)`` or a short reason string when the op cannot
be modeled (no shapes, a missing argument, a shape no GPU could hold: a negative dimension or more than
``MAX_ELEMENTS`` elements, a convolution stride below 1): unmodeled ops are never guessed.
"""
from __future__ import annotations

import math

from .args import IMPOSSIBLE_SHAPE, Impossible, Model, ints, loads, shaped
from .bytes_moved import BYTE_FAMILIES, TRITON_PREFIXES, memory_bound, triton

GEMM_OPS = {  # op -> (index of A, index of B, index of a bias input or None, layout, index of the output or None)
    "aten::mm": (0, 1, None, "mk,kn", None), "aten::addmm": (1, 2, 0, "mk,kn", None),
    "aten::_addmm_activation": (1, 2, 0, "mk,kn", None), "aten::bmm": (0, 1, None, "mk,kn", None),
    "aten::baddbmm": (1, 2, 0, "mk,kn", None), "aten::matmul": (0, 1, None, "mk,kn", None),
    "aten::linear": (0, 1, 2, "mk,nk", None), "aten::_scaled_mm": (0, 1, 4, "mk,kn", None),
    "_C::cutlass_scaled_mm": (1, 2, 5, "mk,kn", 0),  # vLLM: (out, a, b, a_scales, b_scales, bias)
}
GROUPED_GEMM_OPS = {"aten::_grouped_mm": 3, "aten::_scaled_grouped_mm": 5}  # op -> index of the bias
# op -> (stride, padding, dilation, transposed) indices in its arguments (None: not an argument).
CONV_OPS = {
    "aten::convolution": (3, 4, 5, 6), "aten::_convolution": (3, 4, 5, 6),
    "aten::conv1d": (3, 4, 5, None), "aten::conv2d": (3, 4, 5, None), "aten::conv3d": (3, 4, 5, None),
    "aten::cudnn_convolution": (3, 2, 4, None), "aten::miopen_convolution": (4, 3, 5, None),
    "aten::cudnn_convolution_transpose": (4, 3, 5, "yes"), "aten::conv_transpose2d": (3, 4, 7, "yes"),
}
CONV_BACKWARD = "aten::convolution_backward"
# op -> (index of q, index of the causal flag, layout, backward); the flag is ``is_causal`` (bool) but for the
# efficient kernels' ``custom_mask_type`` (int: 0 none, 1 causal from the top left, 2 from the bottom right).
ATTENTION_OPS = {
    "aten::scaled_dot_product_attention": (0, 5, "bhsd", False),
    "aten::_scaled_dot_product_flash_attention": (0, 4, "bhsd", False),
    "aten::_scaled_dot_product_efficient_attention": (0, 6, "bhsd", False),
    "aten::_scaled_dot_product_cudnn_attention": (0, 6, "bhsd", False),
    "aten::_cudnn_attention_forward": (0, 10, "bhsd", False),
    "aten::_flash_attention_forward": (0, 8, "bshd", False),
    "aten::_efficient_attention_forward": (0, 9, "bshd", False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 11, "bhsd", True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 11, "bhsd", True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 14, "bhsd", True),
    "aten::_cudnn_attention_backward": (1, 14, "bhsd", True),
    "aten::_flash_attention_backward": (1, 11, "bshd", True),
    "aten::_efficient_attention_backward": (1, 14, "bshd", True),
}
MASK_TYPE_OPS = ("aten::_efficient_attention_forward", "aten::_efficient_attention_backward")
ATTENTION_BACKWARD_FACTOR = 2.5
MATRIX_FAMILIES = ("gemm", "conv", "attention")


def op_family(name: str):
    """"gemm", "conv" or "attention" for an op perfkit models by name, else None."""
    if name in GEMM_OPS or name in GROUPED_GEMM_OPS:
        return "gemm"
    if name in CONV_OPS or name == CONV_BACKWARD:
        return "conv"
    if name in ATTENTION_OPS:
        return "attention"
    return None


def model(name: str, family: str, dims: list, types: list, concrete: list, parent: str = ""):
    """The op's :class:`Model`, or a reason string when it cannot be modeled. ``parent``: the name of the op
    around it (``isnan`` around ``ne``)."""
    if not dims:
        return "no Input Dims (record_shapes=False)"
    try:
        return _model(name, family, dims, types, concrete, parent)
    except Impossible as exc:
        return f"{IMPOSSIBLE_SHAPE} ({exc}): not modeled"


def _model(name: str, family: str, dims: list, types: list, concrete: list, parent: str):
    if name.startswith(TRITON_PREFIXES):
        return triton(dims, types, concrete)
    if family in MATRIX_FAMILIES and op_family(name) != family:
        return f"no FLOP model for {name}"
    if family == "gemm":
        return grouped_gemm(name, dims, types) if name in GROUPED_GEMM_OPS else gemm(name, dims, types)
    if family == "conv":
        return conv_backward(dims, types, concrete) if name == CONV_BACKWARD else conv(name, dims, types, concrete)
    if family == "attention":
        return attention(name, dims, types, concrete)
    if family in BYTE_FAMILIES:
        return memory_bound(family, name, dims, types, concrete, parent)
    return f"{family} ops are not modeled"


def gemm(name: str, dims: list, types: list):
    a_i, b_i, bias_i, _, out_i = GEMM_OPS[name]
    a, b = shaped(dims, types, a_i), shaped(dims, types, b_i)
    if a is None or b is None:
        return "GEMM operands without shapes"
    batch, m, n, k = gemm_mnk(name, dims)
    bias, out = shaped(dims, types, bias_i), shaped(dims, types, out_i)
    read = a.nbytes + b.nbytes + (bias.nbytes if bias else 0)
    moved = read + batch * m * n * (out.size if out else a.size)
    return Model("gemm", 2.0 * batch * m * n * k, float(moved), a.dtype, float(read))


def gemm_mnk(name: str, dims: list) -> tuple:
    """(batch, M, N, K) of a GEMM op whose operands have shapes. ``linear``'s leading dims fold into
    M; ``matmul``/``bmm`` batch dims broadcast (the larger batch counts)."""
    a_i, b_i, _, layout, _ = GEMM_OPS[name]
    sa, sb = dims[a_i], dims[b_i]
    k = sa[-1]
    if layout == "mk,nk":
        return 1, math.prod(sa[:-1]), (sb[0] if len(sb) > 1 else 1), k
    m, n = (sa[-2] if len(sa) > 1 else 1), (sb[-1] if len(sb) > 1 else 1)
    return max(math.prod(sa[:-2]), math.prod(sb[:-2])), m, n, k


def grouped_gemm(name: str, dims: list, types: list):
    """``_grouped_mm`` / ``_scaled_grouped_mm``: G GEMMs in one call (module doc); C in A's type."""
    a, b = shaped(dims, types, 0), shaped(dims, types, 1)
    if a is None or b is None or {len(a.shape), len(b.shape)} - {2, 3}:
        return "grouped GEMM operands without 2-D or 3-D shapes"
    (sa, sb), bias = (a.shape, b.shape), shaped(dims, types, GROUPED_GEMM_OPS[name])
    if len(sa) == 2 and len(sb) == 3:
        flops, out = 2.0 * sa[0] * sa[1] * sb[2], sa[0] * sb[2]
    elif len(sa) == 3 and len(sb) == 2:
        flops, out = 2.0 * sa[1] * sa[2] * sb[1], sa[1] * sb[1]
    elif len(sa) == 2:
        flops, out = 2.0 * sa[0] * sa[1] * sb[1], sa[0] * sb[1]  # per group [M, N]: G x [M, N] out, unknown G
    else:
        flops, out = 2.0 * sa[0] * sa[1] * sa[2] * sb[2], sa[0] * sa[1] * sb[2]
    moved = a.nbytes + b.nbytes + out * a.size + (bias.nbytes if bias else 0)
    return Model("gemm", flops, float(moved), a.dtype)


def conv(name: str, dims: list, types: list, concrete: list):
    x, w = shaped(dims, types, 0), shaped(dims, types, 1)
    if x is None or w is None or len(x.shape) < 3:
        return "convolution inputs without shapes"
    sx, sw, dtype, size = x.shape, w.shape, x.dtype, x.size
    s_i, p_i, d_i, t_i = CONV_OPS[name]
    rank = len(sx) - 2
    transposed = t_i == "yes" or (isinstance(t_i, int) and t_i < len(concrete) and concrete[t_i] == "True")
    stride, pad, dil = ints(concrete, s_i, rank), ints(concrete, p_i, rank), ints(concrete, d_i, rank)
    if transposed:
        spatial, out_channels = sx[2:], None
    elif stride is None or pad is None or dil is None:
        return "convolution without stride/padding (Concrete Inputs not recorded)"
    elif min(stride) < 1 or min(dil) < 1 or min(pad) < 0:
        raise Impossible(f"stride {stride}, padding {pad}, dilation {dil}")
    else:
        spatial = [(h + 2 * p - d * (k - 1) - 1) // s + 1 for h, p, d, k, s in zip(sx[2:], pad, dil, sw[2:], stride)]
        if min(spatial, default=1) < 1:
            raise Impossible(f"the output of {sx} by {sw} would be {spatial}")
        out_channels = sw[0]
    flops = 2.0 * sx[0] * math.prod(spatial) * math.prod(sw)
    out = sx[0] * (out_channels or sw[1]) * math.prod(spatial if out_channels else sx[2:])
    moved = (math.prod(sx) + math.prod(sw) + out) * size
    return Model("conv", flops, float(moved), dtype)


def conv_backward(dims: list, types: list, concrete: list):
    g, x, w = (shaped(dims, types, i) for i in (0, 1, 2))
    if g is None or x is None or w is None or len(g.shape) < 3:
        return "convolution backward inputs without shapes"
    sg, sx, sw = g.shape, x.shape, w.shape
    transposed = len(concrete) > 7 and concrete[7] == "True"
    one = 2.0 * sg[0] * math.prod(sx[2:] if transposed else sg[2:]) * math.prod(sw)
    mask = loads(concrete[10]) if len(concrete) > 10 and str(concrete[10]).startswith("[") else []
    grads = sum(bool(v) for v in mask[:2]) if mask else 2
    moved = (g.elements + x.elements + w.elements) * g.size * (1 + grads / 2)
    return Model("conv", one * grads, float(moved), g.dtype)


def attention(name: str, dims: list, types: list, concrete: list):
    q_i, causal_i, layout, backward = ATTENTION_OPS[name]
    q, k, v = (shaped(dims, types, q_i + j) for j in range(3))
    if q is None or k is None or v is None or len(q.shape) != 4 or len(k.shape) != 4 or len(v.shape) != 4:
        return "attention inputs without 4-D shapes"
    sq, sk, sv = q.shape, k.shape, v.shape
    if layout == "bshd":
        sq, sk, sv = ([s[0], s[2], s[1], s[3]] for s in (sq, sk, sv))
    b, h, s_q, d = sq
    s_k, d_v = sk[2], sv[3]
    flops = 2.0 * b * h * s_q * s_k * (d + d_v)
    if is_causal(name, concrete, causal_i):
        flops /= 2
    moved = (math.prod(sq) + math.prod(sk) + math.prod(sv) + b * h * s_q * d_v) * q.size
    if backward:
        flops, moved = flops * ATTENTION_BACKWARD_FACTOR, moved * 2
    return Model("attention", flops, float(moved), q.dtype)


def is_causal(name: str, concrete: list, i: int) -> bool:
    """The op's causal flag: ``is_causal`` "True", or ``custom_mask_type`` "1"/"2" (``MASK_TYPE_OPS``)."""
    value = concrete[i] if i < len(concrete) else ""
    return value in ("1", "2") if name in MASK_TYPE_OPS else value == "True"
