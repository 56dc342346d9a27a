"""``perfkit trace-diff A B [--json]``: what changed from trace A (baseline) to trace B (old name, still an
alias: ``perfkit diff``)."""
from __future__ import annotations

from ..analysis.trace_diff.diff import diff
from ..report.terminal.trace_diff import format_diff
from ..report.replies import reply_text
from ..text import json_text, printable_data
from ..trace import load_trace
from .parsers import add_trace_diff
from .paths import trace_arg


def register(subparsers) -> None:
    add_trace_diff(subparsers).set_defaults(func=run)


def run(args) -> int:
    a = load_trace(trace_arg(args.a), use_cache=not args.no_cache, run=args.run)
    b = load_trace(trace_arg(args.b), use_cache=not args.no_cache, run=args.run)
    result = diff(a, b)
    d = result.to_json(top=args.top)
    if args.markdown:
        print(reply_text("trace_diff", d, budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(d) if args.json else format_diff(printable_data(d)))
    return 0
