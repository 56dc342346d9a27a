"""``perfkit scan PATH... [--json] [--rules a,b] [--fail-on-findings]``: static sync-point lint.

Exits 0 even with findings unless ``--fail-on-findings`` is given (then 1 when any is found).
"""
from __future__ import annotations

import sys

from ..detect.static import ScanReport, scan
from ..text import json_text, printable
from .parsers import add_scan


def register(subparsers) -> None:
    add_scan(subparsers).set_defaults(func=run)


def run(args) -> int:
    rules = [r.strip() for r in args.rules.split(",") if r.strip()] if args.rules else None
    report = scan(args.paths, rules=rules)
    if args.json:
        print(json_text(report.to_records(), indent=2))
        for warning in report.warnings:  # stdout stays one JSON document
            print(f"perfkit scan: note: {printable(warning)}", file=sys.stderr)
    else:
        print(format_table(report))
    return 1 if args.fail_on_findings and report.findings else 0


def format_table(report: ScanReport) -> str:
    """One line per finding (``file:line: [rule] message``), then counts by rule; file names
    are shown printable (a newline or escape in a name cannot break or recolour the listing)."""
    lines = [f"{printable(f.file)}:{f.line}: [{f.rule}] {printable(f.message)}" for f in report.findings]
    counts = ", ".join(f"{rule}={n}" for rule, n in report.counts_by_rule.items() if n)
    lines.append(f"{len(report.findings)} findings in {len(report.files)} files" + (f" ({counts})" if counts else ""))
    lines += [f"note: {printable(w)}" for w in report.warnings]
    return "\n".join(lines)
