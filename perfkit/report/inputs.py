"""Where an investigation's data comes from: a trace file or a live run of a reference workload.

Notebooks stay thin (STYLE 11): the choice between a trace file and a live run and the workload
setup live here, where tests reach them.

* ``find_trace(path)``: a trace file or a multi-rank trace folder, looked up from the working
  directory (the caller's, for ``perfkit run``), then the workbook root, then by name among the
  traces shipped with perfkit (files of ``data/traces/cpu``, multi-rank folders of ``data/traces/ranks``).
* ``find_rank_traces(pattern)``: the per-rank files of a multi-rank run (a folder or a glob).
* ``load_source(mode, trace_path, ...)``: a ``Source``: the ``Trace`` of a file (``mode="trace"``)
  or of a freshly recorded live run of a reference workload (``mode="live"``), with what it is
  (``subject``, for the perf log and the report) and the device it was recorded on.
* ``live_workload`` and ``detect_workload_syncs``: the live runs of the notebooks.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from glob import glob
from pathlib import Path

from ..errors import ParameterError, require
from .workbook import (SHIPPED_RANK_SETS, SHIPPED_TRACES, relative_name, shipped_rank_sets, shipped_traces,
                       workbook_root)

MODES = ("trace", "live")


def check_mode(mode: str) -> str:
    """``mode`` if it is "trace" or "live"; ParameterError otherwise."""
    if mode not in MODES:
        raise ParameterError(f"mode={mode!r}: use 'trace' (analyze trace_path) or 'live' (run a reference workload)")
    if mode == "live":
        require("torch", "mode='live' (it runs a reference workload)")
    return mode


def find_trace(path: str | os.PathLike) -> Path:
    """Resolve ``path`` (a trace file, or a folder of per-rank traces): as given (absolute or
    from the working directory), else from the workbook root, else as a file name among the
    shipped traces (files, then multi-rank folders). Raises ParameterError naming where it looked
    and the shipped traces."""
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"trace_path={path!r:.80}: give a trace file or folder as text, "
                             "e.g. \"mppi_float_tensor.json.gz\"")
    given = Path(path).expanduser()
    for candidate in (given, workbook_root() / given, SHIPPED_TRACES / given.name, SHIPPED_RANK_SETS / given.name):
        try:
            if str(path) and candidate.exists():
                return candidate.resolve()
        except OSError as exc:  # a name too long, a loop of links
            raise ParameterError(f"trace_path={str(path)!r:.80}: cannot be a path here ({exc.strerror})") from None
    raise ParameterError(f"trace_path={str(path)!r}: no such file (looked in the working directory {Path.cwd()}, "
                         f"the workbook {workbook_root()} and the shipped traces); shipped traces: "
                         f"{', '.join(shipped_traces() + shipped_rank_sets()) or 'none'}")


@dataclass(frozen=True)
class RankFiles:
    """The per-rank trace files of one run (sorted) and what they are (``subject``: "trace NAME",
    the folder or glob as a report may show it)."""

    paths: tuple
    subject: str


def find_rank_traces(pattern: str | os.PathLike) -> RankFiles:
    """The trace files of a multi-rank run: ``pattern`` is a folder of per-rank traces (resolved
    by ``find_trace``, so a shipped set is found by name), a glob such as
    ``runs/42/*.pt.trace.json.gz`` (from the working directory, else the workbook root) or one
    file. Raises ParameterError when the glob matches no trace file, TraceError for a folder
    without traces."""
    from ..trace.load import TRACE_SUFFIXES, resolve_paths

    text = str(pattern)
    if not any(c in text for c in "*?["):
        found = find_trace(pattern)
        return RankFiles(tuple(resolve_paths(found)), f"trace {relative_name(found)}")
    given = Path(text).expanduser()
    for base in (Path.cwd(), workbook_root()):
        paths = sorted(p for p in base.glob(str(given)) if p.is_file() and p.name.endswith(TRACE_SUFFIXES)) \
            if not given.is_absolute() else sorted(Path(p) for p in glob(str(given)) if p.endswith(TRACE_SUFFIXES))
        if paths:
            return RankFiles(tuple(p.resolve() for p in paths), f"trace {relative_name(paths[0].parent)}/{given.name}")
    raise ParameterError(f"trace_path={text!r}: the pattern matches no .json/.json.gz file (looked from the working "
                         f"directory {Path.cwd()} and the workbook {workbook_root()}); give a folder of per-rank "
                         f"traces, a glob, or a shipped set: {', '.join(shipped_rank_sets()) or 'none'}")


@dataclass(frozen=True)
class Source:
    """The trace an investigation reads and what it is: ``subject`` ("trace NAME" or "live
    WORKLOAD"; the perf log compares runs of one subject only), ``device``
    (the device the trace was recorded on, from the trace itself) and ``mode``."""

    trace: object
    subject: str
    device: str
    mode: str

    def __repr__(self) -> str:
        return f"Source({self.subject!r}, recorded on {self.device})"


def recorded_on(trace) -> str:
    """The device a trace was recorded on, from the trace: the first GPU's name ("cuda" or "rocm"
    when unnamed; a ROCm GPU's name followed by "(rocm)"), "<name> (GPU activity not recorded)" for a
    trace that lists GPUs and launched work but recorded no GPU events, or "cpu"."""
    backend = trace.backend
    named = [d.get("name") for d in trace.devices if isinstance(d, dict) and d.get("name")]
    if not trace.has_gpu_events:
        return f"{named[0]} (GPU activity not recorded)" if named and backend != "cpu" else "cpu"
    if not named:
        return backend
    return f"{named[0]} (rocm)" if backend == "rocm" else named[0]


def ranks_recorded_on(result) -> str:
    """The device a ``ranks`` result's traces were recorded on: the GPU name the rank files share
    ("cpu" without GPU events), or the names joined by " / " when they differ."""
    names = list(dict.fromkeys(d or "cpu" for d in result.devices.values()))
    return " / ".join(names) if names else "cpu"


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
    from ..trace import load_trace

    if check_mode(mode) == "trace":
        path = find_trace(trace_path)
        trace = load_trace(path)
        return Source(trace, f"trace {relative_name(path)}", recorded_on(trace), mode)
    trace = _record_live(workload, variant, device, steps, warmup, overrides)
    return Source(trace, live_subject(workload), recorded_on(trace), mode)


def live_subject(workload: str) -> str:
    """"live WORKLOAD": a live run's subject in the perf log. The variant and overrides are
    not part of it: switching ``item_logging`` to ``batched_metrics`` is the change a user wants
    the log to judge against the previous run (say what changed in ``change``)."""
    return f"live {workload}"


def _record_live(workload, variant, device, steps, warmup, overrides):
    from ..trace import load_trace
    from ..workloads.record import record_trace
    from ..workloads.registry import make_workload

    with tempfile.TemporaryDirectory(prefix="perfkit-live-") as tmp:
        with make_workload(workload, device, variant=variant, **_overrides(overrides)) as w:
            path = record_trace(w, Path(tmp) / f"{workload}_{variant or 'default'}.json.gz",
                                steps=steps, warmup=warmup)
        return load_trace(path)


def live_workload(workload: str, variant: str | None = None, device: str = "auto", overrides: dict | None = None):
    """``make_workload`` with a dict of overrides (the notebooks' ``overrides`` parameter)."""
    from ..workloads.registry import make_workload

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
    from ..detect.runtime import detect_syncs

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ParameterError(f"detect_steps={steps!r}: must be an integer >= 1")
    with live_workload(workload, variant, device, overrides) as w:
        w.step()
        with detect_syncs() as detector:
            for _ in range(steps):
                w.step()
    return detector.report
