"""Peak dense throughput and memory bandwidth of the GPUs perfkit knows, each from the vendor's datasheet.

``matrix``: Tensor Core / Matrix Core (MFMA) peak, TFLOP/s per data type, **dense** (the datasheets'
"with sparsity" figures are twice these); ``vector``: CUDA-core / vector ALU peak; ``mem_bw_gbs``:
memory bandwidth in GB/s (1e9 bytes/s). Boost clocks, as the datasheets state them; a real GPU under
a power or thermal limit runs below them, so 100% is never reached.

An AMD MI250/MI250X package holds two GCDs that PyTorch sees as two devices, and a trace records one:
its figures here are per GCD (half the package's datasheet figure), which is what one device can reach.

Devices are found by the ``name`` Kineto writes in ``deviceProperties`` (``NVIDIA H100 80GB HBM3``,
``AMD Instinct MI300X VF``), or by ``--device`` / ``device=`` (a key of :data:`DEVICES` or any name
the patterns match).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...errors import ParameterError


@dataclass(frozen=True)
class Device:
    key: str
    name: str
    matrix: dict = field(default_factory=dict)
    vector: dict = field(default_factory=dict)
    mem_bw_gbs: float = 0.0
    source: str = ""

    def peak_tflops(self, dtype: str, unit: str):
        """Peak TFLOP/s of ``dtype`` on ``unit`` ("matrix"/"vector"), or None when the datasheet gives none."""
        return (self.matrix if unit == "matrix" else self.vector).get(dtype)

    @property
    def ridge(self) -> dict:
        """FLOP per byte where each peak meets the memory roof, per (unit, dtype)."""
        out = {}
        for unit, peaks in (("matrix", self.matrix), ("vector", self.vector)):
            for dtype, tflops in peaks.items():
                out[f"{unit}_{dtype}"] = tflops * 1e12 / (self.mem_bw_gbs * 1e9) if self.mem_bw_gbs else None
        return out

    def to_json(self) -> dict:
        return {"name": self.name, "key": self.key, "peaks": {"matrix": dict(self.matrix), "vector": dict(self.vector)},
                "mem_bw_gbs": self.mem_bw_gbs, "source": self.source}


def _d(key, name, matrix, vector, bw, source) -> Device:
    return Device(key, name, dict(matrix), dict(vector), float(bw), source)


_AMPERE = "NVIDIA Ampere GA102 GPU Architecture whitepaper (2020), Table 3"
DEVICES = {d.key: d for d in (
    _d("V100-SXM2", "Tesla V100 SXM2", {"fp16": 125.0}, {"fp32": 15.7, "fp64": 7.8}, 900,
       "NVIDIA Tesla V100 datasheet (2020), SXM2 column"),
    _d("V100-PCIe", "Tesla V100 PCIe", {"fp16": 112.0}, {"fp32": 14.0, "fp64": 7.0}, 900,
       "NVIDIA Tesla V100 datasheet (2020), PCIe column"),
    _d("T4", "Tesla T4", {"fp16": 65.0, "int8": 130.0}, {"fp32": 8.1}, 320, "NVIDIA T4 datasheet (2019)"),
    _d("A10", "NVIDIA A10", {"tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0}, {"fp32": 31.2}, 600,
       "NVIDIA A10 datasheet (2021)"),
    _d("A100-40GB", "NVIDIA A100 40GB", {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp64": 19.5, "int8": 624.0},
       {"fp32": 19.5, "fp64": 9.7}, 1555, "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 40GB"),
    _d("A100-80GB", "NVIDIA A100 80GB SXM", {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp64": 19.5, "int8": 624.0},
       {"fp32": 19.5, "fp64": 9.7}, 2039, "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB SXM"),
    _d("A100-80GB-PCIe", "NVIDIA A100 80GB PCIe", {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp64": 19.5},
       {"fp32": 19.5, "fp64": 9.7}, 1935, "NVIDIA A100 Tensor Core GPU datasheet (2021), A100 80GB PCIe"),
    _d("L4", "NVIDIA L4", {"tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5}, {"fp32": 30.3}, 300,
       "NVIDIA L4 datasheet (2023)"),
    _d("L40S", "NVIDIA L40S", {"tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0}, {"fp32": 91.6}, 864,
       "NVIDIA L40S datasheet (2023)"),
    _d("RTX-2080Ti", "GeForce RTX 2080 Ti", {"fp16": 53.8}, {"fp32": 13.4}, 616,
       "NVIDIA Turing GPU Architecture whitepaper (2018), Table 1 (FP16 Tensor with FP32 accumulate)"),
    _d("RTX-3090", "GeForce RTX 3090", {"tf32": 35.6, "bf16": 71.0, "fp16": 71.0}, {"fp32": 35.6}, 936,
       _AMPERE + " (FP16/BF16 Tensor with FP32 accumulate)"),
    _d("RTX-4090", "GeForce RTX 4090", {"tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3}, {"fp32": 82.6}, 1008,
       "NVIDIA Ada GPU Architecture whitepaper (2022), Table 2 (with FP32 accumulate)"),
    _d("H100-SXM", "NVIDIA H100 SXM", {"tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp64": 67.0},
       {"fp32": 67.0, "fp64": 34.0}, 3350, "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 SXM"),
    _d("H100-PCIe", "NVIDIA H100 PCIe", {"tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0, "fp64": 51.0},
       {"fp32": 51.0, "fp64": 26.0}, 2000, "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 PCIe"),
    _d("H200", "NVIDIA H200 SXM", {"tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp64": 67.0},
       {"fp32": 67.0, "fp64": 34.0}, 4800, "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM"),
    _d("GH200", "NVIDIA GH200 (H100 96GB)", {"tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp64": 67.0},
       {"fp32": 67.0, "fp64": 34.0}, 4000, "NVIDIA GH200 Grace Hopper Superchip datasheet (2023), 96GB HBM3"),
    _d("B200", "NVIDIA B200", {"tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "fp4": 9000.0,
                               "fp64": 40.0}, {"fp64": 40.0}, 8000,
       "NVIDIA HGX B200 datasheet (2024), per GPU, sparse figures halved; FP32 vector peak not given"),
    _d("MI250X", "AMD Instinct MI250X (one GCD)", {"fp32": 47.85, "bf16": 191.5, "fp16": 191.5, "fp64": 47.85},
       {"fp32": 23.95, "fp64": 23.95}, 1638.4, "AMD Instinct MI250X datasheet (2021), package figures / 2 GCDs"),
    _d("MI250", "AMD Instinct MI250 (one GCD)", {"fp32": 45.25, "bf16": 181.0, "fp16": 181.0, "fp64": 45.25},
       {"fp32": 22.65, "fp64": 22.65}, 1638.4, "AMD Instinct MI250 datasheet (2021), package figures / 2 GCDs"),
    _d("MI300X", "AMD Instinct MI300X", {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4,
                                         "fp8": 2614.9, "fp64": 163.4}, {"fp32": 163.4, "fp64": 81.7}, 5300,
       "AMD Instinct MI300X datasheet (2023), dense figures"),
)}

_PATTERNS = (  # (pattern on the deviceProperties name, key); first match wins, most specific first
    (r"V100.*PCIE", "V100-PCIe"), (r"V100", "V100-SXM2"), (r"\bT4\b", "T4"), (r"\bA10\b", "A10"),
    (r"A100.*80GB.*PCIE", "A100-80GB-PCIe"), (r"A100.*80GB", "A100-80GB"), (r"A100", "A100-40GB"),
    (r"\bL4\b", "L4"), (r"L40S", "L40S"), (r"2080 ?Ti", "RTX-2080Ti"), (r"3090", "RTX-3090"), (r"4090", "RTX-4090"),
    (r"GH200", "GH200"), (r"H200", "H200"), (r"H100.*PCIE", "H100-PCIe"), (r"H100", "H100-SXM"),
    (r"B200", "B200"), (r"MI250X", "MI250X"), (r"MI250", "MI250"), (r"MI300X", "MI300X"),
)


def find_device(name: str):
    """The :class:`Device` for a Kineto device name or a key of :data:`DEVICES`, or None."""
    if not name:
        return None
    if name in DEVICES:
        return DEVICES[name]
    for pattern, key in _PATTERNS:
        if re.search(pattern, name, re.IGNORECASE):
            return DEVICES[key]
    return None


def device_for(trace_devices: list, override: str | None = None) -> tuple:
    """(Device or None, the name looked up). ``override`` (``--device``) must name a known device:
    ParameterError otherwise. Without it, the first ``deviceProperties`` name is used."""
    if override:
        found = find_device(override)
        if found is None:
            raise ParameterError(f"--device {override!r} is not a known GPU; use one of: {', '.join(DEVICES)}")
        return found, override
    name = next((str(d.get("name") or "") for d in trace_devices if d.get("name")), "")
    return find_device(name), name
