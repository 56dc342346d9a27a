"""Peak dense throughput and memory bandwidth of the GPUs perfkit knows, each from the vendor's datasheet.

``matrix``: Tensor Core / Matrix Core (MFMA) peak, TFLOP/s per data type, **dense** (the datasheets'
"with sparsity" figures are twice these); ``vector``: CUDA-core / vector ALU peak; ``mem_bw_gbs``:
memory bandwidth in GB/s (1e9 bytes/s); ``l2_mb``: the last cache before memory, in MB (L2; MI300X's 256 MB
Infinity Cache), which decides whether an op's inputs could be read from cache rather than memory
(``opmodel.capped``; from the architecture whitepapers, B200's 126 MB as Chips and Cheese measured it:
https://chipsandcheese.com/p/nvidias-b200-keeping-the-cuda-juggernaut). Boost clocks, as the datasheets state them; a real GPU under a power or thermal limit
runs below them, so 100% is never reached.

An AMD MI250/MI250X package holds two GCDs that PyTorch sees as two devices, and a trace records one:
its figures here are per GCD (half the package's datasheet figure), which is what one device can reach.

Devices are found by the ``name`` Kineto writes in ``deviceProperties`` (``NVIDIA H100 80GB HBM3``,
``AMD Instinct MI300X VF``), or by ``--device`` / ``device=`` (a key of :data:`DEVICES` or any name
the patterns match). A variant the table lacks matches none (``H100 NVL``, ``GB200``, ``V100S``, ``RTX 3090 Ti``,
``RTX 500 Ada``): a neighbour's figures would be wrong by its clocks and memory, so its rates are shown without
percentages and the warning asks for ``--peaks`` (``UNKNOWN_DEVICE``).

A **peaks file** (``perfkit validate --write-peaks FILE`` measures one; ``perfkit gpu-kernels --peaks FILE``
reads it) replaces the datasheet with what a card does: ``{"perfkit_peaks": 1, "<device name>": {"matrix":
{dtype: TFLOP/s}, "vector": {dtype: TFLOP/s}, "mem_bw_gbs": GB/s, "source": "..."}}``, one entry per device;
:func:`read_peaks` and :func:`write_peaks` are its only reader and writer.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...atomic import write_text_atomic
from ...errors import ParameterError

PEAKS_FORMAT = 1


@dataclass(frozen=True)
class Device:
    key: str
    name: str
    matrix: dict = field(default_factory=dict)
    vector: dict = field(default_factory=dict)
    mem_bw_gbs: float = 0.0
    source: str = ""
    measured: bool = False  # from a peaks file: a floor of what the card does, not a datasheet ceiling
    l2_mb: float = 0.0  # 0: unknown, no op is taken to be served from cache

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


def _d(key, name, matrix, vector, bw, source, l2_mb=0.0) -> Device:
    return Device(key, name, dict(matrix), dict(vector), float(bw), source, l2_mb=float(l2_mb))


# Each source names the document checked and the address the check read it at (vendor PDFs are often
# reachable only through copies; the copy's address is given where the vendor's own page was not found).
# "sparse/2": the document gives only "with sparsity" figures, halved here to the dense rate.
_A100 = ("NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), "
         "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
         "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf, as tabulated at "
         "https://glennklockwood.com/garden/processors/A100")
_H100 = ("NVIDIA H100 Tensor Core GPU datasheet, SXM and PCIe table (TF32/BF16/FP16/FP8 given with sparsity, "
         "halved here), as reproduced at https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html; dense "
         "Tensor figures as the NVIDIA H100 Tensor Core GPU Architecture whitepaper states them "
         "(https://glennklockwood.com/garden/processors/h100)")
_H200 = ("NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: compute as H100 SXM, 4.8 TB/s "
         "(https://lzwjava.github.io/nvidia-h200-gpu-specs-en, https://www.aiminingco.com/gpu/h200/specs)")
_MI200 = ("AMD Instinct MI200 series datasheet, package figures halved to one GCD, as reproduced at "
          "https://zexron.com/amd-mi250-x-aldebaran-as-mcm-with-up-to-479-teraflop-s-and-560-watt-tdp "
          "and https://yobitel.com/knowledge-base/amd-mi250")
DEVICES = {d.key: d for d in (
    _d("V100-SXM2", "Tesla V100 SXM2", {"fp16": 125.0}, {"fp32": 15.7, "fp64": 7.8}, 900,
       "NVIDIA Tesla V100 GPU datasheet, V100 SXM2 column (125 Tensor TFLOPS confirmed at "
       "https://developer.nvidia.com/programming-tensor-cores-cuda-9-0)", l2_mb=6),
    _d("V100-PCIe", "Tesla V100 PCIe", {"fp16": 112.0}, {"fp32": 14.0, "fp64": 7.0}, 900,
       "NVIDIA Tesla V100 GPU datasheet, V100 PCIe column (not found by the search; figures unchanged)", l2_mb=6),
    _d("T4", "Tesla T4", {"fp16": 65.0, "int8": 130.0}, {"fp32": 8.1}, 320,
       "NVIDIA T4 Tensor Core GPU datasheet (8.1 FP32, 65 FP16/FP32 mixed, 130 INT8), as reproduced at "
       "https://geektopia.es/es/technology/2018/09/13/noticias/nvidia-presenta-la-nueva-tesla-t4-basada-en-"
       "turing-orientada-a-inteligencia-artificial.html; 320 GB/s at https://sysrqmts.com/en/gpus/nvidia/tesla/t4", l2_mb=4),
    _d("A10", "NVIDIA A10", {"tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0}, {"fp32": 31.2}, 600,
       "NVIDIA A10 Tensor Core GPU datasheet (FP32 31.2, 600 GB/s as at https://sysrqmts.com/ru/gpus/compare/"
       "nvidia-a10-pcie-vs-nvidia-quadro-rtx-4000; Tensor figures not shown by the search, unchanged)", l2_mb=6),
    _d("A100-40GB", "NVIDIA A100 40GB", {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp64": 19.5, "int8": 624.0},
       {"fp32": 19.5, "fp64": 9.7}, 1555, _A100 + ", A100 40GB", l2_mb=40),
    _d("A100-80GB", "NVIDIA A100 80GB SXM", {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp64": 19.5, "int8": 624.0},
       {"fp32": 19.5, "fp64": 9.7}, 2039, _A100 + ", A100 80GB SXM", l2_mb=40),
    _d("A100-80GB-PCIe", "NVIDIA A100 80GB PCIe",
       {"tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp64": 19.5, "int8": 624.0},
       {"fp32": 19.5, "fp64": 9.7}, 1935, _A100 + ", A100 80GB PCIe", l2_mb=40),
    _d("L4", "NVIDIA L4", {"tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "int8": 242.5}, {"fp32": 30.3},
       300, "NVIDIA L4 Tensor Core GPU datasheet (sparse/2: TF32 120, FP16 242, FP8/INT8 485 with sparsity), as "
       "reproduced at https://store.sourcecode.com/en-us/bg-bucket-compare/125/9820 and "
       "https://grokipedia.com/page/NVIDIA_L4_vs_L40S", l2_mb=48),
    _d("L40S", "NVIDIA L40S", {"tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0, "int8": 733.0},
       {"fp32": 91.6}, 864, "NVIDIA L40S GPU datasheet (dense | sparse columns), as reproduced at "
       "https://www.mullet.se/product.html?product_id=355414", l2_mb=96),
    _d("RTX-2080Ti", "GeForce RTX 2080 Ti", {"fp16": 53.8}, {"fp32": 13.4}, 616,
       "NVIDIA Turing GPU Architecture whitepaper (2018), reference-board column, FP16 Tensor with FP32 "
       "accumulate (not shown by the search excerpts, https://www.bit-tech.net/features/tech/graphics/"
       "nvidias-turing-architecture-explained/1/; unchanged)", l2_mb=5.5),
    _d("RTX-3090", "GeForce RTX 3090", {"tf32": 35.6, "bf16": 71.0, "fp16": 71.0}, {"fp32": 35.6}, 936,
       "NVIDIA Ampere GA102 GPU Architecture whitepaper v2, Appendix A (FP16/BF16 Tensor with FP32 accumulate), "
       "https://docslib.org/doc/759549/nvidia-ampere-ga102-gpu-architecture-whitepaper (the excerpt showed the "
       "contents only; figures unchanged)", l2_mb=6),
    _d("RTX-4090", "GeForce RTX 4090", {"tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3}, {"fp32": 82.6}, 1008,
       "NVIDIA Ada GPU Architecture whitepaper (with FP32 accumulate; TF32 82.58, FP16/BF16 165.15, FP8 330.30 "
       "dense), as tabulated at https://waredb.com/processor/nvidia-geforce-rtx-4090", l2_mb=72),
    _d("RTX-4090D", "GeForce RTX 4090 D", {"tf32": 73.5, "bf16": 147.1, "fp16": 147.1, "fp8": 294.2}, {"fp32": 73.5},
       1008, "NVIDIA GeForce RTX 4090 D (AD102-250, 114 SMs at 2,520 MHz: the 4090's 128 SMs cut; FP32 73.54, "
       "Tensor with FP32 accumulate FP16/BF16 147.09, FP8 294.18, TF32 73.54 dense; 1,008 GB/s, 72 MB L2), as "
       "tabulated at https://hmc-tech.com/gpu/nvidia-geforce-rtx-4090-d", l2_mb=72),
    _d("H100-SXM", "NVIDIA H100 SXM", {"tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp64": 67.0},
       {"fp32": 67.0, "fp64": 34.0}, 3350, _H100 + "; H100 SXM", l2_mb=50),
    _d("H100-PCIe", "NVIDIA H100 PCIe", {"tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0, "fp64": 51.0},
       {"fp32": 51.0, "fp64": 26.0}, 2000, _H100 + "; H100 PCIe (sparse/2)", l2_mb=50),
    _d("H800", "NVIDIA H800 SXM", {"tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp64": 1.0},
       {"fp32": 67.0, "fp64": 1.0}, 3350, "NVIDIA H800 Tensor Core GPU: the H100 SXM die and clocks with FP64 cut to "
       "1 TFLOPS and NVLink to 400 GB/s (https://www.philisun.com/technical-analysis/nvidia-h800-vs-h100-a-technical-"
       "deep-dive-into-politically-defined-ai-chips/); dense Tensor figures as H100 SXM", l2_mb=50),
    _d("H800-PCIe", "NVIDIA H800 PCIe", {"tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0, "fp64": 0.8},
       {"fp32": 51.0, "fp64": 0.8}, 2000, _H100 + "; H100 PCIe figures with FP64 cut to 0.8 TFLOPS (H800 PCIe)",
       l2_mb=50),
    _d("H200", "NVIDIA H200 SXM", {"tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp64": 67.0},
       {"fp32": 67.0, "fp64": 34.0}, 4800, _H200, l2_mb=50),
    _d("GH200", "NVIDIA GH200 (H100 96GB)", {"tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "fp64": 67.0},
       {"fp32": 67.0, "fp64": 34.0}, 4000,
       "NVIDIA GH200 Grace Hopper Superchip datasheet: H100 compute, 96GB HBM3 at 4 TB/s (the 144GB HBM3e part "
       "has 4.9 TB/s); the search found only secondary pages (https://wikimili.com/en/Hopper_%28microarchitecture%29)", l2_mb=50),
    _d("B200", "NVIDIA B200", {"tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "fp4": 9000.0,
                               "int8": 4500.0, "fp64": 37.0}, {"fp32": 75.0, "fp64": 37.0}, 7700,
       "NVIDIA HGX B200 datasheet (technical specifications table), individual Blackwell GPU column (sparse/2: FP4 18, FP8 9, "
       "FP16/BF16 4.5, TF32 2.2 PFLOPS; FP32 75, FP64 37 TFLOPS; 180GB HBM3E at 7.7 TB/s), as reproduced at "
       "https://zdszero.github.io/Computer/Artificial_Intelligence/Hardware.html", l2_mb=126),
    _d("MI250X", "AMD Instinct MI250X (one GCD)", {"fp32": 47.85, "bf16": 191.5, "fp16": 191.5, "fp64": 47.85},
       {"fp32": 23.95, "fp64": 23.95}, 1638.4, _MI200 + "; MI250X: 47.9 vector, 95.7 matrix, 383 FP16/BF16, 3.2 TB/s", l2_mb=8),
    _d("MI250", "AMD Instinct MI250 (one GCD)", {"fp32": 45.25, "bf16": 181.05, "fp16": 181.05, "fp64": 45.25},
       {"fp32": 22.65, "fp64": 22.65}, 1638.4, _MI200 + "; MI250: 45.3 vector, 90.5 matrix, 362.1 FP16/BF16", l2_mb=8),
    _d("MI300X", "AMD Instinct MI300X", {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4,
                                         "fp8": 2614.9, "fp64": 163.4}, {"fp32": 163.4, "fp64": 81.7}, 5300,
       "AMD Instinct MI300X datasheet, dense figures; checked against AMD's MI300 microarchitecture page "
       "https://rocm.docs.amd.com/en/docs-6.2.2/conceptual/gpu-arch/mi300.html (5.3 TB/s confirmed by "
       "https://www.emergentmind.com/topics/amd-mi300x-gpu; the excerpts did not show the peak table)", l2_mb=256),
)}

_PATTERNS = (  # (pattern on the deviceProperties name, key); first match wins, most specific first. A variant the
    # table lacks must match none (module doc): V100S, A100X, RTX 3090 Ti / 4090 D, H100/H200 NVL, GB200.
    (r"V100S", None), (r"V100.*PCIE", "V100-PCIe"), (r"V100", "V100-SXM2"), (r"\bT4\b", "T4"), (r"\bA10\b", "A10"),
    (r"A100X", None), (r"A100.*80GB.*PCIE", "A100-80GB-PCIe"), (r"A100.*80GB", "A100-80GB"), (r"A100", "A100-40GB"),
    (r"\bL4\b", "L4"), (r"L40S", "L40S"), (r"2080 ?Ti", "RTX-2080Ti"), (r"3090 ?Ti", None), (r"3090", "RTX-3090"),
    (r"4090 ?D\b", "RTX-4090D"), (r"4090", "RTX-4090"), (r"GH200", "GH200"), (r"NVL\b", None), (r"H200", "H200"),
    (r"H800.*PCIE", "H800-PCIe"), (r"H800", "H800"), (r"H100.*PCIE", "H100-PCIe"), (r"H100", "H100-SXM"),
    (r"GB200", None), (r"B200", "B200"), (r"MI250X", "MI250X"), (r"MI250", "MI250"), (r"MI300X", "MI300X"),
)
# The warning of a GPU the table lacks (``breakdown``): its figures stay without percentages of a peak.
UNKNOWN_DEVICE = ("unknown device {name!r}: use --peaks FILE (perfkit validate --write-peaks FILE measures this GPU's "
                  "peaks) for percentages of peak; --device NAME compares against a GPU perfkit knows. FLOPs and bytes "
                  "are shown without percentages")
NO_DEVICE = ("the trace names no device: use --peaks FILE or --device NAME for percentages of peak; FLOPs and bytes "
             "are shown without percentages")


def find_device(name: str):
    """The :class:`Device` for a Kineto device name or a key of :data:`DEVICES`, or None."""
    if not name:
        return None
    if name in DEVICES:
        return DEVICES[name]
    for pattern, key in _PATTERNS:
        if re.search(pattern, name, re.IGNORECASE):
            return DEVICES[key] if key else None
    return None


def device_for(trace_devices: list, override: str | None = None, peaks: dict | None = None) -> tuple:
    """(Device or None, the name looked up). ``override`` (``--device``) must name a known device:
    ParameterError otherwise. Without it, the first ``deviceProperties`` name is used. ``peaks``
    (:func:`read_peaks`) are looked up first, by the same name: a peaks file that does not hold the device
    raises ParameterError (measured peaks of another card would mislead)."""
    name = override or next((str(d.get("name") or "") for d in trace_devices if d.get("name")), "")
    if peaks:
        found = peaks.get(name) or next((d for n, d in peaks.items() if find_device(n) is find_device(name)
                                         and find_device(name) is not None), None)
        if found is None:
            wanted = repr(name) if name else "the trace's GPU (deviceProperties names none)"
            raise ParameterError(f"the peaks file holds {', '.join(map(repr, peaks))}, not {wanted}: "
                                 "measure this GPU's peaks with perfkit validate --write-peaks FILE on it, or pass "
                                 "--device with a name in the file")
        return found, name
    if override:
        found = find_device(override)
        if found is None:
            raise ParameterError(f"--device {override!r} is not a known GPU; use one of: {', '.join(DEVICES)}")
        return found, override
    return find_device(name), name


def write_peaks(path, peaks: dict) -> Path:
    """Write measured ``peaks`` (``{name: {"matrix": ..., "vector": ..., "mem_bw_gbs": ..., "source": ...}}``)
    to ``path`` as a peaks file, atomically; returns the path. Raises ParameterError for an entry
    :func:`read_peaks` would refuse."""
    doc = {"perfkit_peaks": PEAKS_FORMAT, **peaks}
    _parse_peaks(doc, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n", user_output=True)
    return path


def read_peaks(path) -> dict:
    """``{device name: Device}`` from a peaks file (module doc). Raises ParameterError naming the file and
    what is wrong: not JSON, another format version, an entry without positive finite TFLOP/s or
    bandwidth."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ParameterError(f"peaks file {str(path)!r} not found: write one with perfkit validate --write-peaks "
                             f"{path}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ParameterError(f"peaks file {str(path)!r} is not a JSON peaks file ({exc}): write one with perfkit "
                             "validate --write-peaks FILE") from None
    return _parse_peaks(doc, str(path))


