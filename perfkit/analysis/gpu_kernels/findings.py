"""Findings of ``kernels``: what the GPU's time says to change, each with its evidence and fix.

- FP32 GEMMs/convolutions on the CUDA cores of a GPU that has TF32/BF16/FP16 Tensor Cores;
- GEMMs far below peak on shapes that are not multiples of 8 (Tensor Core tiles want them);
- matrix kernels already on Tensor Cores in 16-bit or lower precision, on aligned shapes, yet far below the
  device's peak: the achieved rate against the peak, and no advice to change precision or compile;
- memory-bound elementwise/reduction/norm kernels taking a large share of the GPU (fuse them);
- attention computed unfused (matmul, softmax, matmul) instead of a fused kernel.

:func:`gpu_bound_findings` ranks them (most severe first, then by GPU time) for the GPU-bound verdict.
"""
from __future__ import annotations


import pandas as pd

from ...results import Finding
from .args import loads
from .bytes_moved import BYTE_FAMILIES
from .opmodel import peak_of, unit_of

# Severity by the share of GPU busy time a finding covers (perfkit rule; the same cut-offs as gaps).
HIGH_SHARE, MEDIUM_SHARE, MIN_SHARE = 0.20, 0.05, 0.01
# A GEMM "far below peak": under this share of the peak of its dtype and unit (perfkit rule).
LOW_GEMM_EFFICIENCY = 0.30
# Tensor Core tiles: dimensions that are multiples of 8 (16-bit) or 16 (8-bit) elements use them fully
# (NVIDIA Deep Learning Performance guide, "Matrix Multiplication Background", Tensor Core requirements).
ALIGN = {"fp16": 8, "bf16": 8, "tf32": 4, "fp32": 4, "fp8": 16, "int8": 16}
# Memory-bound kernels worth fusing: elementwise/reduction/norm time at least this share of GPU time.
FUSE_SHARE = 0.25
SOFTMAX_OPS = ("aten::_softmax", "aten::softmax", "aten::_safe_softmax")
MATH_ATTENTION = "aten::_scaled_dot_product_attention_math"
MIN_ATTENTION_SEQ = 32
# Precisions a GPU's Tensor Cores run that autocast would not lower further.
_LOW_PRECISION = ("bf16", "fp16", "fp8", "int8")


def _severity(share: float) -> str:
    return "high" if share >= HIGH_SHARE else "medium" if share >= MEDIUM_SHARE else "low"


def build_findings(kernels: pd.DataFrame, instances: pd.DataFrame, device, busy_us: float) -> list[Finding]:
    """All findings, ranked (see :func:`rank`)."""
    if busy_us <= 0:
        return []
    out = [*_fp32_cuda_cores(kernels, device, busy_us), *_odd_gemms(instances, device, busy_us),
           *_low_rate_tensor_cores(instances, device, busy_us), *_memory_bound(kernels, device, busy_us),
           *_unfused_attention(instances, busy_us)]
    return rank(out)


