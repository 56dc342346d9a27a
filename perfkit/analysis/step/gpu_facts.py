"""What the fixes (``fixes``) need to know of a trace's GPU events and its GPU: copy direction and bytes, the
class, Tensor Core use and data type of each kernel (``gpu_kernels.attribute``), the bytes of the op that launched
it (``gpu_kernels.opmodel``, from recorded shapes), the device's peaks and the pinned host-to-device rate."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import PerfkitError
from ...trace.loader.shapes import op_shapes
from ..classify import copies_frame
from ..gpu_kernels.attribute import kernel_links
from ..gpu_kernels.devices import device_for
from ..gpu_kernels.opmodel import op_instances
from .fixes import ASYNC_COPY_US, MEMORY_BOUND_CLASSES, MIN_RATE_BYTES, PINNED_HTOD_GBS

# Matrix work autocast runs in bf16: GEMMs, convolutions and attention (SDPA picks a bf16 flash kernel).
_MATRIX = ("gemm", "conv", "attention")


@dataclass(frozen=True, eq=False)
class GpuFacts:
    """Per GPU event label (``trace.events``): ``facts`` (``htod``, ``bytes``, ``class``, ``fp32_matrix``,
    ``op_bytes``, ``memory_bound``); the device (``devices.Device`` or None) and its name; the pinned
    host-to-device rate (GB/s, None when unknown) and where it comes from; the asynchronous copy launch's time."""

    facts: pd.DataFrame
    device: object
    device_name: str
    pinned_gbs: float | None
    pinned_source: str
    async_copy_us: float

    def _column(self, g, name: str, fill):
        return self.facts[name].reindex(g.gpu["label"]).fillna(fill).to_numpy()

    def htod(self, g) -> np.ndarray:
        return self._column(g, "htod", False).astype(bool)

    def gpu_bytes(self, g) -> np.ndarray:
        return self._column(g, "bytes", 0.0).astype(np.float64)

    def fp32_matrix(self, g) -> np.ndarray:
        return self._column(g, "fp32_matrix", False).astype(bool)

    def op_bytes(self, g) -> np.ndarray:
        return self._column(g, "op_bytes", 0.0).astype(np.float64)

    def memory_bound(self, g) -> np.ndarray:
        return self._column(g, "memory_bound", False).astype(bool)


def gpu_facts(trace) -> GpuFacts:
    """The facts of ``trace``'s GPU events, once per trace (shared)."""
    return trace.derived("gpu_facts", _gpu_facts)


def _gpu_facts(trace) -> GpuFacts:
    try:
        device, name = device_for(trace.devices)
    except PerfkitError:
        device, name = None, ""
    links = kernel_links(trace) if trace.has_gpu_events else pd.DataFrame(columns=["gpu_index"])
    copies = copies_frame(trace.events)
    facts = pd.DataFrame(index=pd.Index(links["gpu_index"].to_numpy(dtype=np.int64), name="label"))
    facts["htod"] = (copies["direction"] == "HtoD").reindex(facts.index, fill_value=False).to_numpy()
    facts["bytes"] = links["bytes"].to_numpy(dtype=np.float64) if len(links) else np.zeros(0)
    if len(links):
        facts = facts.join(_kernel_facts(trace, links))
    else:
        facts = facts.assign(fp32_matrix=False, op_bytes=0.0, memory_bound=False)
    rate, source = _pinned_rate(trace, copies, device)
    return GpuFacts(facts=facts, device=device, device_name=name, pinned_gbs=rate, pinned_source=source,
                    async_copy_us=_async_copy_us(trace, copies))


def _kernel_facts(trace, links: pd.DataFrame) -> pd.DataFrame:
    """``fp32_matrix``: a GEMM, convolution or attention kernel in fp32 (not tf32: a name saying f32 on a matrix
    kernel is SIMT fp32, as CUTLASS's ``fmha_cutlassF_f32`` attention is, whatever else the name matches); ``op_bytes``: the bytes of the op
    that launched it (0 when unmodeled); ``memory_bound``: a kernel of ``MEMORY_BOUND_CLASSES``."""
    try:
        instances = op_instances(trace, links, op_shapes(trace))
    except PerfkitError:
        instances = pd.DataFrame(columns=["label", "bytes", "dtype", "modeled"])
    by_op = instances.set_index("label") if len(instances) else None
    owner = links["owner"].to_numpy(dtype=np.int64)
    op_dtype = by_op["dtype"].reindex(owner).to_numpy() if by_op is not None else np.full(len(links), None)
    op_bytes = by_op["bytes"].where(by_op["modeled"].astype(bool)).reindex(owner).to_numpy(dtype=np.float64) \
        if by_op is not None else np.full(len(links), np.nan)
    dtype = links["name_dtype"].astype(object).where(links["name_dtype"].notna(), pd.Series(op_dtype, index=links.index))
    matrix = links["class"].isin(_MATRIX).to_numpy()
    fp32 = (dtype == "fp32").to_numpy()
    # One kernel per op shares the op's bytes: an op's kernels are counted once, by its largest.
    share = pd.Series(links["dur_us"].to_numpy()).groupby(owner).transform("max").to_numpy() == links["dur_us"].to_numpy()
    return pd.DataFrame({"fp32_matrix": matrix & fp32,
                         "op_bytes": np.where((owner >= 0) & share, np.nan_to_num(op_bytes), 0.0),
                         "memory_bound": links["class"].isin(MEMORY_BOUND_CLASSES).to_numpy()},
                        index=pd.Index(links["gpu_index"].to_numpy(dtype=np.int64), name="label"))


def _pinned_rate(trace, copies: pd.DataFrame, device) -> tuple:
    ev = trace.events
    pinned = copies[(copies["direction"] == "HtoD") & (copies["memory"] == "pinned")]
    if len(pinned):
        rows = ev.loc[pinned.index]
        big = rows[(rows["bytes"] >= MIN_RATE_BYTES) & (rows["dur_us"] > 0)]
        if len(big):
            return float(np.median(big["bytes"] / big["dur_us"] / 1e3)), "the trace's own pinned copies"
    if device is not None and device.key in PINNED_HTOD_GBS:
        return PINNED_HTOD_GBS[device.key], f"{device.name}'s host link"
    slowest = min(PINNED_HTOD_GBS.values())
    return slowest, "the slowest host link perfkit knows (PCIe 3 x16): the GPU is not in its table"


def _async_copy_us(trace, copies: pd.DataFrame) -> float:
    """The median launch time of the trace's copies from pinned memory (asynchronous), else ``ASYNC_COPY_US``."""
    links = trace.launches(("gpu_memcpy",))
    pinned = copies.index[copies["memory"] == "pinned"]
    calls = links[links["gpu_index"].isin(pinned)]
    return float(calls["launch_dur_us"].median()) if len(calls) else ASYNC_COPY_US
