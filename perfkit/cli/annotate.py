"""``perfkit annotate TRACE -o OUT.json.gz``: the trace plus perfkit's tracks, for Perfetto and chrome://tracing."""
from __future__ import annotations

import os
import sys

from ..export.annotate import annotate
from .parsers import add_annotate
from .paths import trace_arg


def register(subparsers) -> None:
    add_annotate(subparsers).set_defaults(func=run)


def run(args) -> int:
    result = annotate(trace_arg(args.trace), args.out, use_cache=not args.no_cache)
    added = ", ".join(f"{n:,} {ph}" for ph, n in sorted(result.added.items()))
    to_stdout = str(args.out) == "-" or os.path.realpath(str(args.out)) == os.path.realpath("/dev/stdout")
    print(f"wrote {result.path}: the original events plus {result.total_added:,} perfkit events ({added}); "
          "open it in ui.perfetto.dev or chrome://tracing", file=sys.stderr if to_stdout else sys.stdout)
    for warning in result.warnings:
        print(f"warning  {warning}", file=sys.stderr if to_stdout else sys.stdout)
    return 0
