"""Achievable peaks measured on this machine: what a large GEMM of each data type and a large device copy
reach, for a peaks file (``perfkit.analysis.gpu_kernels.devices.write_peaks``) that ``perfkit gpu-kernels --peaks
FILE`` reads in place of the datasheet.

Datasheet peaks are boost-clock figures a card under its power limit rarely reaches (an H100's bf16
Tensor Core datasheet rate is 989 TFLOP/s; an 8192-cube GEMM reaches about 800): a kernel's "% of peak"
against what the card does says how much is left to win. :func:`measure_peaks` returns one entry::

    {"NVIDIA H100 80GB HBM3": {"matrix": {"bf16": 790.0, "fp16": 780.0, "tf32": 420.0},
                               "vector": {"fp32": 51.0}, "mem_bw_gbs": 3000.0, "source": "..."}}

``matrix``: Tensor Core GEMMs (bf16, fp16, and fp32 inputs with TF32 allowed); ``vector``: an fp32 GEMM with
TF32 off (the CUDA cores' FMA path); ``mem_bw_gbs``: the better of a device-to-device copy (bytes read plus
written per second, the datasheets' convention) and a fill (bytes written). Each figure is the best of
``repeats`` timed calls after warm-up over the shapes tried (a peak is what the card can do, so the best, not
the median: the 2026-11-28 H200 file took medians of one 8192-cube GEMM, 797 TFLOP/s, and a training step
then ran a 1024x32768x4096 GEMM at 837), timed with CUDA events. torch is imported inside the functions
that run it.
"""
from __future__ import annotations

import datetime as _dt
import time

from ..errors import ParameterError
from ..workloads.base import check_int

# (unit, dtype key, torch dtype name, allow TF32): the GEMMs measured, in order
GEMMS = (("matrix", "bf16", "bfloat16", False), ("matrix", "fp16", "float16", False),
         ("matrix", "tf32", "float32", True), ("vector", "fp32", "float32", False))
# (M, N, K) as multiples of the size asked for: a square GEMM and a long-K one (a weight gradient's shape)
SHAPES = ((1, 1, 1), (0.5, 0.5, 4))


def measure_peaks(device: str = "cuda", *, size: int | None = None, repeats: int = 10, copy_mib: int | None = None) -> dict:
    """Measure the achievable peaks of ``device`` (a CUDA device; "cpu" runs the same code on the host, which
    is what the tests use): ``{name: {"matrix": {...}, "vector": {...}, "mem_bw_gbs": ..., "source": ...}}``
    ``size``: the square GEMM's side (default 8192 on a GPU, 512 on
    the host); ``copy_mib``: the copy's size (default 2048 MiB on a GPU, 256 on the host).
    Raises ParameterError for a bad size, repeat count or a CUDA device that is not there."""
    import torch  # heavy, optional: only measuring needs it

    dev = torch.device(device)
    gpu = dev.type == "cuda"
    size = size if size is not None else 8192 if gpu else 512
    copy_mib = copy_mib if copy_mib is not None else 2048 if gpu else 256
    for name, value, low in (("size", size, 64), ("repeats", repeats, 3), ("copy_mib", copy_mib, 1)):
        check_int(name, value, low)
    if gpu and not torch.cuda.is_available():
        raise ParameterError(f"device={device!r}: torch sees no CUDA device here; measure peaks on the GPU machine")
    entry = {"matrix": {}, "vector": {}}
    for unit, key, dtype, tf32 in GEMMS:
        rates = []
        for fm, fn, fk in SHAPES:
            m, n, k = int(fm * size), int(fn * size), int(fk * size)
            rates.append(2.0 * m * n * k / _time_gemm(torch, dev, getattr(torch, dtype), tf32, (m, n, k), repeats))
        entry[unit][key] = float(f"{max(rates) / 1e12:.4g}")
    n = copy_mib * 2 ** 20
    copy, fill = _memory(torch, dev, n)
    entry["mem_bw_gbs"] = round(max(2.0 * n / _time(torch, dev, copy, repeats), n / _time(torch, dev, fill, repeats))
                                / 1e9, 1)
    name = torch.cuda.get_device_name(dev) if gpu else "cpu"
    entry["source"] = (f"measured by perfkit validate --write-peaks on {_dt.date.today().isoformat()} with torch "
                       f"{torch.__version__}: {size}-sided GEMMs and a {copy_mib} MiB device copy and fill, best of "
                       f"{repeats} timed calls after warm-up")
    return {name: entry}


def _time_gemm(torch, dev, dtype, tf32: bool, mnk: tuple, repeats: int) -> float:
    """Best seconds of one (M, N, K) GEMM of ``dtype`` (TF32 allowed or not, restored after)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    m, n, k = mnk
    try:
        a = torch.randn(m, k, device=dev).to(dtype)
        b = torch.randn(k, n, device=dev).to(dtype)
        return _time(torch, dev, lambda: torch.mm(a, b), repeats)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _memory(torch, dev, nbytes: int) -> tuple:
    """A copy of ``nbytes`` from one device buffer to another, and a fill of one."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), (lambda: dst.fill_(1))


def _time(torch, dev, fn, repeats: int) -> float:
    """Best seconds per call of ``fn`` after three warm-up calls: CUDA events on a GPU, the host clock on the
    CPU."""
    for _ in range(3):
        fn()
    if dev.type != "cuda":
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return min(samples)
    torch.cuda.synchronize(dev)
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(dev)
    return min(s.elapsed_time(e) for s, e in pairs) / 1e3
