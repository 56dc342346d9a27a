"""``perfkit memory TRACE... [--json]``: memory over time per device from a trace recorded with
``profile_memory=True`` (``perfkit profile --memory``): peak and what allocated it, memory held at
each step's end and its growth per step, the top allocating ops. Of several traces (the README's
``traces/train-*.pt.trace.json.gz`` once there are two runs) the newest is read, and said on stderr."""
from __future__ import annotations

import os
import sys

from ..analysis.memory import recorded_memory
from ..report.terminal.memory import format_timeline
from ..report.replies import reply_text
from ..text import json_text, printable, printable_data
from ..trace import load_trace
from .parsers import add_memory
from .paths import say_load_warnings, trace_arg


def register(subparsers) -> None:
    add_memory(subparsers).set_defaults(func=run)


def run(args) -> int:
    path = newest([trace_arg(p) for p in args.traces])
    if len(args.traces) > 1:
        print(f"perfkit memory: {len(args.traces)} traces given; reading the newest, {printable(path)}",
              file=sys.stderr)
    trace = load_trace(path, progress=sys.stderr.isatty())
    timeline = recorded_memory(trace, top=args.top)
    say_load_warnings("memory", trace.warnings)
    if args.markdown:
        print(reply_text("memory", timeline.to_json(), budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(timeline.to_json(), indent=2) if args.json else format_timeline(printable_data(timeline.to_json())))
    return 0


def newest(paths: list[str]) -> str:
    """The most recently modified of ``paths`` (a pattern such as ``traces/train-*.pt.trace.json.gz``
    expands to every run's trace, oldest name first only by chance); one that cannot be read sorts first,
    so its loader error shows only when nothing else is readable."""
    def modified(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return float("-inf")

    return max(paths, key=modified)
