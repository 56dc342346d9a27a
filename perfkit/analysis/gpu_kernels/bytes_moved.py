"""Bytes moved by memory-bound ops (elementwise, reduction, norm, Inductor's Triton kernels), from their shapes.

An op reads each tensor argument once and writes its result once:

- the result has the broadcast shape of the inputs and PyTorch's promoted type (``args.result_size``:
  ``mul(BFloat16[1,256,4096], Float[1,256,1])`` writes fp32), bool for a comparison; a reduction's result is not
  counted (it is small), but softmax writes one the size of its input;
- an ``out=`` tensor (``_softmax.out``, ``mul.out``, ``clamp_min.out``: the recorded arguments end with a tensor
  where the out overload's schema has its ``out``, ``OUT_ARITY``) is the result, written and not read;
- an in-place op (``add_``) writes its first input back; ``copy_`` reads its source and writes its destination;
  ``fill_`` and ``zero_`` only write;
- an input read twice under one name is read once: ``isnan(x)`` runs ``x != x`` (``ALIASED``);
- a vector norm (``linalg_vector_norm``) is a reduction; ``upsample_*`` writes the size its ``output_size`` or
  scale factors ask; ``_C::rotary_embedding`` reads only the rows of its cos/sin cache its positions select;
  an Inductor Triton kernel (``triton_poi_*``, ``triton_red_*``, ``triton_per_*``) reads or writes each tensor
  argument once (its recorded args are its buffers; an in/out buffer counted once: a floor).

Gathers (``index_select``, ``embedding``) stay unmodeled: they read only the rows they select. FLOPs are one per
element of the largest tensor.
"""
from __future__ import annotations

import math

from .args import Model, Tensor, broadcast, numbers, result_size, tensor, tensors

BYTE_FAMILIES = ("elementwise", "reduction", "norm")
TRITON_PREFIXES = ("triton_poi_", "triton_red_", "triton_per_")

# Gathers read only the rows they select, not the whole table their inputs name: bytes unknown.
GATHER_OPS = ("aten::index_select", "aten::embedding", "aten::gather", "aten::index", "aten::take",
              "aten::embedding_dense_backward", "aten::index_put_", "aten::scatter_add_", "aten::embedding_bag")
# Ops whose output is bool (one byte per element), whatever their inputs.
COMPARISON_OPS = ("aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge", "aten::logical_and",
                  "aten::logical_or", "aten::logical_xor", "aten::logical_not", "aten::isnan", "aten::isinf",
                  "aten::isfinite", "aten::isneginf", "aten::isposinf", "aten::signbit")
# Ops that write their first input and read nothing of it.
WRITE_ONLY_OPS = ("aten::fill_", "aten::zero_")
# Vector norms reduce to a scalar (or one value per row): a reduction, not a norm layer.
VECTOR_NORMS = ("aten::linalg_vector_norm", "aten::norm", "aten::linalg_norm", "aten::frobenius_norm",
                "aten::_foreach_norm")
# (parent, op): the op reads one tensor under two argument names. ``isnan(self)`` is ``self != self``
# (aten/src/ATen/native/TensorCompare.cpp).
ALIASED = {("aten::isnan", "aten::ne")}
ROTARY = "_C::rotary_embedding"  # vLLM: (positions, query, key, head_size, cos_sin_cache, is_neox)

# Arguments of each op's out overload, whose last is the ``out`` tensor (torch 2.x schemas,
# ``torch._C._jit_get_schemas_for_operator``; tests check each against torch): recorded with that many
# arguments and a tensor last, the op wrote into that tensor.
OUT_ARITY = {f"aten::{name}": n for names, n in (
    ("abs neg exp exp2 expm1 log log2 log1p sqrt rsqrt sigmoid tanh silu hardswish mish logical_not bitwise_not "
     "reciprocal sin cos erf sign floor ceil trunc isnan", 2),
    ("mul clamp_min clamp_max gelu leaky_relu silu_backward sigmoid_backward tanh_backward pow eq ne lt le gt ge "
     "logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor minimum maximum remainder fmod", 3),
    ("add sub rsub clamp hardtanh threshold threshold_backward gelu_backward where _softmax _log_softmax cumsum "
     "lerp masked_fill", 4),
    ("elu hardtanh_backward _softmax_backward_data _log_softmax_backward_data nan_to_num addcmul addcdiv "
     "mse_loss_backward", 5),
) for name in names.split()}
OUT_ARITY["aten::div"] = (3, 4)  # div.out (self, other, out) and div.out_mode (self, other, rounding_mode, out)


def memory_bound(family: str, name: str, dims: list, types: list, concrete: list = (), parent: str = ""):
    """The op's :class:`~.args.Model` (bytes read plus written, module doc), or a reason string."""
    if name == ROTARY:
        return rotary(dims, types)
    if name in GATHER_OPS or "embedding" in name:  # fbgemm's split_embedding_codegen_lookup_*: a table read by row
        return "gathers move only the rows they select: bytes not modeled"
    if name.startswith(("aten::upsample_", "aten::_upsample_")):
        return upsample(family, dims, types, concrete)
    found = tensors(dims, types)
    if not found:
        return "no tensor inputs with known types"
    reads, out = split_out(name, dims, found)
    if (parent, name) in ALIASED and len(reads) > 1 and all(t.shape == reads[0].shape for t in reads):
        reads = reads[:1]
    if not reads:
        return "no tensor inputs with known types"
    largest = max(reads, key=lambda t: t.nbytes)
    flops = float(max(t.elements for t in (*reads, *([out] if out else []))))
    write_only = name in WRITE_ONLY_OPS and reads[0].index == 0
    # copy_(self, src) reads its source (argument 1), not the destination it writes (a dtype cast's sizes differ)
    read = 0 if write_only else sum(t.nbytes for t in reads if t.index == 1 or name != "aten::copy_")
    return Model(family, flops, float(_moved(family, name, reads, out)), largest.dtype, float(read))


