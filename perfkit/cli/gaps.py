"""``perfkit gaps TRACE [--json]``: every GPU idle interval, why it happened and in which function."""
from __future__ import annotations

from ..analysis.step.diagnosis import verdict_line
from ..analysis.step.gaps import gpu_gaps
from ..report.terminal.gaps import format_gaps
from ..text import json_text
from ..trace import load_trace
from .parsers import add_gaps
from .paths import say_load_warnings, trace_arg


def register(subparsers) -> None:
    add_gaps(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache)
    say_load_warnings("gaps", trace.warnings)
    result = gpu_gaps(trace)
    line = verdict_line(trace) if result.has_gpu else None
    if line is not None:
        line.pop("steps")
    print(json_text(dict(result.to_json(), diagnosis=line)) if args.json else
          format_gaps(result, args.trace, args.top, line))
    return 0
