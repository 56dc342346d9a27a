"""Background system monitor: CPU, RSS and (through NVML) GPU utilization, memory, power, clocks.

    with SystemMonitor(interval_s=0.2) as mon:
        train(...)
    result = mon.result()          # MonitorResult: to_frame(), summary(), findings

GPU data comes from nvidia-ml-py (``import pynvml``, imported lazily). Without it, or when
NVML cannot start (no driver, no GPU), the monitor records CPU-side data only and
``gpu_reason`` says why. Nothing is plotted or printed here.

Only the GPUs this process uses are sampled, and columns are named by CUDA index (``gpu0_*`` is
``cuda:0``), whatever NVML calls them: with ``CUDA_VISIBLE_DEVICES=3``, ``gpu0_*`` reads NVML
device 3. The match is made once at start (perfkit.bench.gpu_match): by UUID when the process
has already imported torch and initialized CUDA, else from CUDA_VISIBLE_DEVICES.
"""
from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import ParameterError
from ..results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from .gpu_match import display_uuid, loaded_torch_uuids, match_gpus

CPU_COLUMNS = ("cpu_process_percent", "cpu_system_percent", "rss_bytes")
GPU_METRICS = ("util_percent", "mem_used_bytes", "power_w", "sm_clock_mhz", "mem_clock_mhz")
# A GPU whose kernels run less than half the time is waiting on something (input pipeline,
# launches, syncs); nvidia-smi's "GPU-Util" is the same counter.
LOW_GPU_UTIL_PERCENT = 50.0
# The main Python thread at >= 90% of one core while the GPU idles: launch/CPU bound.
BUSY_CORE_PERCENT = 90.0


@dataclass(frozen=True)
class MonitorResult:
    """Samples from a SystemMonitor run. ``rows`` are dicts with time_s (since start),
    cpu_process_percent (can exceed 100 on several cores), cpu_system_percent (all cores,
    0-100), rss_bytes and, per monitored GPU: {label}_util_percent, {label}_mem_used_bytes,
    {label}_power_w, {label}_sm_clock_mhz, {label}_mem_clock_mhz. ``gpus``: one dict per monitored
    GPU with label ("gpu0" for cuda:0), cuda_index (None when unknown: then the label uses the NVML
    index), nvml_index, uuid ("GPU-...", None when NVML cannot read it) and name."""

    interval_s: float
    rows: tuple[dict, ...]
    gpus: tuple[dict, ...] = ()
    gpu_reason: str | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def gpu_names(self) -> tuple[str, ...]:
        return tuple(g["name"] for g in self.gpus)

    @property
    def gpu_available(self) -> bool:
        return self.gpu_reason is None and bool(self.gpus)

    @property
    def duration_s(self) -> float:
        return float(self.rows[-1]["time_s"]) if self.rows else 0.0

    def to_frame(self) -> pd.DataFrame:
        cols = ["time_s", *CPU_COLUMNS] + [f"{g['label']}_{m}" for g in self.gpus for m in GPU_METRICS]
        return pd.DataFrame(list(self.rows), columns=cols)

    def summary(self) -> pd.DataFrame:
        """One row per metric: metric, mean, p50, p95, max, samples (NaN samples left out)."""
        frame = self.to_frame().drop(columns="time_s")
        rows = []
        for col in frame.columns:
            vals = frame[col].dropna().to_numpy(dtype=float)
            stats = (np.mean(vals), *np.percentile(vals, [50, 95]), np.max(vals)) if len(vals) else (math.nan,) * 4
            rows.append({"metric": col, "mean": stats[0], "p50": stats[1], "p95": stats[2], "max": stats[3],
                         "samples": len(vals)})
        return pd.DataFrame(rows, columns=["metric", "mean", "p50", "p95", "max", "samples"])

    @property
    def findings(self) -> tuple[Finding, ...]:
        return rank_findings(_findings(self))

    def gpus_frame(self) -> pd.DataFrame:
        """The monitored GPUs: label, cuda_index, nvml_index, name, uuid."""
        return pd.DataFrame(list(self.gpus), columns=["label", "cuda_index", "nvml_index", "name", "uuid"])

    def __repr__(self) -> str:
        gpu = (f"gpus=[{', '.join(_gpu_text(g) for g in self.gpus)}]" if self.gpu_available
               else f"gpu_reason={self.gpu_reason!r}")
        return f"MonitorResult(samples={len(self.rows)}, duration_s={self.duration_s:.2f}, {gpu})"

    def _repr_html_(self) -> str:
        head = html_text(f"{len(self.rows)} samples over {self.duration_s:.2f} s"
                         + ("" if self.gpu_available else f"; no GPU data: {self.gpu_reason}"))
        gpus = html_table(self.gpus_frame()) if self.gpus else ""
        return html_section("System monitor", f"<p>{head}</p>", gpus, html_table(self.summary()),
                            html_table(findings_frame(self.findings)), html_warnings(self.warnings))