def _moved(family: str, name: str, reads: list[Tensor], out: Tensor | None) -> int:
    first = reads[0]
    if out is not None:
        return sum(t.nbytes for t in reads) + out.nbytes
    if name in WRITE_ONLY_OPS and first.index == 0:
        return first.nbytes
    if name == "aten::copy_" and first.index == 0:
        return sum(t.nbytes for t in reads[:2])  # the source read, the destination written
    if _in_place(name) and first.index == 0:
        return sum(t.nbytes for t in reads) + first.nbytes  # every input read, the first written back
    if (family == "reduction" and "softmax" not in name) or name in VECTOR_NORMS:
        return sum(t.nbytes for t in reads)
    return sum(t.nbytes for t in reads) + written(name, reads)


def written(name: str, reads: list[Tensor]) -> int:
    """Bytes of an out-of-place op's result: the inputs' broadcast shape (the largest input where they do not
    broadcast) in the promoted type, one byte per element for a comparison."""
    shape = broadcast([t.shape for t in reads])
    elements = math.prod(shape) if shape is not None else max(t.elements for t in reads)
    return elements * (1 if name in COMPARISON_OPS else result_size(reads)[1])


def split_out(name: str, dims: list, found: list[Tensor]) -> tuple[list[Tensor], Tensor | None]:
    """(the tensors read, the ``out=`` tensor or None): the last argument is the out tensor when the op was
    recorded with its out overload's arguments (``OUT_ARITY``) and that argument is a tensor."""
    arity = OUT_ARITY.get(name)
    counts = arity if isinstance(arity, tuple) else (arity,)
    last = found[-1]
    if len(dims) in counts and last.index == len(dims) - 1 and last.shape:
        return found[:-1], last
    return found, None


def rotary(dims: list, types: list):
    """``_C::rotary_embedding``: positions read; query and key read and written; of the cos/sin cache, one row per
    position (its other rows are never touched: 888 of an H200's 131,072 cached positions)."""
    positions, query, key, cache = (tensor(dims, types, i) for i in (0, 1, 2, 4))
    if positions is None or query is None or cache is None or len(cache.shape) != 2:
        return "rotary embedding without shapes for positions, query and cos/sin cache"
    rows = positions.elements
    rotated = [t for t in (query, key) if t is not None and t.shape]
    read = positions.nbytes + sum(t.nbytes for t in rotated) + rows * cache.shape[1] * cache.size
    moved = read + sum(t.nbytes for t in rotated)
    return Model("elementwise", float(sum(t.elements for t in rotated)), float(moved), query.dtype, float(read))


def upsample(family: str, dims: list, types: list, concrete: list):
    """``aten::upsample_*(self, output_size, ...scales)``: the input read, an output of ``output_size`` (or the
    input's spatial size times the scale factors, a list or one per dimension) written."""
    x = tensor(dims, types, 0)
    if x is None or len(x.shape) < 3:
        return "upsample input without shape"
    try:
        out = _upsampled(x.shape[2:], concrete)
    except (TypeError, ValueError, OverflowError):
        return "upsample with an unreadable output_size or scale factors"
    if out is None:
        return "upsample without output_size or scale factors (Concrete Inputs not recorded)"
    written_elements = math.prod(x.shape[:2]) * math.prod(out)
    return Model(family, float(written_elements), float(x.nbytes + written_elements * x.size), x.dtype, float(x.nbytes))


def _upsampled(spatial: list, concrete: list):
    """The output's spatial size: ``output_size`` (argument 1), else the scale factors after it."""
    size = numbers(concrete, 1)
    if size and len(size) == len(spatial):
        return [int(v) for v in size]
    given = [numbers(concrete, i) for i in range(2, len(concrete))]
    listed = next((v for v in given if v and len(v) == len(spatial)), None)
    singles = [v[0] for v in given if v and len(v) == 1 and str(v[0]) not in ("True", "False")]
    factors = listed or (singles if len(singles) == len(spatial) else None)
    return [math.floor(s * float(f)) for s, f in zip(spatial, factors)] if factors else None


def triton(dims: list, types: list, concrete: list):
    """An Inductor Triton kernel's op: each tensor argument (its buffers) read or written once, at most one element
    per point of the kernel's iteration space, the product of its trailing integer arguments (``xnumel``,
    ``ynumel``, ``r0_numel``: a kernel that reads a slice of a larger buffer touches only the slice)."""
    found = [t for t in tensors(dims, types) if t.shape]
    if not found:
        return "Triton kernel without tensor arguments (record_shapes=False)"
    space = _iteration_space(concrete, len(dims))
    touched = [min(t.elements, space) if space else t.elements for t in found]
    largest = max(range(len(found)), key=lambda i: touched[i] * found[i].size)
    moved = sum(n * t.size for n, t in zip(touched, found))
    return Model("triton", float(max(touched)), float(moved), found[largest].dtype)


def _iteration_space(concrete: list, count: int) -> int:
    """The product of the trailing whole-number arguments of a Triton kernel's op (0 when it has none)."""
    numels = []
    for i in range(min(count, len(concrete)) - 1, -1, -1):
        value = str(concrete[i])
        if not value.isdigit():
            break
        numels.append(int(value))
    return math.prod(numels) if numels else 0


def _in_place(name: str) -> bool:
    """``aten::add_``, ``aten::clamp_min_``: an op that writes its first argument (not ``__iand__``-style)."""
    return name.endswith("_") and not name.endswith("__")
