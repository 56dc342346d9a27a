"""What a GPU kernel's name says: its class, whether it runs on Tensor Cores (matrix units) and its data type.

Names are matched by the naming schemes of the libraries that write them:

- cuBLAS/cuBLASLt: ``sm80_xmma_gemm_<A><B>_<C><acc>_...`` (``bf16bf16_bf16f32``, ``f32f32_tf32f32``) and
  ``nvjet_*`` (Hopper/Blackwell cuBLASLt) run on Tensor Cores; the pre-Ampere and SIMT ``*_sgemm_*`` /
  ``*_hgemm_*`` without ``tensorop`` and ``gemv`` kernels do not; ``xmma`` kernels whose types are
  all ``f32`` (``f32f32_f32f32``, no ``tf32``) are FP32 on the CUDA cores.
- CUTLASS: ``tensorop``, ``wmma``, ``gmma``/``wgmma`` (Hopper warp-group MMA) mark matrix units.
- cuDNN: ``s1688``/``h884``/``i8816``-style instruction shapes and ``xmma`` mark Tensor Cores;
  ``scudnn`` (single precision) kernels run on the CUDA cores.
- AMD Tensile (hipBLASLt/rocBLAS) ``Cijk_*``: ``_MI<m>x<n>x<k>`` names a matrix (MFMA) instruction; the
  fourth name field starts with the data type (S single, H half, B bfloat16, D double, I8 int8).
- Attention kernels (``flash``, ``fmha``, ``attn_fwd``) are built on matrix instructions.

A kernel launched inside a recorded op is classed by that op first (``kernel_class(name, cat, op)``, as
TraceLens does through the op's External id): the op ``vllm::fused_add_rms_norm`` makes a norm kernel whose
name holds ``_typeConvert`` (read as "conv" by name), ``aten::miopen_convolution`` makes convolution kernels
named like Tensile GEMMs (``Cijk_*``), a quantize op makes no attention kernel. The name decides where the op
says nothing (an op perfkit does not know, such as ``vllm::moe_forward``, whose GEMMs, routing and quantize
kernels differ; a kernel launched outside every op: Triton from Python, a graph replay), and collectives,
copies and memsets are always what their name and category say.

A name is read by the function the kernel runs before its template arguments and parameters
(``kernel_function``): ``tensorrt_llm::kernels::quantize_with_block_size<..., flashinfer::...>(...)`` is a
quantize kernel, not attention; only a function that says nothing (``cutlass::device_kernel<...gemm...>``) is
classed by the rest of its name.

Tensor Cores are a property of matrix work: only gemm, conv and attention kernels can be on them, and only
instruction-level evidence (``xmma``, ``mma``, ``mfma``, a Tensile ``_MI`` shape) or a matrix library's name
says so; a ``bf16`` in the name of a routing or norm kernel says its data type, not its unit.

Anything a rule does not decide stays ``None`` ("unknown"): a guess would turn into a wrong finding.
"""
from __future__ import annotations

import re

from ..classify import COMM_KERNEL

CLASSES = ("gemm", "conv", "attention", "elementwise", "reduction", "norm", "comm", "memcpy", "memset",
           "triton", "other")
# Classes whose kernels never use matrix units (their tensor_core is False, not unknown).
VECTOR_CLASSES = ("elementwise", "reduction", "norm", "comm", "memcpy", "memset")
MATRIX_CLASSES = ("gemm", "conv", "attention")

