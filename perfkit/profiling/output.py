"""Writing a recorded trace where ``perfkit profile --out`` asked, whatever the script did to that folder.

The folder is made absolute before the script runs (:func:`perfkit.profiling.session.trace_path`); here it
is created again when the script deleted it, and a folder that cannot be written (read-only, a file in the
way) gives way to a temporary file, named in a warning. A full disk loses the trace: its partial files
are removed and the reason is returned, never raised into the script's ``optimizer.step()``.
"""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from ..errors import OutputError
from ..workloads.record import export_gzipped_trace

_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_NOWHERE = _NO_SPACE | {errno.EFBIG}  # no other folder would take the trace: no fallback


def write_trace(prof, path, export=export_gzipped_trace) -> tuple[Path | None, str]:
    """(path written, note) for ``prof``'s trace at ``path``: (path, "") when written there; (a temporary
    file, why) when ``path``'s folder could not be written; (None, why) when the disk is full or no
    place could be written. Partial files are removed. ``export(prof, path)`` writes (injectable for tests)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return export(prof, path), ""
    except (OSError, RuntimeError) as exc:  # torch raises RuntimeError for a failed save
        _remove_partials(path)
        reason = _reason(exc)
        if _errno(exc) in _NOWHERE:
            return None, f"could not write the trace to {path}: {reason}; free some space and profile again"
    fd, name = tempfile.mkstemp(prefix=path.name.split(".")[0] + "-", suffix=".pt.trace.json.gz")
    os.close(fd)
    fallback = Path(name)
    try:
        return export(prof, fallback), (f"could not write the trace to {path} ({reason}): it was written to "
                                        f"{fallback} instead; move it where it belongs")
    except (OSError, RuntimeError) as exc:
        _remove_partials(fallback)
        fallback.unlink(missing_ok=True)
        return None, f"could not write the trace to {path} ({reason}) nor to {fallback} ({_reason(exc)})"


def _errno(exc: BaseException):
    return getattr(exc, "errno", None) or getattr(exc.__cause__, "errno", None)


def _reason(exc: BaseException) -> str:
    if _errno(exc) in _NO_SPACE:
        return "no space left on device"
    if isinstance(exc, OutputError):
        return exc.reason
    return getattr(exc, "strerror", None) or str(exc)


def _remove_partials(path: Path) -> None:
    """Remove the half-written trace and the temporary files of :func:`export_gzipped_trace` beside it."""
    for partial in [path, *path.parent.glob(f".{path.name}.*")] if path.parent.is_dir() else []:
        try:
            if partial.name != path.name or partial.stat().st_size > 0:
                partial.unlink()
        except OSError:
            pass


def release(path) -> None:
    """Remove the empty file :func:`perfkit.profiling.session.trace_path` reserved when nothing was written into it."""
    try:
        if Path(path).stat().st_size == 0:
            Path(path).unlink()
    except OSError:
        pass
