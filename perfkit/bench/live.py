"""Where an investigation's data comes from when it is recorded now: a live run of a reference workload.

Notebooks stay thin (STYLE 11): the choice between a trace file and a live run, the workload set-up
and the thread count live here, where tests reach them.

* ``load_source(mode, trace_path, ...)``: a ``Source``: the ``Trace`` of a file (``mode="trace"``,
  :func:`perfkit.workbook.trace_source`) or of a freshly recorded live run of a reference workload
  (``mode="live"``), with its subject and the device it was recorded on.
* ``load_pair``: the before and after ``Source`` of a case study.
* ``live_workload`` and ``detect_workload_syncs``: the live runs of the notebooks.
* ``use_threads`` and ``quiet_profiler_log``: the settings a case study's live runs use.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..detect.runtime import detect_syncs
from ..errors import ParameterError
from ..trace import load_trace
from ..trace.model import recorded_on
from ..workbook import Source, check_mode, trace_source
from ..workloads.record import record_trace
from ..workloads.registry import make_workload


def load_source(mode: str, trace_path: str | os.PathLike = "", *, workload: str = "ppo",
                variant: str | None = None, device: str = "auto", steps: int = 3, warmup: int = 1,
                overrides: dict | None = None) -> Source:
    """The ``Source`` this investigation reads.

    ``mode="trace"``: ``load_trace(find_trace(trace_path))``. ``mode="live"``: build
    ``make_workload(workload, device, variant=variant, **overrides)``, record ``steps`` profiled
    steps after ``warmup`` with ``record_trace`` into a temporary file and load it (the Trace
    keeps its data in memory; the file is removed). Raises ParameterError for a bad mode,
    path, workload, variant or override.
    """
    if check_mode(mode) == "trace":
        return trace_source(trace_path, mode)
    trace = _record_live(workload, variant, device, steps, warmup, overrides)
    return Source(trace, live_subject(workload), recorded_on(trace), mode)


def live_subject(workload: str) -> str:
    """"live WORKLOAD": a live run's subject in the perf log. The variant and overrides are
    not part of it: switching ``item_logging`` to ``batched_metrics`` is the change a user wants
    the log to judge against the previous run (say what changed in ``change``)."""
    return f"live {workload}"


def _record_live(workload, variant, device, steps, warmup, overrides):
    with tempfile.TemporaryDirectory(prefix="perfkit-live-") as tmp:
        with make_workload(workload, device, variant=variant, **_overrides(overrides)) as w:
            path = record_trace(w, Path(tmp) / f"{workload}_{variant or 'default'}.json.gz",
                                steps=steps, warmup=warmup)
        return load_trace(path)


def live_workload(workload: str, variant: str | None = None, device: str = "auto", overrides: dict | None = None):
    """``make_workload`` with a dict of overrides (the notebooks' ``overrides`` parameter)."""
    return make_workload(workload, device, variant=variant, **_overrides(overrides))


def _overrides(overrides) -> dict:
    """The notebooks' ``overrides`` parameter: a dict of config fields (None: none)."""
    if overrides is not None and not isinstance(overrides, dict):
        raise ParameterError(f"overrides={overrides!r:.80}: give the workload's config fields as a dict, "
                             "e.g. {\"samples\": 256}")
    return dict(overrides or {})


def detect_workload_syncs(workload: str, variant: str | None = None, *, device: str = "auto", steps: int = 2,
                          overrides: dict | None = None):
    """Run one warm-up step of the workload, then ``steps`` steps under ``detect_syncs()``;
    returns the ``SyncReport`` (syncing calls by source line; ``per_step(steps)`` normalizes)."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ParameterError(f"detect_steps={steps!r}: must be an integer >= 1")
    with live_workload(workload, variant, device, overrides) as w:
        w.step()
        with detect_syncs() as detector:
            for _ in range(steps):
                w.step()
    return detector.report


def load_pair(mode: str, paths: tuple[str, str], *, workload: str, arms: tuple, device: str = "auto",
              steps: int = 3, warmup: int = 1, overrides: dict | None = None) -> tuple[Source, Source]:
    """(before, after): ``load_source`` of each of ``paths`` (trace mode) or of each of ``arms``
    (``ladder.Arm``: variant and overrides on top of ``overrides``) recorded for ``steps`` steps
    on ``device`` (live mode). Raises ParameterError for a bad mode, path, variant or field."""
    out = []
    for path, arm in zip(paths, arms):
        extra = {**dict(overrides or {}), **arm.overrides}
        out.append(load_source(check_mode(mode), path, workload=workload, variant=arm.variant, device=device,
                               steps=steps, warmup=warmup, overrides=extra))
    return out[0], out[1]


def use_threads(threads: int) -> int:
    """Set torch's intra-op thread count for the live runs and harnesses of a case study and return
    the count in effect; 0 leaves it as it is. One thread gives stable CPU timings on a shared
    machine (small ops on two busy cores measured 8 ms to 650 ms per PPO step with 2 threads, a
    steady 8 ms with 1; the traces in data/traces were recorded with 1). Raises ParameterError
    for a negative or non-integer count."""
    import torch

    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ParameterError(f"threads={threads!r}: pass 0 (leave torch's default) or a positive int")
    if threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def quiet_profiler_log() -> str:
    """Set ``KINETO_LOG_LEVEL=6`` unless it is set, and return the level in effect. Kineto (the
    profiler's engine) prints "profiler_start"/"profiler_stop" lines to stderr on every profiling
    session: 20 lines for one memory sweep, which a report shows as console output. It reads the
    level when the process first profiles, so call this before. Its errors go with them; a
    recording that lost its GPU events is still named by perfkit's own warnings ("no GPU events")."""
    import os

    return os.environ.setdefault("KINETO_LOG_LEVEL", "6")
