"""``perfkit validate [--device auto] [--preset full|quick] [--only CHECK ...] [--out FILE] [--json]``:
run the reference workloads through perfkit's harnesses and detectors and check that perfkit
reports what the hardware does (pinned vs pageable copies, syncs, compile, AMP, leaks). Prints
one line per check as it finishes, then the markdown table; ``--out`` also writes the table to
FILE. Exit code 1 when a check fails or errors."""
from __future__ import annotations

import sys
from pathlib import Path

from ..atomic import write_text_atomic
from ..text import json_text
from ..validation.checks import CHECKS, PRESETS


def register(subparsers) -> None:
    p = subparsers.add_parser("validate", help="check perfkit's figures against reference workloads",
                              description="Check that perfkit reports what this machine does, on reference "
                                          "workloads with a known pathology and fix.")
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda or cuda:N")
    p.add_argument("--preset", default="auto", choices=["auto", *PRESETS],
                   help="problem sizes: full (a few seconds of GPU work per check), quick (a CPU smoke run) "
                        "or auto (default: full on CUDA, else quick)")
    p.add_argument("--only", nargs="+", default=None, metavar="CHECK", help=f"checks to run: {', '.join(CHECKS)}")
    p.add_argument("--out", type=Path, default=None, help="also write the markdown table to this file")
    p.add_argument("--json", action="store_true", help="print the checks as JSON records instead of markdown")
    p.set_defaults(func=run)


def _progress(check) -> None:
    print(f"  {check.status:<8} {check.name}: {check.measured}", file=sys.stderr, flush=True)


def run(args) -> int:
    from ..validation.suite import validate  # pandas, torch: imported when the command runs

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
