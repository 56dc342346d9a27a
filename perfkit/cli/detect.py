"""``perfkit detect SCRIPT [ARGS...] [--json]``: run a script and list the lines that forced a device sync.

Options of the script itself go after ``--``: ``perfkit detect train.py --json -- --steps 3``.
A script that raises still prints what was found, then the error, and exits 1.
"""
from __future__ import annotations

import json
import sys

from ..detect.runtime import SyncReport, run_script


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "detect", help="run a Python script and report the lines that force a host-device sync",
        description=__doc__.split("\n\n", 1)[0])
    p.add_argument("script", help="Python script to run as __main__")
    p.add_argument("script_args", nargs="*", metavar="ARGS",
                   help="arguments for the script (put options after `--`)")
    p.add_argument("--json", action="store_true", help="print a JSON list of {file, line, op, count}")
    p.set_defaults(func=run)


def run(args) -> int:
    report = run_script(args.script, args.script_args)
    print(json.dumps(report.to_records(), indent=2) if args.json else format_table(report))
    if report.error:
        print(f"perfkit detect: {args.script} failed: {report.error}", file=sys.stderr)
        return 1
    return 0


def format_table(report: SyncReport) -> str:
    """Human table: count, op, file:line, most frequent first; mode warnings after."""
    lines = [f"{report.total} syncs at {len(report.events)} sites (mode: {report.mode})"]
    if report.events:
        width = max(len(e.op) for e in report.events)
        lines.append(f"{'count':>7}  {'op':<{width}}  location")
        lines += [f"{e.count:>7}  {e.op:<{width}}  {e.file}:{e.line}" for e in report.events]
    lines += [f"note: {w}" for w in report.warnings]
    return "\n".join(lines)
