"""``perfkit critical-path TRACE [--json] [--annotation NAME]``: what bounds each step, by kind."""
from __future__ import annotations

from ..analysis.answers import critical_path_answer
from ..report.terminal.critical_path import format_critical_path
from ..report.replies import reply_text
from ..text import json_text
from ..trace import load_trace
from .parsers import add_critical_path
from .paths import trace_arg


def register(subparsers) -> None:
    add_critical_path(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache, run=args.run)
    data = critical_path_answer(trace, annotation=args.annotation)
    if args.markdown:
        print(reply_text("critical_path", data, budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(data) if args.json else format_critical_path(data))
    return 0
