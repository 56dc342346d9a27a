"""``perfkit summary TRACE... [--json]``: whole-file counts of each trace."""
from __future__ import annotations

import sys

from ..analysis.summary import summarize
from ..report.terminal.summary import format_summary
from ..report.replies import reply_text
from ..text import json_text, printable_data
from ..trace import load_trace
from .parsers import add_summary
from .paths import trace_arg


def register(subparsers) -> None:
    add_summary(subparsers).set_defaults(func=run)


def run(args) -> int:
    for source in args.traces:
        trace = load_trace(trace_arg(source), use_cache=not args.no_cache, salvage=args.salvage,
                           progress=sys.stderr.isatty(), run=args.run)
        summary = summarize(trace)
        if args.markdown:
            print(reply_text("summary", summary, budget=args.budget, cursor=args.cursor))
        else:
            print(json_text(summary) if args.json else format_summary(printable_data(summary)))
    return 0
