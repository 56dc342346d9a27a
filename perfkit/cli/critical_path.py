"""``perfkit critical-path TRACE [--json] [--annotation NAME]``: what bounds each step, by kind."""
from __future__ import annotations

from ..analysis.step.critical_path import critical_path, path_note
from ..analysis.step.diagnosis import verdict_line
from ..report.terminal.critical_path import format_critical_path
from ..text import json_text
from ..trace import load_trace
from .parsers import add_critical_path
from .paths import trace_arg


def register(subparsers) -> None:
    add_critical_path(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache)
    result = critical_path(trace, annotation=args.annotation)
    line = verdict_line(trace)
    verdicts = line.pop("steps")
    data = dict(result.to_json(), diagnosis=line)
    for row in data["steps"]:  # each step's own verdict beside its path, and why they differ where they do
        row["verdict"] = verdicts.get((int(row["rank"]), int(row["step"])))
        row["why"] = path_note(row["bound_by"], row["verdict"]) if row["verdict"] else ""
    print(json_text(data) if args.json else format_critical_path(data))
    return 0