def rank(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then the larger GPU share first."""
    return sorted(findings, key=lambda f: (f.rank, -float(f.evidence.get("gpu_share", 0.0))))


def _fp32_cuda_cores(kernels: pd.DataFrame, device, busy_us: float) -> list[Finding]:
    sel = kernels[kernels["class"].isin(("gemm", "conv")) & (kernels["tensor_core"] == False)  # noqa: E712
                  & (kernels["dtype"] == "fp32")]
    us = float(sel["total_us"].sum())
    share = us / busy_us
    if share < MIN_SHARE or (device is not None and not ({"tf32", "bf16", "fp16"} & set(device.matrix))):
        return []
    evidence = {"fp32_cuda_core_us": us, "gpu_share": share, "kernels": int(sel["calls"].sum()),
                "top_kernel": str(sel.iloc[0]["name"])[:80]}
    if device is not None:
        evidence["peak_fp32_vector_tflops"] = device.vector.get("fp32")
        evidence["peak_tensor_core_tflops"] = device.matrix.get("tf32") or device.matrix.get("bf16") or \
            device.matrix.get("fp16")
    where = f"on this {device.name}" if device is not None else "(if this GPU has Tensor Cores)"
    return [Finding(_severity(share), f"{share:.0%} of GPU time is FP32 GEMM/convolution on the CUDA cores, "
                    f"not the Tensor Cores {where}", evidence, _fp32_fix(device),
                    "FP32 SIMT kernel names (sgemm, scudnn, f32f32_f32f32 without tf32) over 1% of GPU busy time")]


def _fp32_fix(device) -> str:
    tf32 = device is None or "tf32" in device.matrix
    bf16 = device is None or "bf16" in device.matrix
    steps = []
    if tf32:
        steps.append('torch.set_float32_matmul_precision("high") (and torch.backends.cudnn.allow_tf32 = True) '
                     "runs FP32 matmuls and convolutions as TF32 on the Tensor Cores")
    steps.append("torch.autocast(device_type='cuda', dtype=torch.bfloat16) runs them in bf16" if bf16 else
                 "torch.autocast(device_type='cuda', dtype=torch.float16) with torch.amp.GradScaler runs them in "
                 "fp16 (this GPU has no bf16)")
    return "; or ".join(steps) + ". Check the loss curve stays the same."


def _odd_gemms(instances: pd.DataFrame, device, busy_us: float) -> list[Finding]:
    g = instances[(instances["family"] == "gemm") & instances["modeled"].astype(bool) & instances["n"].notna()]
    if g.empty:
        return []
    align = g["dtype"].map(ALIGN).fillna(8)
    odd = (g["n"] % align != 0) | (g["k"] % align != 0)
    tflops = g["flops"] / g["kernel_us"].where(g["kernel_us"] > 0) / 1e6
    peak = _gemm_peaks(g, device)
    slow = tflops < LOW_GEMM_EFFICIENCY * peak if peak is not None else pd.Series(True, index=g.index)
    bad = g[odd & slow]
    us = float(bad["kernel_us"].sum())
    share = us / busy_us
    if share < MIN_SHARE:
        return []
    worst = bad.groupby(["m", "n", "k", "dtype"], dropna=False)["kernel_us"].sum().sort_values(ascending=False)
    (m, n, k, dtype) = worst.index[0]
    evidence = {"odd_gemm_us": us, "gpu_share": share, "calls": len(bad), "top_shape_mnk": f"{int(m)}x{int(n)}x{int(k)}",
                "top_shape_dtype": str(dtype), "achieved_tflops": float(bad["flops"].sum() / us / 1e6) if us else 0.0}
    return [Finding(_severity(share), f"{share:.0%} of GPU time is GEMMs on shapes that are not multiples of "
                    f"{int(ALIGN.get(dtype, 8))} (e.g. MxNxK {evidence['top_shape_mnk']}), "
                    f"{'below ' + format(LOW_GEMM_EFFICIENCY, '.0%') + ' of peak' if peak is not None else 'peak unknown'}",
                    evidence, "Pad the dimensions to multiples of 8 (16-bit) or 16 (fp8): hidden and vocabulary sizes, "
                    "heads x head_dim, batch x sequence; pad the vocabulary (e.g. to a multiple of 64) and the "
                    "batch. Small GEMMs: batch them (bmm) or fuse (torch.compile).",
                    "N or K not a multiple of the Tensor Core tile (8 elements for 16-bit, 16 for 8-bit, 4 for TF32) and under "
                    f"{LOW_GEMM_EFFICIENCY:.0%} of the device's peak (NVIDIA Deep Learning Performance guide)")]


def _low_rate_tensor_cores(instances: pd.DataFrame, device, busy_us: float) -> list[Finding]:
    """GEMMs on Tensor Cores in 16-bit or lower precision, on shapes the tiles take whole, under
    ``LOW_GEMM_EFFICIENCY`` of the device's peak for their dtype: precision and fusion are done; what is left is
    the GEMMs' own rate (their size and count)."""
    g = instances[(instances["family"] == "gemm") & instances["modeled"].astype(bool) & instances["n"].notna()
                  & (instances["tc_us"] >= 0.5 * instances["kernel_us"]) & instances["dtype"].isin(_LOW_PRECISION)]
    if g.empty or device is None:
        return []
    align = g["dtype"].map(ALIGN).fillna(8)
    aligned = (g["m"] % align == 0) & (g["n"] % align == 0) & (g["k"] % align == 0)  # M too: no tile left part-full
    peak = _gemm_peaks(g, device)
    tflops = g["flops"] / g["kernel_us"].where(g["kernel_us"] > 0) / 1e6
    slow = g[aligned & (tflops < LOW_GEMM_EFFICIENCY * peak)]
    us = float(slow["kernel_us"].sum())
    share = us / busy_us
    if share < MIN_SHARE:
        return []
    dtype = str(slow.groupby("dtype")["kernel_us"].sum().idxmax())
    mine = slow[slow["dtype"] == dtype]
    achieved = float(mine["flops"].sum() / mine["kernel_us"].sum() / 1e6)
    top_peak = float(peak[mine.index].max())
    worst = mine.groupby(["m", "n", "k"])["kernel_us"].sum().idxmax()
    evidence = {"low_rate_gemm_us": us, "gpu_share": share, "calls": len(slow), "dtype": dtype,
                "achieved_tflops": achieved, "peak_tflops": top_peak, "share_of_peak": achieved / top_peak,
                "top_shape_mnk": "x".join(str(int(v)) for v in worst)}
    return [Finding(_severity(share), f"{share:.0%} of GPU time is {dtype} GEMMs on Tensor Cores at {achieved:,.0f} "
                    f"of the {device.name}'s {top_peak:,.0f} TFLOP/s ({achieved / top_peak:.0%} of peak; e.g. MxNxK "
                    f"{evidence['top_shape_mnk']})", evidence,
                    f"The GEMMs already run in {dtype} on Tensor Cores on aligned shapes, so mixed precision and "
                    "fusing elementwise ops will not speed them up: raise their rate. Larger GEMMs (a larger batch, "
                    "fused projections such as one QKV matmul), fewer small ones (batch them with bmm or grouped "
                    "GEMMs), or FP8 (Transformer Engine) where the device has it and accuracy allows; check the clocks "
                    "and power "
                    "(perfkit validate --write-peaks measures what this GPU reaches).",
                    f"Tensor Core GEMMs on aligned shapes under {LOW_GEMM_EFFICIENCY:.0%} of the device's peak for "
                    "their dtype, at least 1% of GPU time (perfkit rule)")]


def _gemm_peaks(g: pd.DataFrame, device):
    if device is None:
        return None
    peaks = [peak_of(device, unit_of("gemm", tc, notc, us, d), d, tf) for tc, notc, us, d, tf in
             zip(g["tc_us"], g["notc_us"], g["kernel_us"], g["dtype"], g["tf32"])]
    return pd.Series([p if p else float("nan") for p in peaks], index=g.index, dtype=float) * 1.0


def _memory_bound(kernels: pd.DataFrame, device, busy_us: float) -> list[Finding]:
    sel = kernels[kernels["class"].isin(BYTE_FAMILIES)]
    us = float(sel["total_us"].sum())
    share = us / busy_us
    if share < FUSE_SHARE:
        return []
    evidence = {"memory_bound_us": us, "gpu_share": share, "kernels": int(sel["calls"].sum()),
                "top_kernel": str(sel.iloc[0]["name"])[:80]}
    if device is not None:
        evidence["mem_bw_gbs"] = device.mem_bw_gbs
    return [Finding(_severity(share) if share < 0.5 else "high",
                    f"{share:.0%} of GPU time is {int(sel['calls'].sum()):,} elementwise/reduction/norm kernels, "
                    "each reading and writing memory once", evidence,
                    "Fuse chains of elementwise ops so the data crosses memory once: torch.compile(model) (Inductor "
                    "generates fused Triton kernels); fused optimizers (torch.optim.AdamW(fused=True)); "
                    "fused norm/activation kernels.",
                    f"elementwise/reduction/norm kernels at least {FUSE_SHARE:.0%} of GPU busy time "
                    "(perfkit rule: such kernels are memory-bound, so fusing them removes whole passes over memory)")]


def _unfused_attention(instances: pd.DataFrame, busy_us: float) -> list[Finding]:
    if instances.empty:
        return []
    math_ops = instances[instances["op"] == MATH_ATTENTION]
    soft = instances[instances["op"].isin(SOFTMAX_OPS)]
    soft = soft[[_attention_scores(d) for d in soft["input_dims"]]] if len(soft) else soft
    us = float(math_ops["kernel_us"].sum() + soft["kernel_us"].sum())
    share = us / busy_us
    if share < MIN_SHARE:
        return []
    evidence = {"unfused_attention_us": us, "gpu_share": share, "softmax_calls": len(soft),
                "math_sdpa_calls": len(math_ops)}
    if len(soft):
        evidence["scores_shape"] = _scores_shape(soft.iloc[0]["input_dims"])
    return [Finding(_severity(share), f"attention runs unfused (matmul, softmax over the [S, S] scores, matmul): "
                    f"the softmax alone takes {share:.0%} of GPU time", evidence,
                    "Use torch.nn.functional.scaled_dot_product_attention (FlashAttention / memory-efficient kernels: "
                    "no [S, S] matrix in memory); in Hugging Face models attn_implementation='sdpa' or "
                    "'flash_attention_2'. If SDPA falls back to the math kernel, use fp16/bf16 inputs and a head dim "
                    "the fused kernels support.",
                    f"softmax over a square last pair of dims >= {MIN_ATTENTION_SEQ} (attention scores), or "
                    "the SDPA math fallback, over 1% of GPU busy time")]


def _attention_scores(dims_text: str) -> bool:
    shape = _first_shape(dims_text)
    return len(shape) >= 3 and shape[-1] == shape[-2] and shape[-1] >= MIN_ATTENTION_SEQ


def _first_shape(dims_text: str) -> list:
    dims = loads(dims_text)
    return dims[0] if dims and isinstance(dims[0], list) else []


def _scores_shape(dims_text: str) -> str:
    """The softmax's input, the [S, S] scores, as a value: "8x12x313x313" (not the recorded JSON, which some
    exporters spread over many lines)."""
    return "x".join(str(d) for d in _first_shape(dims_text))
