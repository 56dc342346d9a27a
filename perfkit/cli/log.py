"""``perfkit log [--path FILE] [--investigation X] [--json]``: print the performance log as a
markdown table (regressions in bold) or as JSON records. ``--path`` defaults to the workbook's
``reports/perf_log.csv``."""
from __future__ import annotations

from ..report.perflog import PerfLog
from .parsers import add_log


def register(subparsers) -> None:
    add_log(subparsers).set_defaults(func=run)


def run(args) -> int:
    log = PerfLog(args.path)
    if args.json:
        print(log.read(args.investigation).to_json(orient="records", indent=1))
    else:
        print(log.to_markdown(args.investigation), end="")
    return 0
