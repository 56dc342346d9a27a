"""What this machine and process are: devices, versions, CPU, RAM and the environment
variables that change PyTorch performance, with recommendations as Findings.

``environment_report()`` is cheap: it never creates a CUDA context on a machine without a
GPU (``torch.cuda.is_available()`` only asks the driver for a device count) and reads the
driver version and the GPUs' UUIDs through NVML only when a GPU is visible: each torch device is
matched by UUID to its NVML index (NVML ignores CUDA_VISIBLE_DEVICES, so with
``CUDA_VISIBLE_DEVICES=3`` cuda:0 is NVML device 3). ``hardware_defaults(device)``
suggests dtype, DataLoader workers, pin_memory and torch.compile mode, each with its reason.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field

import pandas as pd

from ..cpus import available_cores
from ..device import is_cuda, resolve_device
from ..results import Finding, findings_frame, html_section, html_table, html_warnings, rank_findings
from .gpu_match import display_uuid, match_uuids

ENV_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS",
            "CUBLAS_WORKSPACE_CONFIG", "TORCH_CUDNN_V8_API_DISABLED", "TORCH_CUDNN_V8_API_LRU_CACHE_LIMIT",
            "TORCH_COMPILE_DEBUG", "TORCH_LOGS", "TORCH_SHOW_CPP_STACKTRACES", "NCCL_DEBUG")
ENV_PREFIXES = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "NCCL_", "TORCH_CUDNN_")
# OMP_NUM_THREADS matters once several processes (DataLoader workers, ranks) share the cores;
# below 8 cores oversubscription costs little.
MANY_CORES = 8


@dataclass(frozen=True)
class EnvironmentReport:
    """Facts about the machine and process. ``devices`` rows: index (torch's cuda index), name,
    capability, memory_bytes, multiprocessors, uuid ("GPU-...", as nvidia-smi prints it) and
    nvml_index (the same GPU in NVML and nvidia-smi; None when unmatched, with a warning). Byte
    fields are bytes; versions are strings or None when absent."""

    python: str
    platform: str
    torch_version: str | None
    cuda_version: str | None
    cudnn_version: str | None
    driver_version: str | None
    cuda_available: bool
    devices: tuple[dict, ...]
    cpu_model: str
    cpu_logical: int
    cpu_physical: int | None
    cpu_available: int
    ram_total_bytes: int
    ram_available_bytes: int
    env: dict = field(default_factory=dict)
    torch_flags: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        """section, key, value rows for every field, device, flag and environment variable."""
        rows = [("python", k, v) for k, v in (("version", self.python), ("platform", self.platform))]
        rows += [("torch", k, v) for k, v in (("torch", self.torch_version), ("cuda", self.cuda_version),
                                              ("cudnn", self.cudnn_version), ("driver", self.driver_version),
                                              ("cuda_available", self.cuda_available))]
        rows += [("torch_flags", k, v) for k, v in self.torch_flags.items()]
        rows += [("device", f"cuda:{d['index']}", _device_text(d)) for d in self.devices]
        rows += [("cpu", k, v) for k, v in (("model", self.cpu_model), ("logical", self.cpu_logical),
                                            ("physical", self.cpu_physical), ("available", self.cpu_available))]
        rows += [("ram", "total_bytes", self.ram_total_bytes), ("ram", "available_bytes", self.ram_available_bytes)]
        rows += [("env", k, v) for k, v in sorted(self.env.items())]
        rows = [(sec, key, "n/a" if val is None else str(val)) for sec, key, val in rows]
        return pd.DataFrame(rows, columns=["section", "key", "value"])

    @property
    def findings(self) -> tuple[Finding, ...]:
        return rank_findings(_findings(self))

    def __repr__(self) -> str:
        dev = ", ".join(d["name"] for d in self.devices) or "no GPU"
        return f"EnvironmentReport(torch={self.torch_version}, cuda={self.cuda_version}, devices=[{dev}])"

    def _repr_html_(self) -> str:
        return html_section("Environment", html_table(self.to_frame(), max_rows=200),
                            html_table(findings_frame(self.findings)), html_warnings(self.warnings))


@dataclass(frozen=True)
class HardwareDefaults:
    """Suggested settings with reasons: dtype ("bfloat16"/"float32"), num_workers,
    pin_memory, compile_mode (None = don't compile by default), matmul_precision."""

    device: str
    dtype: str
    num_workers: int
    pin_memory: bool
    compile_mode: str | None
    matmul_precision: str
    reasons: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        keys = ("dtype", "num_workers", "pin_memory", "compile_mode", "matmul_precision")
        return pd.DataFrame([{"setting": k, "value": str(getattr(self, k)), "reason": self.reasons.get(k, "")}
                             for k in keys], columns=["setting", "value", "reason"])

    def __repr__(self) -> str:
        return (f"HardwareDefaults(device={self.device!r}, dtype={self.dtype!r}, num_workers={self.num_workers}, "
                f"pin_memory={self.pin_memory}, compile_mode={self.compile_mode!r})")

    def _repr_html_(self) -> str:
        return html_section(f"Suggested defaults for {self.device}", html_table(self.to_frame()))


def environment_report() -> EnvironmentReport:
    """Collect the report; never raises for a missing torch, GPU or driver (fields are None
    and ``warnings`` say why)."""
    import psutil

    warnings: list[str] = []
    torch_info = _torch_info(warnings)
    driver, nvml_uuids = _nvml_facts(warnings) if torch_info["cuda_available"] else (None, None)
    _add_nvml_index(torch_info["devices"], nvml_uuids, warnings)
    vm = psutil.virtual_memory()
    return EnvironmentReport(
        python=platform.python_version(), platform=platform.platform(), driver_version=driver,
        cpu_model=_cpu_model(), cpu_logical=os.cpu_count() or 1, cpu_physical=psutil.cpu_count(logical=False),
        cpu_available=available_cores(), ram_total_bytes=int(vm.total), ram_available_bytes=int(vm.available),
        env=_env_vars(), warnings=tuple(warnings), **torch_info)


def _torch_info(warnings: list) -> dict:
    info = {"torch_version": None, "cuda_version": None, "cudnn_version": None, "cuda_available": False,
            "devices": (), "torch_flags": {}}
    try:
        import torch
    except ImportError:
        warnings.append("torch is not installed: no device, CUDA or cuDNN information")
        return info
    info["torch_version"] = torch.__version__
    info["cuda_version"] = torch.version.cuda
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    info["cudnn_version"] = str(cudnn) if cudnn else None
    info["cuda_available"] = bool(torch.cuda.is_available())
    info["torch_flags"] = _torch_flags(torch)
    if info["cuda_available"]:
        info["devices"] = tuple(_device_row(torch, i) for i in range(torch.cuda.device_count()))
    return info


def _torch_flags(torch) -> dict:
    return {"cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
            "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
            "num_threads": torch.get_num_threads()}


def _device_row(torch, i: int) -> dict:
    props = torch.cuda.get_device_properties(i)
    return {"index": i, "name": props.name, "capability": f"{props.major}.{props.minor}",
            "memory_bytes": int(props.total_memory), "multiprocessors": props.multi_processor_count,
            "uuid": display_uuid(getattr(props, "uuid", None))}


def _device_text(d: dict) -> str:
    nvml = "" if d.get("nvml_index") is None else f", NVML {d['nvml_index']}"
    uuid = f", {d['uuid']}" if d.get("uuid") else ""
    return f"{d['name']} (sm {d['capability']}, {d['memory_bytes'] / 2**30:.1f} GiB{nvml}{uuid})"


def _add_nvml_index(devices: tuple[dict, ...], nvml_uuids: list | None, warnings: list) -> None:
    """Set each device row's nvml_index: the NVML device with the same UUID, else None."""
    found = match_uuids([d["uuid"] for d in devices], nvml_uuids) if nvml_uuids is not None else [None] * len(devices)
    for d, nvml_index in zip(devices, found):
        d["nvml_index"] = nvml_index
        if nvml_index is None and nvml_uuids is not None:
            warnings.append(f"cuda:{d['index']} (UUID {d['uuid']}) matches no NVML device: nvml_index is None "
                            "(a MIG instance, or NVML sees other GPUs than CUDA)")


def _nvml_facts(warnings: list) -> tuple[str | None, list | None]:
    """The driver version and each NVML device's UUID (in NVML order); None for what NVML cannot tell."""
    try:
        import pynvml  # optional (perfkit[workbook])
    except ImportError:
        warnings.append("nvidia-ml-py is not installed: driver version and NVML indices unknown")
        return None, None
    try:
        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            uuids = _nvml_uuids(pynvml, warnings)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError as exc:
        warnings.append(f"NVML unavailable ({exc}): driver version and NVML indices unknown")
        return None, None
    return (version.decode() if isinstance(version, bytes) else str(version)), uuids


def _nvml_uuids(pynvml, warnings: list) -> list | None:
    """Each NVML device's UUID in NVML order; None (and a warning) when NVML cannot read them, so the
    driver version read before still stands."""
    try:
        return [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(pynvml.nvmlDeviceGetCount())]
    except pynvml.NVMLError as exc:
        warnings.append(f"NVML cannot read the GPUs' UUIDs ({exc}): NVML indices unknown")
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _env_vars() -> dict:
    return {k: v for k, v in os.environ.items() if k in ENV_VARS or k.startswith(ENV_PREFIXES)}


def _findings(r: EnvironmentReport) -> list[Finding]:
    out = _env_findings(r)
    flags = r.torch_flags
    if not r.cuda_available:
        out.append(Finding("info", "no CUDA GPU visible: CPU-only run, GPU checks skipped",
                           {"torch": r.torch_version or "absent", "cuda_build": r.cuda_version or "none"}))
        return out
    if not flags.get("cudnn.benchmark"):
        out.append(Finding("low", "torch.backends.cudnn.benchmark is off",
                           {"cudnn": r.cudnn_version or "absent"},
                           "for conv nets with fixed input shapes set torch.backends.cudnn.benchmark = True",
                           "cuDNN autotuning picks the fastest conv algorithm per shape"))
    ampere = [d for d in r.devices if float(d["capability"]) >= 8.0]
    if ampere and flags.get("float32_matmul_precision") == "highest":
        out.append(Finding("medium", "TF32 matmuls are off on an Ampere-or-newer GPU",
                           {"gpu": ampere[0]["name"], "float32_matmul_precision": "highest"},
                           "torch.set_float32_matmul_precision('high') (TF32) for fp32 training",
                           "compute capability >= 8.0 has TF32 tensor cores"))
    if flags.get("cudnn.deterministic") or flags.get("deterministic_algorithms"):
        out.append(Finding("low", "deterministic algorithms are on", {k: flags.get(k) for k in
                           ("cudnn.deterministic", "deterministic_algorithms")},
                           "turn them off for performance runs unless you need bitwise reproducibility"))
    return out


def _env_findings(r: EnvironmentReport) -> list[Finding]:
    env = r.env
    out = []
    if env.get("CUDA_LAUNCH_BLOCKING", "0").strip() not in ("", "0"):
        out.append(Finding("critical", "CUDA_LAUNCH_BLOCKING is set: every kernel launch waits for the GPU",
                           {"CUDA_LAUNCH_BLOCKING": env["CUDA_LAUNCH_BLOCKING"]},
                           "unset CUDA_LAUNCH_BLOCKING (it is a debugging aid)",
                           "any value other than 0 serializes CPU and GPU"))
    out += _thread_findings(r)
    if env.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE"):
        out.append(Finding("low", f"NCCL_DEBUG={env['NCCL_DEBUG']}: verbose NCCL logging",
                           {"NCCL_DEBUG": env["NCCL_DEBUG"]}, "unset NCCL_DEBUG or use WARN for timed runs"))
    if env.get("TORCH_CUDNN_V8_API_DISABLED", "0") not in ("", "0"):
        out.append(Finding("low", "TORCH_CUDNN_V8_API_DISABLED is set: cuDNN's legacy API is used",
                           {"TORCH_CUDNN_V8_API_DISABLED": env["TORCH_CUDNN_V8_API_DISABLED"]},
                           "unset it unless a cuDNN v8 bug forces it"))
    if "CUBLAS_WORKSPACE_CONFIG" in env:
        out.append(Finding("info", "CUBLAS_WORKSPACE_CONFIG is set (deterministic cuBLAS)",
                           {"CUBLAS_WORKSPACE_CONFIG": env["CUBLAS_WORKSPACE_CONFIG"]},
                           "a small workspace (:16:8) can slow matmuls; unset it for performance runs"))
    debug = sorted(k for k in env if k in ("TORCH_COMPILE_DEBUG", "TORCH_LOGS")
                   or (k.endswith("_DEBUG") and k.startswith(("TORCHINDUCTOR_", "TORCHDYNAMO_"))))
    if any(env[k] not in ("", "0") for k in debug):
        out.append(Finding("low", "torch.compile debug logging is on", {k: env[k] for k in debug},
                           f"unset {', '.join(debug)} for timed runs"))
    return out


def _thread_findings(r: EnvironmentReport) -> list[Finding]:
    omp = r.env.get("OMP_NUM_THREADS")
    if omp is None:
        if r.cpu_available < MANY_CORES:
            return []
        return [Finding("low", f"OMP_NUM_THREADS is unset on a {r.cpu_available}-core machine",
                        {"cpu_available": r.cpu_available},
                        "with several processes (ranks, DataLoader workers) set OMP_NUM_THREADS to "
                        "cores / processes so their thread pools don't oversubscribe the CPU",
                        f">= {MANY_CORES} available cores")]
    try:
        threads = int(omp)
    except ValueError:
        return [Finding("medium", f"OMP_NUM_THREADS={omp!r} is not an integer", {"OMP_NUM_THREADS": omp},
                        "set it to a positive integer")]
    if threads > r.cpu_available:
        return [Finding("medium", f"OMP_NUM_THREADS={threads} exceeds the {r.cpu_available} available cores",
                        {"OMP_NUM_THREADS": threads, "cpu_available": r.cpu_available},
                        f"set OMP_NUM_THREADS <= {r.cpu_available}", "more threads than cores oversubscribe")]
    return []


def hardware_defaults(device: str = "auto") -> HardwareDefaults:
    """Suggested training defaults for ``device`` ("auto", "cpu", "cuda[:N]"), each with a
    reason. Raises ParameterError for an unknown device or "cuda" without a GPU."""
    import torch

    dev = resolve_device(device)
    cores = available_cores()
    workers = max(0, min(8, cores - 1))
    reasons = {"num_workers": f"{cores} available cores: one for the main process, the rest (at most 8) "
                              "for DataLoader workers"}
    if is_cuda(dev):
        return _cuda_defaults(torch, dev, workers, reasons)
    reasons.update(dtype="CPU: bf16 is only faster with AMX/AVX512-BF16 kernels; float32 is the safe default",
                   pin_memory="pinned memory only speeds up host-to-GPU copies",
                   compile_mode="on CPU torch.compile needs a C++ toolchain and pays off mainly for larger "
                                "models: measure before enabling",
                   matmul_precision="TF32 does not exist on CPU")
    return HardwareDefaults(dev, "float32", workers, False, None, "highest", reasons)


def _cuda_defaults(torch, dev: str, workers: int, reasons: dict) -> HardwareDefaults:
    major, minor = torch.cuda.get_device_capability(dev)
    # is_bf16_supported() asks about the current device, and by default says True where bf16
    # is only emulated (compute capability < 8.0: slower than float32).
    with torch.cuda.device(dev):
        bf16 = bool(torch.cuda.is_bf16_supported(including_emulation=False))
    reasons.update(
        dtype=("bf16 autocast is supported (compute capability >= 8.0): half the memory traffic, no loss "
               "scaling" if bf16 else f"compute capability {major}.{minor} has no fast bf16: use float32 "
               "(or fp16 autocast with a GradScaler)"),
        pin_memory="CUDA: pinned host memory makes .to(device, non_blocking=True) asynchronous and faster",
        compile_mode="'default' first; 'reduce-overhead' (CUDA graphs) for small, launch-bound models",
        matmul_precision=("TF32 tensor cores on Ampere and newer" if major >= 8 else "no TF32 before Ampere"))
    return HardwareDefaults(dev, "bfloat16" if bf16 else "float32", workers, True, "default",
                            "high" if major >= 8 else "highest", reasons)

