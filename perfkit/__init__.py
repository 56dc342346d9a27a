"""perfkit: performance investigation workbook for PyTorch training.

``import perfkit`` is light: torch, matplotlib, papermill and pynvml are imported only by the
functions that need them. The public API below is resolved lazily on first use.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    # trace
    "load_trace": "perfkit.trace", "Trace": "perfkit.trace", "export_parquet": "perfkit.export.parquet",
    # analyses
    "summarize": "perfkit.analysis.summary", "cpu_bound": "perfkit.analysis.step.cpu_bound",
    "htod": "perfkit.analysis.htod", "syncs": "perfkit.analysis.sync_points.find",
    "diff": "perfkit.analysis.trace_diff.diff",
    "ranks": "perfkit.analysis.ranks.combine", "sql": "perfkit.analysis.sql",
    "hotspots": "perfkit.analysis.step.hotspots", "memory_timeline": "perfkit.analysis.memory", "critical_path": "perfkit.analysis.step.critical_path",
    "gpu_gaps": "perfkit.analysis.step.gaps", "step_anatomy": "perfkit.analysis.step.anatomy",
    "diagnose": "perfkit.analysis.step.diagnosis", "kernels": "perfkit.analysis.gpu_kernels",
    "replay": "perfkit.analysis.step.simulation", "whatif": "perfkit.analysis.step.whatif",
    # recording the user's own code
    "profile": "perfkit.profiling.session", "watch": "perfkit.integrations.loop",
    # writers
    "annotate": "perfkit.export.annotate",
    # sync detectors
    "detect_syncs": "perfkit.detect.runtime", "scan": "perfkit.detect.static",
    # harnesses
    "compare": "perfkit.bench.compare", "compile_ab": "perfkit.bench.compile_ab", "amp_ab": "perfkit.bench.amp_ab",
    "htod_sweep": "perfkit.bench.htod", "hunt_leak": "perfkit.bench.leak",
    "load_memory_snapshot": "perfkit.analysis.memory_leak.memory_snapshot", "SystemMonitor": "perfkit.bench.monitor",
    "environment_report": "perfkit.bench.environment", "hardware_defaults": "perfkit.bench.environment",
    "load_profiler_memory_timeline": "perfkit.analysis.memory_leak.memory_snapshot", "snapshot_growth": "perfkit.analysis.memory_leak.growth",
    "memory_sweep": "perfkit.bench.memsweep", "workload_memory_sweep": "perfkit.bench.memsweep",
    "op_suite": "perfkit.bench.opsuite",
    # workloads and reports
    "make_workload": "perfkit.workloads.registry", "record_trace": "perfkit.workloads.record",
    "PerfLog": "perfkit.report.perflog", "run_notebook": "perfkit.report.publish.runner",
    "run_all": "perfkit.report.publish.runner", "validate": "perfkit.validation.suite",
    "closing_table": "perfkit.report.casestudy", "WriteupFigure": "perfkit.report.casestudy",
    # errors
    "PerfkitError": "perfkit.errors", "TraceError": "perfkit.errors", "ParameterError": "perfkit.errors",
    "OutputError": "perfkit.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perfkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
