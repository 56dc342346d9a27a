"""Run-time sync-point detector: which Python line forced the host to wait for the device.

``detect_syncs()`` installs one ``torch.overrides.TorchFunctionMode`` (it sees Tensor methods,
``__bool__``/``__float__``/``item`` included, and torch functions) and counts each call that
makes the host wait for queued device work, keyed by the *user* frame (frames inside torch,
perfkit and the standard library are skipped) and the operation::

    with perfkit.detect_syncs() as det:
        for _ in range(5):
            train_step()
    det.report.per_step(5)

On a CUDA machine only device tensors are flagged, and ``torch.cuda.set_sync_debug_mode("warn")``
also reports syncs the op table (``runtime_ops.sync_classifiers``) does not know (its warnings are
captured, not shown; ``perfkit.detect.syncdebug``).
Without a GPU, ``treat_cpu_as_device=True`` (the default there) treats CPU tensors as device
tensors, so the same script shows where it *would* sync. Calls issued from ``torch.optim`` and
``torch.utils.data`` on CPU tensors are not counted: those tensors stay on the host by design
(optimizer ``step`` counters, sampler indices) and do not sync on a GPU either.

The mode is per thread: work in other threads or DataLoader worker processes is not seen.
"""
from __future__ import annotations

import functools
import os
import sys
import sysconfig
import threading
from dataclasses import dataclass

import pandas as pd

from ..errors import ParameterError
from ..results import html_section, html_table, html_text, html_warnings
from . import syncdebug
from .runtime_ops import sync_classifiers
from .syncdebug import SYNC_DEBUG_MESSAGE  # noqa: F401  (re-exported)

__all__ = ["SyncEvent", "SyncReport", "SyncDetector", "detect_syncs"]

_COLUMNS = ["file", "line", "op", "count"]


@dataclass(frozen=True)
class SyncEvent:
    """``count`` calls of ``op`` that forced a device sync, issued from ``file:line``."""

    file: str
    line: int
    op: str
    count: int

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "op": self.op, "count": self.count}


@dataclass(frozen=True)
class SyncReport:
    """Sync points found inside a ``detect_syncs()`` block, most frequent first.

    ``mode`` is "cuda" (device tensors only), "cpu-as-device" (CPU tensors count as device
    tensors) or "no-device" (nothing could be flagged). ``error`` is set by
    ``perfkit.detect.script.run_script``
    when the script raised, exited non-zero or was interrupted; ``exit_status`` is the status
    the script would have exited with (0, its ``sys.exit``/``os._exit`` code, 1 for an
    exception, 130 for Ctrl-C).
    """

    events: tuple[SyncEvent, ...]
    mode: str
    sync_debug: bool = False
    warnings: tuple[str, ...] = ()
    error: str = ""
    exit_status: int = 0

    @property
    def total(self) -> int:
        """Number of syncing calls, all sites together."""
        return sum(e.count for e in self.events)

    def to_records(self) -> list[dict]:
        """``[{file, line, op, count}, ...]``, the JSON shape of ``perfkit detect --json``."""
        return [e.to_dict() for e in self.events]

    def to_frame(self) -> pd.DataFrame:
        """Columns: file, line, op, count (calls)."""
        return pd.DataFrame(self.to_records(), columns=_COLUMNS)

    def per_step(self, steps: int) -> pd.DataFrame:
        """``to_frame()`` plus ``per_step`` (syncs per step) when ``steps`` steps ran in the block."""
        if isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
            raise ParameterError(f"per_step(steps={steps!r}): steps must be a positive int, the number of steps run")
        frame = self.to_frame()
        frame["per_step"] = frame["count"] / steps
        return frame

    def __repr__(self) -> str:
        return f"SyncReport({len(self.events)} sites, {self.total} syncs, mode={self.mode!r})"

    def _repr_html_(self) -> str:
        parts = [html_warnings(self.warnings), html_table(self.to_frame())]
        if self.error:
            parts.insert(0, f"<p>script failed: {html_text(self.error)}</p>")
        return html_section(f"Sync points: {self.total} syncs at {len(self.events)} sites", *parts)


