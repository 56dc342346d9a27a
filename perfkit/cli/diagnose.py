"""``perfkit diagnose TRACE [--json]``: one screen: the verdict, the three numbers behind it, the fix."""
from __future__ import annotations

from ..text import json_text
from . import trace_arg


def register(subparsers) -> None:
    p = subparsers.add_parser("diagnose", help="what limits each step, the numbers behind it and the fix, on one screen")
    p.add_argument("trace", help=".json / .json.gz trace file or tensorboard_trace_handler directory")
    p.add_argument("--json", action="store_true", help="print one JSON object: verdict, steps, evidence, fix, "
                                                       "warm_up, outside_steps, warnings")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.step.diagnosis import diagnose
    from ..trace import load_trace

    result = diagnose(load_trace(trace_arg(args.trace), use_cache=not args.no_cache), path=args.trace)
    print(json_text(result.to_json()) if args.json else result.text())
    return 0