_RULES = (  # (class, pattern), first match wins; matched case-insensitively (see ``name_class``)
    ("comm", COMM_KERNEL.pattern),  # one definition of a collective: perfkit.analysis.classify
    ("triton", r"^triton_(poi|red|per)_"),  # Inductor names its kernels for the ops they fused ("..._attention_...")
    ("elementwise", r"reshape_and_cache|quantiz"),  # KV-cache writes and (de)quantization, named "flash"/"attn"
    ("attention", r"flash|fmha|attn_fwd|attn_bwd|attention|_sdpa|mha_fwd|mha_bwd"),
    ("conv", r"conv|fprop|dgrad|wgrad|implicit_gemm|winograd|scudnn|xmma_(fprop|dgrad|wgrad)|fft\dd_|\d{3,5}cudnn"),
    ("norm", r"(layer|batch|group|rms|instance)_?norm|bn_(fw|bw)|welford|norm_(fwd|bwd)"),
    ("gemm", r"gemm|gemv|nvjet|cijk_|matmul|cublas|cutlass.*(tensorop|wmma|simt)|^bmm_|_mm_|splitkreduce|"
             r"triton_tem_fused_(add)?mm|triton_tem_fused_bmm"),
    ("triton", r"^triton_"),
    ("reduction", r"reduce|softmax|argmax|argmin|topk|cumsum|scan_|sum_kernel|mean_kernel|norm_kernel|cub::"),
    ("elementwise", r"elementwise|functor|copy|fill|catarray|index|gather|scatter|embedding|dropout|"
                    r"multi_tensor_apply|nchwtonhwc|nhwctonchw|transpose|pointwise|where|clamp|relu|gelu|silu|_quant"),
)
_COMPILED_RULES = tuple((cls, re.compile(p, re.IGNORECASE)) for cls, p in _RULES)

# Matrix-unit evidence (Tensor Cores / MFMA) and CUDA-core evidence, by library naming scheme.
_NOT_TC = re.compile(r"(^|_)[a-z]*sgemm|(^|_)[a-z]*dgemm|gemv|scudnn|f32f32_f32f32|gemmsn|"
                     r"^(volta|turing|maxwell|kepler)_hgemm(?!.*tensorop)", re.IGNORECASE)
_TC = re.compile(r"xmma|nvjet|tensorop|wmma|gmma|hmma|imma|mfma|_mi\d+x\d+x\d+|"
                 r"[shi]\d{3,5}gemm|[shi](884|1688|16816|8816)|tf32|bf16|bfloat16|e4m3|e5m2|e2m1|flash|fmha",
                 re.IGNORECASE)
_MMA = re.compile(r"xmma|wmma|gmma|hmma|imma|mfma|_mi\d+x\d+x\d+|tensorop", re.IGNORECASE)  # instructions, not types
_TENSILE_TYPES = {"S": "fp32", "D": "fp64", "H": "fp16", "B": "bf16", "I": "int8", "F": "fp8"}

_DTYPES = (  # (dtype, pattern) in order of precedence: a tf32 kernel also says f32
    ("fp4", r"e2m1|fp4|nvfp4|mxfp4"),
    ("fp8", r"e4m3|e5m2|fp8|float8"),
    ("tf32", r"tf32"),
    ("bf16", r"bf16|bfloat16"),
    ("fp16", r"(^|[^b])f16|fp16|half|_h\d{3,5}|hgemm|_h884|_h1688|_h16816"),
    ("fp64", r"dgemm|double|f64"),
    ("fp32", r"sgemm|scudnn|f32|<float|float>|float,|fp32|_float\b"),
    ("int8", r"i8816|int8|imma"),
)
_COMPILED_DTYPES = tuple((d, re.compile(p, re.IGNORECASE)) for d, p in _DTYPES)

# ``Input type`` strings PyTorch writes -> (dtype, bytes per element).
TORCH_TYPES = {
    "float": ("fp32", 4), "double": ("fp64", 8), "c10::Half": ("fp16", 2), "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1), "c10::Float8_e5m2": ("fp8", 1), "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1), "c10::Float8_e8m0fnu": ("fp8", 1), "c10::Float4_e2m1fn_x2": ("fp4", 1),
    "long int": ("int64", 8), "long": ("int64", 8), "int": ("int32", 4), "short int": ("int16", 2),
    "short": ("int16", 2), "signed char": ("int8", 1), "unsigned char": ("uint8", 1), "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8), "c10::complex<double>": ("complex128", 16),
}