class SyncDetector:
    """Context manager returned by ``detect_syncs``; ``report`` is readable during and after.

    Re-entering the same detector, or nesting detectors, counts each call once per detector.
    Counts accumulate over several ``with`` blocks of the same detector.
    """

    def __init__(self, treat_cpu_as_device: bool | None = None):
        self._cpu_as_device = (not _cuda_available()) if treat_cpu_as_device is None else treat_cpu_as_device
        self._counts: dict[tuple[str, int, str], int] = {}
        self._depth = 0
        self._sync_debug = False
        self._cpu_calls = 0  # calls that would sync on device tensors but got CPU ones (cuda mode)

    def __enter__(self) -> "SyncDetector":
        if self._depth == 0:
            self._sync_debug = _attach(self) or self._sync_debug
        self._depth += 1
        return self

    def __exit__(self, *exc) -> bool:
        self._depth -= 1
        if self._depth == 0:
            _detach(self)
        return False

    def _flags(self, tensor) -> bool:
        if tensor is None or self._cpu_as_device or tensor.device.type != "cpu":
            return True
        self._cpu_calls += 1
        return False

    def _record(self, file: str, line: int, op: str) -> None:
        key = (file, line, op)
        self._counts[key] = self._counts.get(key, 0) + 1

    @property
    def report(self) -> SyncReport:
        """A snapshot of what was recorded so far."""
        events = sorted(
            (SyncEvent(f, ln, op, n) for (f, ln, op), n in self._counts.items()),
            key=lambda e: (-e.count, e.file, e.line, e.op),
        )
        cuda = _cuda_available()
        mode = "cpu-as-device" if self._cpu_as_device else ("cuda" if cuda else "no-device")
        warnings = _mode_warnings(mode, cuda) + (_cpu_tensor_warnings(self._cpu_calls, bool(events))
                                                 if mode == "cuda" else ())
        return SyncReport(tuple(events), mode, self._sync_debug, warnings)


def detect_syncs(treat_cpu_as_device: bool | None = None) -> SyncDetector:
    """Record every call inside the ``with`` block that would force a host-device sync.

    Ops (``SyncEvent.op``): item, bool, float, int, index, tolist, numpy, cpu, to(cpu), repr,
    format, in, equal, allclose, nonzero, argwhere, where(cond), masked_select, unique,
    bool-mask-index, bincount, repeat_interleave (tensor repeats, no ``output_size``),
    GradScaler.step (non-fused optimizer), and on CUDA to(device)/cuda/copy_ (blocking host
    copies) and ``sync-debug:<func>`` for what torch's sync debug mode reports beyond these.
    ``treat_cpu_as_device``: None (default) means True when no CUDA GPU is visible, else False.
    The detector's ``report`` is a ``SyncReport``; counts are calls.
    """
    if treat_cpu_as_device is not None and not isinstance(treat_cpu_as_device, bool):
        raise ParameterError(f"treat_cpu_as_device={treat_cpu_as_device!r}: use True, False or None (auto)")
    return SyncDetector(treat_cpu_as_device)


def _mode_warnings(mode: str, cuda: bool) -> tuple[str, ...]:
    if mode == "no-device":
        return ("no GPU: no CUDA device is visible and treat_cpu_as_device=False, so no tensor is on a "
                "device and no sync could be flagged; use treat_cpu_as_device=True to emulate one",)
    if mode == "cpu-as-device":
        why = "no CUDA GPU is visible" if not cuda else "treat_cpu_as_device=True"
        return (f"{why}: CPU tensors were treated as device tensors, so host-side tensor work counts "
                "too; run on a GPU for the exact set of device syncs",)
    return ()


def _cpu_tensor_warnings(calls: int, found: bool) -> tuple[str, ...]:
    """On a GPU machine a script whose tensors stay on the CPU syncs nothing: say so, since
    "0 syncs" then says nothing about the training it was meant to run on the GPU."""
    if not calls:
        return ()
    what = (f"{calls:,} call{'s' if calls != 1 else ''} that would wait for the GPU on a device tensor (.item(), "
            f".cpu(), nonzero, ...) ran on CPU tensors, which do not wait, and {'are' if calls != 1 else 'is'} not counted")
    if found:
        return (what,)
    return (f"{what}; no call synced on a GPU tensor: if the script should train on the GPU, its tensors stayed "
            "on the CPU (check its .to(device) calls); `perfkit detect --cpu-as-device` lists where it would sync "
            "on a GPU",)


# --- which calls sync ---------------------------------------------------------------------------

def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _sync_debug_api():
    """(get_mode, set_mode) of torch.cuda's sync debug mode, or None without CUDA."""
    if not _cuda_available():
        return None
    import torch

    return torch.cuda.get_sync_debug_mode, torch.cuda.set_sync_debug_mode


# --- where a call came from ------------------------------------------------------------------------

_USER, _INTERNAL, _SCALER, _HOST_LIB = range(4)
_KINDS: dict[str, int] = {}


@functools.lru_cache(maxsize=1)
def _internal_roots():
    import torch

    purelib = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    stdlib = sysconfig.get_paths()["stdlib"]
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep, here + os.sep, stdlib + os.sep, purelib


