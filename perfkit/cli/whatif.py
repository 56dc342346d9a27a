"""``perfkit whatif TRACE [--combine FIX,FIX] [--json]``: every fix replayed on the trace's steps, ranked by the
step time it buys; ``--combine``: those fixes replayed together."""
from __future__ import annotations

from ..analysis.step.diagnosis import diagnose
from ..analysis.step.whatif import combine, whatif
from ..errors import ParameterError
from ..report.terminal.whatif import format_whatif
from ..text import json_text
from ..trace import load_trace
from .parsers import add_whatif
from .paths import trace_arg


def register(subparsers) -> None:
    add_whatif(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache)
    d = diagnose(trace, path=args.trace, kernel_fix=False)
    data = dict(whatif(trace).to_json(), verdict=d.verdict, rule=d.rule, decided_by=d.decided_by,
                prediction=d.prediction)
    if args.combine is not None:
        try:
            data["combined"] = combine(trace, [n.strip() for n in args.combine.split(",") if n.strip()]).to_json()
        except ValueError as exc:
            raise ParameterError(f"--combine {args.combine}: {exc}") from None
    print(json_text(data) if args.json else format_whatif(data))
    return 0
