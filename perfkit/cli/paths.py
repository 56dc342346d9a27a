"""Command-line paths as the command bodies use them (imported by the bodies, not by ``perfkit --help``)."""
from __future__ import annotations

import os

from ..errors import PerfkitError
from ..workbook import find_trace


def trace_arg(path: str) -> str:
    """A trace argument as given when it exists, else found like a notebook's ``trace_path`` (from the
    workbook root, then among the shipped traces by name), so a command a report prints runs from
    the workbook root; a path found nowhere is passed on unchanged for the loader's own error."""
    if os.path.exists(path):
        return path
    try:
        return str(find_trace(path))
    except PerfkitError:
        return path
