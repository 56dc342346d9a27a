"""``perfkit detect SCRIPT [ARGS...] [--json]``: run a script and list the lines that forced a device sync.

Options of the script itself go after ``--``: ``perfkit detect train.py --json -- --steps 3``.
A script that raises, exits non-zero or is interrupted still prints what was found, then the
error, and exits with the script's status (1 for an exception, 130 for Ctrl-C).
"""
from __future__ import annotations

import sys

from ..detect.runtime import SyncReport
from ..detect.script import run_script
from ..text import json_text, printable
from .parsers import add_detect


def register(subparsers) -> None:
    add_detect(subparsers).set_defaults(func=run)


def run(args) -> int:
    report = run_script(args.script, args.script_args, treat_cpu_as_device=True if args.cpu_as_device else None)
    print(json_text(report.to_records(), indent=2) if args.json else format_table(report))
    if report.error:
        print(f"perfkit detect: {printable(args.script)} failed: {printable(report.error)}", file=sys.stderr)
        return report.exit_status or 1
    return 0


def format_table(report: SyncReport) -> str:
    """Human table: count, op, file:line, most frequent first; mode warnings after. Names are
    shown printable (an escape or newline in a file name cannot break or recolour the table)."""
    lines = [f"{report.total} syncs at {len(report.events)} sites (mode: {report.mode})"]
    if report.events:
        ops = [printable(e.op) for e in report.events]
        width = max(map(len, ops))
        lines.append(f"{'count':>7}  {'op':<{width}}  location")
        lines += [f"{e.count:>7}  {op:<{width}}  {printable(e.file)}:{e.line}" for e, op in zip(report.events, ops)]
    lines += [f"note: {printable(w)}" for w in report.warnings]
    return "\n".join(lines)
