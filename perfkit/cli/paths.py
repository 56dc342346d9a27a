"""Command-line paths as the command bodies use them, and the checks :func:`perfkit.cli.main` runs on
them before it imports a command's body (pandas, torch): a file argument that exists nowhere is refused
in a fraction of a second instead of after seconds of imports.

This module imports nothing heavy: :func:`trace_arg` imports the workbook's lookup when it runs.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import ParameterError
from ..profiling.target import check_target, is_launcher
from ..text import printable

_PACKAGE = Path(__file__).resolve().parents[1]


def trace_arg(path: str) -> str:
    """A trace argument as given when it exists, else found like a notebook's ``trace_path`` (from the
    workbook root; a bare name among the shipped traces, saying on stderr which one it read), so a
    command a report prints runs from the workbook root. Raises ParameterError where ``find_trace`` does
    (a path found nowhere, a bare name two shipped traces share)."""
    from ..workbook import find_trace, shipped_note  # imports the trace loader (pandas): only a body gets here

    if os.path.exists(path):
        return path
    found = find_trace(path)
    note = shipped_note(path, found)
    if note:
        print(f"perfkit: note: {printable(note)}", file=sys.stderr)
    return str(found)


def say_load_warnings(command: str, warnings) -> None:
    """Print on stderr what the loader set aside (events dropped for a bad value, stub steps), for a command
    whose own result does not carry the trace's warnings: a count over what is left must say it."""
    for warning in warnings:
        print(f"perfkit {command}: warning: {printable(warning)}", file=sys.stderr)


def check_traces(args) -> None:
    """Refuse the trace arguments (``args.trace``, ``args.traces``) that :func:`surely_missing` finds
    nowhere, with the loader's own message. Raises ParameterError."""
    given = getattr(args, "traces", None) or [getattr(args, "trace", None)]
    for path in given:
        if isinstance(path, str) and surely_missing(path):
            raise ParameterError(f"{path}: no such file or directory")


def surely_missing(path: str) -> bool:
    """Whether ``path`` exists nowhere :func:`trace_arg` could find it, checked without importing the
    workbook's lookup: not as given, not under the working directory, any folder above it or
    ``$PERFKIT_HOME`` (where the workbook root can be), and no file or folder of that name in the package
    (the shipped traces). Anything that may exist is left to the lookup itself."""
    given = Path(path).expanduser()
    if not path or os.path.lexists(given):
        return not path
    cwd = Path.cwd()
    home = os.environ.get("PERFKIT_HOME", "").strip()
    roots = [cwd, *cwd.parents] + ([Path(home).expanduser()] if home else [])
    if any(os.path.lexists(root / given) for root in roots):
        return False
    parts = path.replace(os.sep, "/").split("/")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] not in ("cpu", "gpu", "ranks")):
        return True  # a path with a folder in it is only ever that path: no shipped trace stands in for it
    return not any(given.name in dirs or given.name in files
                   for _, dirs, files in os.walk(_PACKAGE, followlinks=True))


def check_script(args) -> None:
    """Refuse a ``perfkit profile`` target that does not exist (:func:`perfkit.profiling.target.check_target`);
    a launcher (``torchrun``, ``python -m torch.distributed.run``) is the job's to find."""
    if not is_launcher(args.script, args.script_args):
        check_target(args.script, args.module)
