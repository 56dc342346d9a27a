"""``run_script``: run a Python script as ``__main__`` under the run-time sync detector
(:mod:`perfkit.detect.runtime`) and always come back with a report; ``run_as_main`` runs a script
or module the same way inside any context manager (``perfkit profile`` uses it for the profiler).

The script is the user's, so it may exit in every way a program can: raise, ``sys.exit(n)``,
``os._exit(n)`` (which would end perfkit before it prints anything), Ctrl-C, or fork a child
that returns from the script too (and would print a second report). Each way still gives exactly
one report, from the original process, with the script's exit status.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib.machinery
import importlib.util
import io
import os
import runpy
import sys
import threading
import traceback
import types
import zipfile
from pathlib import Path

from ..errors import ParameterError
from .runtime import SyncReport, detect_syncs

__all__ = ["run_script", "run_as_main"]


def run_script(script, args=(), *, treat_cpu_as_device: bool | None = None) -> SyncReport:
    """Run a Python script as ``__main__`` under ``detect_syncs()`` with ``sys.argv = [script, *args]``.

    A script that raises, exits non-zero (``sys.exit`` or ``os._exit``) or is interrupted
    (Ctrl-C) still yields the events found so far, with the reason in ``SyncReport.error`` and its
    exit status in ``SyncReport.exit_status``. ``os._exit`` in the script's main thread is turned
    into an unwinding exit so the report can be made (the script's ``finally`` blocks run).
    A process the script forks that returns here exits at once with its own status, so only the
    original process reports. Raises ParameterError when the script does not exist.
    """
    detector = detect_syncs(treat_cpu_as_device)
    error, status = run_as_main(script, args, detector, found="the syncs found until then are listed")
    report = detector.report
    return SyncReport(report.events, report.mode, report.sync_debug, report.warnings, error, status)


def run_as_main(target, args, context, *, module: bool = False, found: str = "what was found is kept",
                command: str = "perfkit detect") -> tuple[str, int]:
    """Run script ``target`` (or, with ``module=True``, module ``target`` like ``python -m``) as
    ``__main__`` inside the context manager ``context``, with ``sys.argv = [target, *args]``.

    Returns (error text, exit status) the way :func:`run_script` reports them (``found`` ends the
    Ctrl-C message). sys.argv, sys.path and os._exit are restored afterwards; a forked child that
    returns here exits with its own status (``command`` names it in its message).
    Raises ParameterError when the script or module does not exist.
    """
    path = _check_target(target, module)
    saved_argv, saved_path, saved_exit = sys.argv, list(sys.path), os._exit
    sys.argv = [str(path if module else target), *map(str, args)]
    sys.path.insert(0, os.getcwd() if module else str(path.parent))
    parent = os.getpid()
    os._exit = _unwinding_exit(parent, saved_exit)
    try:
        error, status = _run(context, path, target if module else None, found)
    finally:
        sys.argv, sys.path[:], os._exit = saved_argv, saved_path, saved_exit
    if os.getpid() != parent:  # a forked child came back here: it must not print a second report
        _leave_child(status, error, saved_exit, command)
    return error, status


def _check_target(target, module: bool) -> Path:
    """The script's resolved path, or a module's file (found without running it)."""
    if module:
        try:
            spec = importlib.util.find_spec(str(target))
        except (ImportError, ValueError):
            spec = None
        if spec is None or spec.origin is None:
            raise ParameterError(f"module {str(target)!r} not found: pass an importable module name "
                                 "(run from the folder that holds it, or install it)")
        return Path(spec.origin)
    path = Path(target)
    if not path.is_file():
        raise ParameterError(f"script {str(target)!r} not found: pass the path of a Python file to run")
    return path.resolve()


class _ScriptExit(BaseException):
    """``os._exit(code)`` called by the script, unwound so that the report is still made."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _unwinding_exit(parent: int, real_exit):
    def _exit(code):
        if os.getpid() == parent and threading.current_thread() is threading.main_thread():
            raise _ScriptExit(code)
        real_exit(code)  # a forked child or another thread: exit as the script asked

    return _exit


def _run(context, path: Path, module: str | None, found: str) -> tuple[str, int]:
    """(error text, exit status) of running the script (or module) inside ``context``. An error
    entering ``context`` (perfkit's own set-up: a --step that names nothing) propagates: it is not
    the script's failure."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(context)
        return _run_inside(path, module, found)


def _run_inside(path: Path, module: str | None, found: str) -> tuple[str, int]:
    try:
        if module is None:
            run_file(path)
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        return _exit_reason(exc.code, "script exited with status")
    except _ScriptExit as exc:
        return _exit_reason(exc.code, "script called os._exit with status")
    except KeyboardInterrupt:
        return f"interrupted (KeyboardInterrupt): {found}", 130
    except Exception as exc:  # the script's own error: report it after the events
        return _describe_error(exc, path), 1
    return "", 0


def run_file(path: Path) -> None:
    """Run the script file ``path`` (resolved) as ``python script.py`` runs it, ``sys.argv[0]`` being the script
    as given: a new ``__main__`` module whose ``__file__`` is ``sys.argv[0]`` made absolute the way Python makes
    it (joined to the working directory, not normalized), a ``SourceFileLoader`` as ``__loader__``, ``__spec__``
    and ``__package__`` None (``runpy.run_path`` replaced ``sys.argv[0]`` with the resolved path and left
    ``__loader__`` None). Its code's file name stays the resolved path, which ``--step`` watches for. A zip
    archive goes through ``runpy``."""
    if not path.is_file() or zipfile.is_zipfile(path):
        runpy.run_path(str(path), run_name="__main__")
        return
    with io.open_code(str(path)) as fh:
        code = compile(fh.read(), str(path), "exec", dont_inherit=True)
    given = sys.argv[0] if sys.argv and sys.argv[0] else str(path)
    file = given if os.path.isabs(given) else os.path.join(os.getcwd(), given)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=file, __cached__=None, __package__=None, __spec__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", file),
                         __builtins__=builtins)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)  # noqa: S102 (the user's own script, as python would run it)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _exit_reason(code, what: str) -> tuple[str, int]:
    if code is None or code == 0:
        return "", 0
    if isinstance(code, int) and not isinstance(code, bool):
        return f"{what} {code}", code
    return f"script exited: {code}", 1  # sys.exit("message") exits 1 after printing it


def _leave_child(status: int, error: str, real_exit, command: str) -> None:
    if error and status != 0:
        print(f"{command}: forked process {os.getpid()}: {error}", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    real_exit(status & 0xFF)


def _describe_error(exc: Exception, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"
