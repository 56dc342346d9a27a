"""``perfkit annotate TRACE -o OUT.json.gz``: the trace plus perfkit's tracks, for Perfetto and chrome://tracing."""
from __future__ import annotations

from . import trace_arg


def register(subparsers) -> None:
    p = subparsers.add_parser("annotate", help="write the trace plus critical-path, GPU-gap and finding tracks and "
                                               "GPU counters, to open in ui.perfetto.dev or chrome://tracing")
    p.add_argument("trace", help="one .json / .json.gz trace file")
    p.add_argument("-o", "--out", required=True, help="output trace (.json, or .json.gz to compress)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..export.annotate import annotate

    result = annotate(trace_arg(args.trace), args.out, use_cache=not args.no_cache)
    added = ", ".join(f"{n:,} {ph}" for ph, n in sorted(result.added.items()))
    print(f"wrote {result.path}: the original events plus {result.total_added:,} perfkit events ({added}); "
          "open it in ui.perfetto.dev or chrome://tracing")
    return 0