def _parse_peaks(doc, where: str) -> dict:
    if not isinstance(doc, dict) or doc.get("perfkit_peaks") != PEAKS_FORMAT:
        raise ParameterError(f"peaks file {where!r}: expected {{\"perfkit_peaks\": {PEAKS_FORMAT}, ...}} as perfkit "
                             "validate --write-peaks writes it")
    out = {}
    for name, entry in doc.items():
        if name == "perfkit_peaks":
            continue
        if not isinstance(entry, dict):
            raise ParameterError(f"peaks file {where!r}: the entry {name!r} is not an object")
        units = {u: entry.get(u, {}) for u in ("matrix", "vector")}
        bad = [f"{u}.{d}" for u, peaks in units.items() for d, v in (peaks.items() if isinstance(peaks, dict) else
               [("?", None)]) if not _positive(v)]
        if bad or not _positive(entry.get("mem_bw_gbs")) or not any(units.values()):
            what = ", ".join(bad) or "mem_bw_gbs or every TFLOP/s figure"
            raise ParameterError(f"peaks file {where!r}: {name!r} needs positive finite numbers ({what} is not)")
        datasheet = find_device(str(name))  # the cache size is the datasheet's: a peaks file does not measure it
        out[str(name)] = Device(str(name), str(name), dict(units["matrix"]), dict(units["vector"]),
                                float(entry["mem_bw_gbs"]), str(entry.get("source", f"measured ({where})")), True,
                                l2_mb=datasheet.l2_mb if datasheet else 0.0)
    if not out:
        raise ParameterError(f"peaks file {where!r} holds no device")
    return out


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
