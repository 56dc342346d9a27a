"""Shared classifications of trace events: copy direction and memory kind, blocking runtime
calls, launch calls, and GPU busy time. Every analysis uses these, so a rule changes in one place.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..trace import intervals
from ..trace.names import starts_with

# "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", ROCm "Memcpy HtoD (Host -> Device)".
_COPY = re.compile(r"Memcpy\s+(HtoD|DtoH|DtoD|HtoH|PtoP|DtoA|AtoD|AtoH|HtoA)\b(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.I)
DIRECTIONS = ("HtoD", "DtoH", "DtoD")

# Host runtime calls that block the calling thread until the GPU catches up.
SYNC_RUNTIME = {
    "cudaStreamSynchronize": "stream_sync", "hipStreamSynchronize": "stream_sync",
    "cudaDeviceSynchronize": "device_sync", "hipDeviceSynchronize": "device_sync",
    "cudaEventSynchronize": "event_sync", "hipEventSynchronize": "event_sync",
    "cudaMemcpy": "memcpy_sync", "hipMemcpy": "memcpy_sync", "hipMemcpyWithStream": "memcpy_sync",
    "cuStreamSynchronize": "stream_sync", "cuCtxSynchronize": "device_sync", "cuEventSynchronize": "event_sync",
}
# cudaStreamWaitEvent is absent on purpose: it orders two streams on the device, the host never waits.

# Collective communication kernels, the one definition every analysis uses: NCCL, and RCCL on ROCm
# ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclKernel_AllGather_RING_LL_Sum_int8_t", "rcclGenericKernel"),
# and the collectives other libraries write by name (PyTorch's SymmetricMemory multimem all-reduce, vLLM's
# custom cross_device_reduce, all-to-all and send/recv kernels): on a B200 serving trace the multimem
# all-reduce was communication in `kernels` and compute in `diagnose` when each had its own rule.
COMM_KERNEL = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv|"
                         r"cross_device_reduce", re.IGNORECASE)

LAUNCH_PREFIXES = ("cudaLaunchKernel", "cuLaunchKernel", "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel",
                   "cudaGraphLaunch", "hipGraphLaunch", "cudaLaunchCooperativeKernel", "cuLaunchKernelEx",
                   "hipExtModuleLaunchKernel", "cudaLaunchKernelExC")
GRAPH_LAUNCH_PREFIXES = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")


def copy_direction(name: str) -> str:
    m = _COPY.search(name)
    return m.group(1)[0].upper() + "to" + m.group(1)[-1].upper() if m else "other"


def copy_memory(name: str) -> str:
    """Host memory kind of a copy: "pageable", "pinned", or "unknown" (ROCm writes only "Host")."""
    m = _COPY.search(name)
    if not m or not m.group(2):
        return "unknown"
    ends = {m.group(2).lower(), m.group(3).lower()}
    if "pageable" in ends:
        return "pageable"
    if "pinned" in ends:
        return "pinned"
    return "device" if ends == {"device"} else "unknown"


def copies_frame(events: pd.DataFrame) -> pd.DataFrame:
    """GPU-side copies with ``direction`` and ``memory`` columns added (names mapped once per distinct name)."""
    copies = events[(events["ph"] == "X") & (events["cat"] == "gpu_memcpy")]
    names = copies["name"].astype(str)
    unique = names.unique()
    direction = dict(zip(unique, map(copy_direction, unique)))
    memory = dict(zip(unique, map(copy_memory, unique)))
    return copies.assign(direction=names.map(direction).to_numpy(), memory=names.map(memory).to_numpy())


def is_comm(names: pd.Series) -> np.ndarray:
    """Which kernel names are collective communication kernels (``COMM_KERNEL``; one regex test per distinct name)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        hits = np.array([bool(COMM_KERNEL.search(str(c))) for c in names.cat.categories], dtype=bool)
        codes = names.cat.codes.to_numpy()
        return np.where(codes >= 0, hits[np.clip(codes, 0, None)] if len(hits) else False, False)
    return names.astype(str).str.contains(COMM_KERNEL).to_numpy(dtype=bool)


def is_launch(name: str) -> bool:
    return name.startswith(LAUNCH_PREFIXES)


def launch_mask(names: pd.Series) -> np.ndarray:
    """``is_launch`` of every name of a column (once per category of a categorical)."""
    return starts_with(names, LAUNCH_PREFIXES)


def graph_launch_mask(names: pd.Series) -> np.ndarray:
    """Which launch calls replay a whole CUDA/HIP graph (``cudaGraphLaunch``: torch.compile's
    mode="reduce-overhead", ``torch.cuda.graphs``) rather than one kernel."""
    return starts_with(names, GRAPH_LAUNCH_PREFIXES)


def busy_us(gpu: pd.DataFrame) -> float:
    """Union of GPU activity intervals per (file, device), summed over devices."""
    total = 0.0
    for _, grp in gpu.groupby(["file_id", "device"], observed=True, sort=False):
        start = grp["ts_us"].to_numpy()
        total += intervals.length(start, start + grp["dur_us"].to_numpy())
    return total
