"""``perfkit detect SCRIPT [ARGS...] [--json]``: run a script and list the lines that forced a device sync.

Options of the script itself go after ``--``: ``perfkit detect train.py --json -- --steps 3``.
A script that raises, exits non-zero or is interrupted still prints what was found, then the
error, and exits with the script's status (1 for an exception, 130 for Ctrl-C).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..text import json_text, printable

if TYPE_CHECKING:
    from ..detect.runtime import SyncReport


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "detect", help="run a Python script and report the lines that force a host-device sync",
        description=__doc__.split("\n\n", 1)[0])
    p.add_argument("script", help="Python script to run as __main__")
    p.add_argument("script_args", nargs="*", metavar="ARGS",
                   help="arguments for the script (put options after `--`)")
    p.add_argument("--json", action="store_true", help="print a JSON list of {file, line, op, count}")
    p.set_defaults(func=run, unknown_args_hint="options of the script go after `--`: "
                                                "perfkit detect SCRIPT [--json] -- --epochs 1")


def run(args) -> int:
    from ..detect.script import run_script  # pandas: imported when the command runs, not by --help

    report = run_script(args.script, args.script_args)
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
