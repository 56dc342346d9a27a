"""``perfkit sync-points TRACE [--json]`` (old name, still an alias: ``perfkit syncs``): every host-device
sync point, ranked by blocked time, and the host scalar reads that did not wait (listed apart, not counted)."""
from __future__ import annotations

from ..analysis.sync_points.find import syncs
from ..report.terminal.sync_points import format_syncs
from ..report.replies import reply_text
from ..text import json_text, printable_data
from ..trace import load_trace
from .parsers import add_sync_points
from .paths import say_load_warnings, trace_arg


def register(subparsers) -> None:
    add_sync_points(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache, run=args.run)
    say_load_warnings("sync-points", trace.warnings)
    result = syncs(trace)
    if args.markdown:
        print(reply_text("sync_points", result.to_json(), budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(result.to_json()) if args.json else format_syncs(printable_data(result.to_json()), args.top))
    return 0
