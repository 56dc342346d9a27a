"""The traces a ``perfkit mcp`` session has open, by handle (``t1``, ``t2``, ...): each loaded once, checked
against its files' fingerprints (``cache.stamp``: size, times, inode, the bytes at both ends) before every
use, so that a trace rewritten since ``open_trace`` is refused instead of answered from the old events."""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ..errors import ParameterError
from ..trace import Trace, load_trace
from ..trace.loader.cache import stamp
from .roots import Roots

MAX_OPEN = 8  # traces held at once: the oldest is closed when a ninth is opened (each can hold GBs of events)


@dataclass(frozen=True)
class Opened:
    """One open trace: its ``handle``, the path as the agent gave it, its real path and files with their
    fingerprints, and the loaded ``trace``."""

    handle: str
    given: str
    path: Path
    stamps: tuple
    trace: Trace

    @property
    def files(self) -> list[Path]:
        return [file for file, _ in self.stamps]


class Handles:
    """The open traces of one server, at most ``MAX_OPEN``, under ``roots``."""

    def __init__(self, roots: Roots, max_open: int = MAX_OPEN):
        self.roots, self.max_open = roots, max_open
        self._open: OrderedDict[str, Opened] = OrderedDict()
        self._count = 0

    def open(self, path) -> Opened:
        """Load the trace ``path`` names (inside the roots) and hold it under a new handle. Raises
        ParameterError for a path outside the roots, TraceError for a file that is not a trace."""
        real, files = self.roots.resolve(path)
        stamps = tuple((file, _stamp(file, path)) for file in files)
        trace = load_trace(str(real))
        self._count += 1
        opened = Opened(f"t{self._count}", path, real, stamps, trace)
        self._open[opened.handle] = opened
        while len(self._open) > self.max_open:
            self._open.popitem(last=False)
        return opened

    def get(self, handle) -> Opened:
        """The open trace of ``handle``, its files unchanged since it was opened. Raises ParameterError for a
        handle not open (never, or closed to make room) or a trace whose files changed (the handle is closed)."""
        opened = self._open.get(handle) if isinstance(handle, str) else None
        if opened is None:
            held = ", ".join(self._open) or "none"
            raise ParameterError(f"handle={str(handle)!r:.40} is not open (open now: {held}): call "
                                 f"open_trace(path) and use the handle it returns")
        for file, before in opened.stamps:
            try:
                now = stamp(file)
            except OSError:
                now = None
            if now != before:
                del self._open[handle]
                raise ParameterError(f"{file.name} changed (or went) since open_trace({opened.given!r}) gave "
                                     f"{handle}: call open_trace again for a handle on the file as it is now")
        self._open.move_to_end(handle)
        return opened


def _stamp(file: Path, given: str) -> dict:
    try:
        return stamp(file)
    except OSError as exc:
        raise ParameterError(f"{given}: {file.name} cannot be read ({exc.strerror or exc})") from None


def describe(opened: Opened) -> dict:
    """What ``open_trace`` answers: the handle, the path, bytes, events (as the files hold them, ``perfkit summary``'s
    count), ranks, devices, files, steps and warnings."""
    trace, steps = opened.trace, opened.trace.steps
    files = [{"rank": f.rank, "path": f.path, "events": int(f.events_read)} for f in trace.files]
    durations = steps["dur_us"] if len(steps) else None
    return {"handle": opened.handle, "path": str(opened.path), "bytes": sum(s["size"] for _, s in opened.stamps),
            "events": sum(int(f.events_read) for f in trace.files), "ranks": [int(r) for r in trace.ranks],
            "devices": sorted({str(d.get("name", "")) for d in trace.devices if d.get("name")}),
            "files": files,
            "steps": {"count": len(steps), "median_us": None if durations is None else float(durations.median()),
                      "rows": [{"rank": int(r), "step": int(s), "start_us": float(a), "dur_us": float(u)}
                               for r, s, a, u in zip(steps["rank"], steps["step"], steps["start_us"],
                                                     steps["dur_us"])]},
            "warnings": list(trace.warnings)}
