"""``perfkit gaps TRACE [--json]``: every GPU idle interval, why it happened and in which function."""
from __future__ import annotations

from ..analysis.answers import gaps_answer
from ..analysis.step.gaps import gpu_gaps
from ..report.terminal.gaps import format_gaps
from ..report.replies import reply_text
from ..text import json_text
from ..trace import load_trace
from .parsers import add_gaps
from .paths import say_load_warnings, trace_arg


def register(subparsers) -> None:
    add_gaps(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache, run=args.run)
    say_load_warnings("gaps", trace.warnings)
    data = gaps_answer(trace)
    if args.markdown:
        print(reply_text("gaps", data, budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(data) if args.json else format_gaps(gpu_gaps(trace), args.trace, args.top, data["diagnosis"]))
    return 0
