"""``perfkit whatif TRACE [--combine FIX,FIX] [--json]``: every fix replayed on the trace's steps, ranked by the
step time it buys; ``--combine``: those fixes replayed together."""
from __future__ import annotations

from ..analysis.answers import whatif_answer
from ..analysis.step.whatif import combine
from ..errors import ParameterError
from ..report.terminal.whatif import format_whatif
from ..report.replies import reply_text
from ..text import json_text
from ..trace import load_trace
from .parsers import add_whatif
from .paths import trace_arg


def register(subparsers) -> None:
    add_whatif(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache, run=args.run)
    data = whatif_answer(trace, path=args.trace)
    if args.combine is not None:
        try:
            data["combined"] = combine(trace, [n.strip() for n in args.combine.split(",") if n.strip()]).to_json()
        except ValueError as exc:
            raise ParameterError(f"--combine {args.combine}: {exc}") from None
    if args.markdown:
        print(reply_text("whatif", data, budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(data) if args.json else format_whatif(data))
    return 0