def _classify_file(filename: str) -> int:
    torch_dir, perfkit_dir, stdlib, purelib = _internal_roots()
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(torch_dir):
        rel = path[len(torch_dir):].replace(os.sep, "/")
        if rel.endswith("amp/grad_scaler.py"):
            return _SCALER
        return _HOST_LIB if rel.startswith(("optim/", "utils/data/")) else _INTERNAL
    workloads = os.path.join(perfkit_dir, "workloads") + os.sep
    if path.startswith(perfkit_dir) and not path.startswith(workloads):
        return _INTERNAL  # perfkit's reference workloads are user code: their syncs are the point
    if filename.startswith(("<frozen", "<eval_with_key")):  # fx-generated code
        return _INTERNAL
    in_stdlib = path.startswith(stdlib) and not any(path.startswith(p + os.sep) for p in purelib)
    return _INTERNAL if in_stdlib else _USER


def _locate(frame):
    """(file, line, outermost GradScaler method or None, passed through a host-side torch lib)."""
    scaler, host_lib = None, False
    while frame is not None:
        filename = frame.f_code.co_filename
        kind = _KINDS.get(filename)
        if kind is None:
            kind = _KINDS[filename] = _classify_file(filename)
        if kind == _USER:
            return filename, frame.f_lineno, scaler, host_lib
        if kind == _SCALER:
            scaler = frame.f_code.co_name
        host_lib = host_lib or kind == _HOST_LIB
        frame = frame.f_back
    return "<unknown>", 0, scaler, host_lib


# --- the shared mode, one per thread ---------------------------------------------------------------

class _ThreadState:
    def __init__(self):
        self.detectors: list[SyncDetector] = []
        self.mode = None
        self.funcs: list = []  # [func, already counted by sync debug] of the calls in progress
        self.quiet = 0
        self.sync_debug = False


_TLS = threading.local()


def _state() -> _ThreadState:
    if not hasattr(_TLS, "state"):
        _TLS.state = _ThreadState()
    return _TLS.state


def _dispatch(state: _ThreadState, func, args, kwargs):
    classify = sync_classifiers().get(func)
    hit = classify(args, kwargs) if classify is not None else None
    if hit is not None:
        op, subject, needs_device = hit
        flagged = [d for d in state.detectors if not needs_device or d._flags(subject)]
        if flagged and _record(flagged, op, subject, sys._getframe(1)):
            state.quiet += 1
            try:
                return func(*args, **kwargs)
            finally:
                state.quiet -= 1
    if not state.sync_debug:
        return func(*args, **kwargs)
    state.funcs.append([func, False])
    try:
        return func(*args, **kwargs)
    finally:
        state.funcs.pop()


def _record(detectors, op, subject, frame) -> bool:
    file, line, scaler, host_lib = _locate(frame)
    if host_lib and subject is not None and subject.device.type == "cpu":
        return False
    if scaler is not None:
        op = f"GradScaler.{scaler}"
    for d in detectors:
        d._record(file, line, op)
    return True


def _mode_class():
    from torch.overrides import TorchFunctionMode

    class _SyncMode(TorchFunctionMode):
        def __init__(self, state):
            super().__init__()
            self.state = state

        def __torch_function__(self, func, types, args=(), kwargs=None):
            return _dispatch(self.state, func, args, kwargs or {})

    return _SyncMode


def _attach(detector: SyncDetector) -> bool:
    """Register ``detector``; the first one in this thread installs the mode. True if sync debug is on."""
    state = _state()
    state.detectors.append(detector)
    if state.mode is None:
        mode = _mode_class()(state)
        mode.__enter__()
        state.mode = mode
        try:
            _start_sync_debug(state)
        except BaseException:
            _detach(detector)
            raise
    return state.sync_debug


def _detach(detector: SyncDetector) -> None:
    state = _state()
    state.detectors.remove(detector)
    if not state.detectors and state.mode is not None:
        mode, state.mode = state.mode, None
        try:
            _stop_sync_debug(state)
        finally:
            mode.__exit__(None, None, None)


def _start_sync_debug(state: _ThreadState) -> None:
    api = _sync_debug_api()
    if api is None:
        return
    syncdebug.acquire(*api, on_sync=_on_sync_warning)
    state.sync_debug = True


def _stop_sync_debug(state: _ThreadState) -> None:
    if state.sync_debug:
        state.sync_debug = False
        syncdebug.release()


def _on_sync_warning() -> bool:
    """Count a sync torch's debug mode reported in this thread, once per call and only when the
    op table did not already count it. False when this thread has no detector."""
    state = _state()
    if not state.sync_debug:
        return False
    call = state.funcs[-1] if state.funcs else None
    if state.quiet or (call is not None and call[1]):
        return True
    if call is not None:
        call[1] = True
    name = getattr(call[0], "__name__", "unknown") if call is not None else "unknown"
    _record(state.detectors, f"sync-debug:{name}", None, sys._getframe(1))
    return True
