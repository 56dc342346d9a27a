"""Record a PyTorch profiler trace of a workload as gzipped Chrome-trace JSON.

``record_trace`` profiles ``wait + warmup + steps`` calls of ``workload.step()`` with a
``torch.profiler`` schedule, calling ``prof.step()`` after each so the trace has one
``ProfilerStep#N`` window per active step, and writes the trace atomically (temp file, then
``os.replace``) so a reader never sees half a file. The workload name, device and config go
into the trace metadata (``perfkit_workload``), so a trace says what produced it.
"""
from __future__ import annotations

import dataclasses
import errno
import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..atomic import atomic_write
from ..device import is_cuda
from ..errors import OutputError, ParameterError, PerfkitError, TraceError
from .base import check_int

MAX_PROFILED_STEPS = 10_000  # a profiled step adds its events to one in-memory trace: more is no profile to read

TRACE_SUFFIX = ".json.gz"


def record_trace(
    workload,
    path,
    steps: int = 3,
    warmup: int = 1,
    with_stack: bool = True,
    record_shapes: bool = True,
    profile_memory: bool = False,
    wait: int = 0,
) -> Path:
    """Profile ``steps`` active steps of ``workload`` (after ``wait`` skipped and ``warmup``
    warm-up steps) and write a gzipped Chrome trace to ``path`` (must end in ``.json.gz``).

    Activities: CPU always, CUDA when ``workload.device`` is a CUDA device. Returns the path.
    Raises ParameterError for a bad path or step counts, PerfkitError if no trace was produced.
    """
    path = _check_path(path)
    check_int("steps", steps, 1, MAX_PROFILED_STEPS)
    check_int("warmup", warmup, 0, MAX_PROFILED_STEPS)
    check_int("wait", wait, 0, MAX_PROFILED_STEPS)
    written: list[Path] = []

    def on_ready(prof) -> None:
        written.append(export_gzipped_trace(prof, path))

    options = {"with_stack": with_stack, "record_shapes": record_shapes, "profile_memory": profile_memory}
    with _profiler(workload, on_ready, wait, warmup, steps, options) as prof:
        prof.add_metadata_json("perfkit_workload", json.dumps(_metadata(workload)))
        for _ in range(wait + warmup + steps):
            workload.step()
            prof.step()
    if not written:
        raise PerfkitError(f"{path}: the profiler produced no trace; check that steps >= 1")
    return written[-1]


def _check_path(path) -> Path:
    path = Path(path)
    if not path.name.endswith(TRACE_SUFFIX):
        raise ParameterError(f"path={str(path)!r}: trace files are gzipped JSON, name it '*{TRACE_SUFFIX}'")
    if not path.parent.is_dir():
        raise ParameterError(f"path={str(path)!r}: directory {path.parent} does not exist; create it first")
    return path


def _profiler(workload, on_ready, wait: int, warmup: int, steps: int, options: dict):
    from torch.profiler import ProfilerActivity, profile, schedule

    activities = [ProfilerActivity.CPU]
    if is_cuda(workload.device):
        activities.append(ProfilerActivity.CUDA)
    return profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=steps, repeat=1),
        on_trace_ready=on_ready,
        **options,
    )


def _metadata(workload) -> dict:
    config = workload.config
    return {
        "name": workload.name,
        "device": workload.device,
        "config": dataclasses.asdict(config) if dataclasses.is_dataclass(config) else repr(config),
        "notes": list(getattr(workload, "notes", [])),
    }


def export_gzipped_trace(prof, path) -> Path:
    """Export ``prof``'s Chrome trace to ``path`` gzipped, atomically (temp file + os.replace)."""
    path = Path(path)
    fd, raw = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(raw)
        _check_whole(raw, path)
        atomic_write(path, lambda packed: _gzip_file(raw, packed))
    finally:
        os.remove(raw)
    return path


def _check_whole(raw: str, path: Path) -> None:
    """Raise OutputError when the profiler's own JSON writer stopped early: Kineto's C++ stream fails in
    silence past ``ulimit -f`` or on a full disk, and the cut-off JSON, gzipped, fitted the limit (a
    half-written trace stayed). A whole Chrome trace ends with the ``}`` that closes its object."""
    with open(raw, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - 256))
        whole = fh.read().rstrip(b" \t\r\n\x00").endswith(b"}")
    if not whole:
        cut = OutputError(path, f"the profiler's trace came out cut off after {size:,} bytes (a file-size limit, "
                          "ulimit -f, or a full disk while it wrote)", "free some space or raise the limit, and "
                          "profile again (nothing was kept)")
        cut.errno = errno.EFBIG  # no other folder would take it either
        raise cut


def _gzip_file(source: str, target: str) -> None:
    with open(source, "rb") as src, gzip.open(target, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)


def trace_event_counts(path) -> dict:
    """Counts in a (gzipped) Chrome trace: ``events`` (all traceEvents), ``profiler_steps``
    (``ProfilerStep#N`` windows), ``cpu_op``, ``python_function`` and ``kernel`` events.

    Raises TraceError when the file is not JSON or has no ``traceEvents`` list.
    """
    import orjson

    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            events = orjson.loads(f.read()).get("traceEvents")
    except (OSError, orjson.JSONDecodeError, AttributeError) as exc:
        raise TraceError(path, f"not a Chrome trace ({exc})", "re-record it with record_trace()") from exc
    if not isinstance(events, list):
        raise TraceError(path, "no traceEvents list", "re-record it with record_trace()")
    cats = [e.get("cat") for e in events if isinstance(e, dict)]
    steps = {e.get("name") for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    return {
        "events": len(events),
        "profiler_steps": len(steps),
        "cpu_op": cats.count("cpu_op"),
        "python_function": cats.count("python_function"),
        "kernel": cats.count("kernel"),
    }
