"""What the GPU does with its time: kernels by class, Tensor Core use and dtype; FLOPs and bytes per op
from recorded shapes against the device's peaks; findings with fixes (see :mod:`.breakdown`)."""
from __future__ import annotations

from .breakdown import gpu_bound_findings, kernels
from .result import KernelsResult

__all__ = ["kernels", "gpu_bound_findings", "KernelsResult"]
