"""``perfkit hotspots TRACE [--json] [--thread main|all|TID] [--collapsed FILE]``: host time by Python function."""
from __future__ import annotations

from ..analysis.step.hotspots import hotspots
from ..atomic import refuse_clobber
from ..report.terminal.hotspots import format_hotspots
from ..report.replies import reply_text
from ..text import json_text
from ..trace import load_trace
from .parsers import add_hotspots
from .paths import trace_arg


def register(subparsers) -> None:
    add_hotspots(subparsers).set_defaults(func=run)


def run(args) -> int:
    path = trace_arg(args.trace)
    if args.collapsed:
        refuse_clobber(args.collapsed, [("the input trace", path)])
    result = hotspots(load_trace(path, use_cache=not args.no_cache, run=args.run), thread=args.thread)
    if args.collapsed:
        result.write_collapsed(args.collapsed)
    if args.markdown:
        print(reply_text("hotspots", result.to_json(), budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(result.to_json()) if args.json else format_hotspots(result, args.top, args.collapsed))
    return 0
