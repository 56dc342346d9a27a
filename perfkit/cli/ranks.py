"""``perfkit ranks DIR|FILE... [--json] [--engine local|dask]``: the cross-rank view of a
multi-rank run: per-rank step time, GPU busy, compute vs comm and overlap, DataLoader, syncs,
time waiting for peers, stragglers and collective arrival skew."""
from __future__ import annotations

import sys

from ..analysis.ranks.combine import ranks
from ..report.terminal.ranks import format_ranks
from ..report.replies import reply_text
from ..text import json_text
from .parsers import add_ranks


def register(subparsers) -> None:
    add_ranks(subparsers).set_defaults(func=run)


def run(args) -> int:
    source = args.traces[0] if len(args.traces) == 1 else args.traces
    result = ranks(source, engine=args.engine, scheduler=args.scheduler, workers=args.workers,
                   use_cache=not args.no_cache, progress=sys.stderr.isatty(), run=args.run)
    if args.markdown:
        print(reply_text("ranks", result.to_json(), budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(result.to_json()) if args.json else format_ranks(result.to_json()))
    return 0