# Op names -> class, first match wins, for the kernels an op launches (module doc). "conv" not "convert".
_OP_RULES = (
    ("triton", r"^triton_(poi|red|per)_"),  # Inductor's ops are named for what they fused ("..._attention_cat_...")
    ("attention", r"attention|sdpa|flash_attn|_fmha|paged_attention"),
    ("conv", r"conv(?!ert)|cudnn_convolution|miopen_convolution"),
    ("gemm", r"::(mm|addmm|_addmm_activation|bmm|baddbmm|matmul|linear|_scaled_mm|gemm\w*|\w*_gemm\w*|"
             r"_grouped_mm|_scaled_grouped_mm|cutlass_scaled_mm)$"),
    ("reduction", r"::(linalg_vector_norm|linalg_norm|norm|frobenius_norm|_foreach_norm)$"),  # to a scalar or a row
    ("norm", r"norm"),
    ("reduction", r"::(sum|mean|amax|amin|max|min|argmax|argmin|softmax|_softmax|log_softmax|_log_softmax|topk|"
                  r"cumsum|sort|var|std|prod)$"),
    ("elementwise", r"quant|rotary|rope|cast|::copy_|::fill_|::zero_|::_to_copy|activation|silu|gelu|relu|sigmoid|"
                    r"reshape_and_cache|cache_ops"),
)
_COMPILED_OP_RULES = tuple((cls, re.compile(p, re.IGNORECASE)) for cls, p in _OP_RULES)


def op_class(op: str | None):
    """The class of the kernels an op launches, from the op's name, or None when the name does not say."""
    if not op:
        return None
    for cls, pattern in _COMPILED_OP_RULES:
        if pattern.search(op):
            return cls
    return None


def kernel_class(name: str, category: str = "kernel", op: str | None = None) -> str:
    """One of ``CLASSES`` for a GPU event: copies and memsets by category, collectives by name, then by the op
    that launched it (``op``: its name, module doc), else by the kernel's name."""
    if category == "gpu_memcpy":
        return "memcpy"
    if category == "gpu_memset":
        return "memset"
    by_name = name_class(name)
    return by_name if by_name == "comm" else op_class(op) or by_name


def name_class(name: str) -> str:
    """One of ``CLASSES`` from a kernel's name alone: its function (``kernel_function``) first, then the whole
    name where the function says nothing; "other" when neither does. Collectives by the whole name."""
    if COMM_KERNEL.search(name):
        return "comm"
    for text in (kernel_function(name), name):
        found = next((cls for cls, pattern in _COMPILED_RULES if pattern.search(text)), None)
        if found:
            return found
    return "other"


_NESTED = re.compile(r"<[^<>]*>|\([^()]*\)")


def kernel_function(name: str) -> str:
    """The qualified function a kernel name runs, without its return type, template arguments and parameters:
    ``vllm::fused_add_rms_norm_kernel`` of ``std::enable_if<...>::type vllm::fused_add_rms_norm_kernel<...>(...)``."""
    text, previous = name, None
    while text != previous:  # innermost brackets first, until none is left
        previous, text = text, _NESTED.sub("", text)
    words = text.split()
    return words[-1] if words else name


def tensor_core(name: str, cls: str):
    """True when the kernel's name says it runs on matrix units, False when it says it does not
    (or its class never does), None when the name does not say. Only matrix classes can be on them:
    a data type in a name (``bf16``) decides nothing for the others (module doc)."""
    if cls in VECTOR_CLASSES:
        return False
    if cls not in MATRIX_CLASSES:
        return True if _MMA.search(name) else None
    if _NOT_TC.search(name):
        return False
    if name.startswith("Cijk_"):
        return bool(re.search(r"_MI\d+x\d+x\d+", name))
    if _TC.search(name):
        return True
    return None


def name_dtype(name: str):
    """The data type the kernel's name states (``fp32``, ``tf32``, ``bf16``, ``fp16``, ``fp8``, ...), or None."""
    if name.startswith("Cijk_"):
        fields = name.split("_")
        return _TENSILE_TYPES.get(fields[3][:1]) if len(fields) > 3 and fields[3] else None
    for dtype, pattern in _COMPILED_DTYPES:
        if pattern.search(name):
            return dtype
    return None


def torch_dtype(type_name: str):
    """(dtype, bytes per element) of a PyTorch ``Input type`` string, or None for non-tensors/unknown."""
    return TORCH_TYPES.get(type_name)
