"""``perfkit diagnose TRACE [--json]``: one screen: the verdict, the three numbers behind it, the fix."""
from __future__ import annotations

from ..analysis.step.diagnosis import diagnose
from ..report.terminal.diagnose import diagnosis_text
from ..report.replies import reply_text
from ..text import json_text
from ..trace import load_trace
from .parsers import add_diagnose
from .paths import trace_arg


def register(subparsers) -> None:
    add_diagnose(subparsers).set_defaults(func=run)


def run(args) -> int:
    result = diagnose(load_trace(trace_arg(args.trace), use_cache=not args.no_cache, run=args.run), path=args.trace)
    if args.markdown:
        print(reply_text("diagnose", result.to_json(), budget=args.budget, cursor=args.cursor))
    else:
        print(json_text(result.to_json()) if args.json else diagnosis_text(result))
    return 0
