"""torch's CUDA sync debug mode as a process-wide warning capture, shared by every detector.

``torch.cuda.set_sync_debug_mode("warn")`` makes c10's ``warn_or_error_on_sync`` issue a
``UserWarning`` starting with ``SYNC_DEBUG_MESSAGE`` (the rest is "(Triggered internally at
...)") for each sync it sees. The mode and Python's warnings filters are process-wide, so the
first ``acquire`` saves the mode, switches it to "warn" and installs a ``warnings.showwarning``
hook, and the last ``release`` restores all three, whichever threads acquired and released.

The warning is filtered with "always": Python's default action shows a warning once per
location, and the location of every sync is the same line (torch warns with stacklevel 1,
i.e. at the Python frame that called the op, which under a ``TorchFunctionMode`` is the
mode's dispatch), so a sync in a loop would be counted once. The hook calls ``on_sync()`` in
the thread that synced; it returns False when that thread has nothing to count, and the
warning is then shown only if the mode saved at ``acquire`` was already "warn".
"""
from __future__ import annotations

import functools
import threading
import warnings

SYNC_DEBUG_MESSAGE = "called a synchronizing CUDA operation"

_LOCK = threading.Lock()
_ACTIVE = {"users": 0, "restore": None, "warn_ctx": None}


def acquire(get_mode, set_mode, *, on_sync) -> None:
    """Start (or join) the capture. ``get_mode``/``set_mode`` are torch.cuda's
    ``get_sync_debug_mode``/``set_sync_debug_mode``. If starting fails, nothing stays changed."""
    with _LOCK:
        if _ACTIVE["users"] == 0:
            _install(get_mode, set_mode, on_sync)
        _ACTIVE["users"] += 1


def release() -> None:
    """Leave the capture; the last one out restores the mode, the filters and the hook."""
    with _LOCK:
        _ACTIVE["users"] -= 1
        if _ACTIVE["users"] == 0:
            _uninstall(_ACTIVE["warn_ctx"])


def _install(get_mode, set_mode, on_sync) -> None:
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    try:
        warnings.filterwarnings("always", message=SYNC_DEBUG_MESSAGE)
        saved = get_mode()
        warnings.showwarning = _hook(warnings.showwarning, saved, on_sync)
        _ACTIVE.update(restore=functools.partial(set_mode, saved), warn_ctx=ctx)
        set_mode("warn")
    except BaseException:
        _uninstall(ctx)
        raise


def _uninstall(ctx) -> None:
    restore = _ACTIVE["restore"]
    _ACTIVE.update(restore=None, warn_ctx=None)
    try:
        if restore is not None:
            restore()
    finally:
        ctx.__exit__(None, None, None)


def _hook(previous_show, saved_mode, on_sync):
    def show(message, category, filename, lineno, file=None, line=None):
        if SYNC_DEBUG_MESSAGE in str(message) and (on_sync() or saved_mode not in (1, "warn")):
            return  # counted, or a warning only our "warn" mode caused
        previous_show(message, category, filename, lineno, file, line)

    return show