class SystemMonitor:
    """Samples every ``interval_s`` seconds on a daemon thread between ``start()`` and
    ``stop()`` (or inside ``with``). ``nvml`` replaces the pynvml module (tests pass a fake);
    ``gpu=False`` skips NVML. ``clock`` returns seconds."""

    def __init__(self, interval_s: float = 0.2, *, gpu: bool = True, nvml=None, clock=time.perf_counter):
        if not interval_s > 0:
            raise ParameterError(f"SystemMonitor(interval_s={interval_s!r}): must be > 0 seconds")
        self.interval_s = float(interval_s)
        self._want_gpu = gpu
        self._nvml = nvml
        self._clock = clock
        self._rows: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handles: list = []
        self._gpus: tuple[dict, ...] = ()
        self._warnings: set[str] = set()
        self.gpu_reason: str | None = None

    def start(self) -> "SystemMonitor":
        import psutil

        if self._thread is not None:
            raise ParameterError("SystemMonitor.start(): already started; use a new monitor per run")
        self._proc = psutil.Process()
        self._proc.cpu_percent(None)  # first call only sets the reference point
        self._init_gpu()
        self._t0 = self._clock()
        self._thread = threading.Thread(target=self._loop, name="perfkit-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MonitorResult:
        """Stop sampling (after one last sample) and return the result."""
        if self._thread is None:
            raise ParameterError("SystemMonitor.stop(): start() was not called")
        self._stop.set()
        self._thread.join()
        if self._handles:
            self._nvml_call(self._nvml.nvmlShutdown)
            self._handles = []
        return self.result()

    def result(self) -> MonitorResult:
        """The samples so far (safe to call while running)."""
        with self._lock:
            rows = tuple(dict(r) for r in self._rows)
        return MonitorResult(self.interval_s, rows, self._gpus, self.gpu_reason, tuple(sorted(self._warnings)))

    def __enter__(self) -> "SystemMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _loop(self) -> None:
        """The first sample comes one interval after start (CPU percentages need an interval to
        average over); stopping adds a last sample unless one was taken under half an interval ago."""
        _system_cpu()  # psutil keeps the system reference point per thread: set it here
        last = self._t0
        while not self._stop.wait(self.interval_s):
            last = self._sample()
        if not self._rows or self._clock() - last >= self.interval_s / 2:
            self._sample()

    def _sample(self) -> float:
        """Take one sample; returns its clock time."""
        row = {"time_s": self._clock() - self._t0, "cpu_process_percent": self._proc.cpu_percent(None),
               "cpu_system_percent": _system_cpu(), "rss_bytes": self._proc.memory_info().rss}
        for gpu, handle in zip(self._gpus, self._handles):
            row.update(self._gpu_row(gpu["label"], handle))
        with self._lock:
            self._rows.append(row)
        return row["time_s"] + self._t0

    def _init_gpu(self) -> None:
        if not self._want_gpu:
            self.gpu_reason = "GPU monitoring switched off (gpu=False)"
            return
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                self.gpu_reason = 'nvidia-ml-py is not installed (pip install "perfkit[workbook]")'
                return
            self._nvml = pynvml
        nv = self._nvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            self.gpu_reason = f"no NVIDIA driver or GPU (NVML: {exc})"
            return
        self._list_gpus(nv)
        if not self._handles:
            self.gpu_reason = self.gpu_reason or "NVML reports 0 GPUs"
            self._nvml_call(nv.nvmlShutdown)  # nvmlInit succeeded: balance it (NVML counts inits)

    def _list_gpus(self, nv) -> None:
        """Find the GPUs this process uses (once, here: the sampling thread never touches torch)."""
        try:
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
            uuids = [self._uuid(nv, h) for h in handles]
            match = match_gpus(uuids, torch_uuids=loaded_torch_uuids(),
                               visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
            self._gpus = tuple({"label": f"gpu{n if c is None else c}", "cuda_index": c, "nvml_index": n,
                                "name": _text(nv.nvmlDeviceGetName(handles[n])), "uuid": display_uuid(uuids[n])}
                               for c, n in match.pairs)
        except nv.NVMLError as exc:
            self.gpu_reason = f"NVML cannot list the GPUs: {exc} ({type(exc).__name__})"
            self._handles, self._gpus = [], ()
            return
        self._handles = [handles[g["nvml_index"]] for g in self._gpus]
        self.gpu_reason = match.reason
        self._warnings.update(match.warnings)

    def _uuid(self, nv, h) -> str | None:
        try:
            return _text(nv.nvmlDeviceGetUUID(h))
        except nv.NVMLError as exc:
            self._warnings.add(f"NVML cannot read a GPU's UUID ({exc}): it can only be matched by index")
            return None

    def _gpu_row(self, label: str, h) -> dict:
        nv = self._nvml
        readers = {
            "util_percent": lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu,
            "mem_used_bytes": lambda: nv.nvmlDeviceGetMemoryInfo(h).used,
            "power_w": lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0,  # NVML reports milliwatts
            "sm_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
        }
        return {f"{label}_{name}": self._nvml_read(label, name, read) for name, read in readers.items()}

    def _nvml_read(self, label: str, name: str, read) -> float:
        try:
            return float(read())
        except self._nvml.NVMLError as exc:
            self._warnings.add(f"{label} {name}: NVML cannot read it ({exc}); column is NaN")
            return math.nan

    def _nvml_call(self, fn) -> None:
        try:
            fn()
        except self._nvml.NVMLError as exc:
            self._warnings.add(f"NVML shutdown failed: {exc}")


def _system_cpu() -> float:
    import psutil

    return psutil.cpu_percent(None)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _gpu_text(g: dict) -> str:
    where = f"NVML {g['nvml_index']}" if g["cuda_index"] is None else f"cuda:{g['cuda_index']} = NVML {g['nvml_index']}"
    return f"{where} {g['name']}"


def _findings(r: MonitorResult) -> list[Finding]:
    out = []
    if not r.rows:
        return out
    frame = r.to_frame()
    for g in r.gpus:
        util = frame[f"{g['label']}_util_percent"].dropna()
        if len(util) and util.mean() < LOW_GPU_UTIL_PERCENT:
            out.append(Finding("high", f"GPU {g['label'][3:]} ({g['name']}) busy only {util.mean():.0f}% of the time",
                               {"mean_util_percent": float(util.mean()), "samples": len(util),
                                "nvml_index": g["nvml_index"], "uuid": g["uuid"]},
                               "profile a few steps (perfkit summary) to see whether the GPU waits on the "
                               "input pipeline, host-device syncs or kernel launches",
                               f"mean NVML utilization < {LOW_GPU_UTIL_PERCENT:.0f}%"))
    cpu = frame["cpu_process_percent"].dropna()
    if len(cpu) and cpu.mean() >= BUSY_CORE_PERCENT and (out or not r.gpu_names):
        out.append(Finding("medium", f"the process uses {cpu.mean():.0f}% CPU (a full core or more)",
                           {"mean_cpu_process_percent": float(cpu.mean())},
                           "a Python loop busy on one core: CPU-bound or launch-bound; try larger batches, "
                           "DataLoader workers, CUDA graphs or torch.compile",
                           f"mean process CPU >= {BUSY_CORE_PERCENT:.0f}% of one core"))
    return out
