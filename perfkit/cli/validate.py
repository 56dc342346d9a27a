"""``perfkit validate [--device auto] [--preset full|quick] [--only CHECK ...] [--out FILE] [--json]``:
run the reference workloads through perfkit's harnesses and detectors and check that perfkit
reports what the hardware does (pinned vs pageable copies, syncs, compile, AMP, leaks). Prints
one line per check as it finishes, then the markdown table; ``--out`` also writes the table to
FILE. Exit code 1 when a check fails or errors."""
from __future__ import annotations

import sys

from ..atomic import write_text_atomic
from ..text import json_text
from ..validation.suite import validate
from .parsers import add_validate


def register(subparsers) -> None:
    add_validate(subparsers).set_defaults(func=run)


def _progress(check) -> None:
    print(f"  {check.status:<8} {check.name}: {check.measured}", file=sys.stderr, flush=True)


def run(args) -> int:
    report = validate(args.device, preset=args.preset, only=args.only, on_check=_progress)
    markdown = report.to_markdown()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.out, markdown)
    if args.json:
        print(json_text(report.to_json(), indent=1, default=str))
    else:
        print(markdown, end="")
    return 1 if report.failed else 0
