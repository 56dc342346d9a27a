"""``perfkit diagnose TRACE [--json]``: one screen: the verdict, the three numbers behind it, the fix."""
from __future__ import annotations

from ..text import json_text


def register(subparsers) -> None:
    p = subparsers.add_parser("diagnose", help="what limits each step, the numbers behind it and the fix, on one screen")
    p.add_argument("trace", help=".json / .json.gz trace file or tensorboard_trace_handler directory")
    p.add_argument("--json", action="store_true", help="print one JSON object: verdict, steps, evidence, fix, "
                                                       "warm_up, outside_steps, warnings")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..analysis.diagnosis import diagnose
    from ..trace import load_trace

    result = diagnose(load_trace(args.trace, use_cache=not args.no_cache), path=args.trace)
    print(json_text(result.to_json()) if args.json else format_diagnosis(result))
    return 0


MAX_STEP_ROWS = 8


def format_diagnosis(d) -> str:
    """The one-screen text of a ``Diagnosis``."""
    lines = [f"verdict   {d.title}"]
    lines += [f"          - {n['text']}" for n in d.numbers]
    lines.append(f"fix       {d.fix}")
    steps = d.steps
    if len(steps) > 1:
        shown = steps.head(MAX_STEP_ROWS)
        many = steps["rank"].nunique() > 1
        lines.append("steps     " + "; ".join(
            f"{'rank %d ' % r.rank if many else ''}step {r.step}: {r.verdict} {r.wall_us / 1e3:,.2f} ms"
            for r in shown.itertuples()) + (f"; ... {len(steps) - len(shown)} more" if len(steps) > len(shown) else ""))
    lines.append(f"more      {d.command}")
    lines += [f"warning   {w}" for w in d.warnings]
    return "\n".join(lines) + "\n"
