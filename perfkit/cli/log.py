"""``perfkit log [--path FILE] [--investigation X] [--runs N | --all] [--json]``: print the performance
log as a markdown table (regressions in bold) or as JSON records: the last 20 runs unless ``--runs`` or
``--all`` says otherwise, read from the end of the file (a 1M-row log is not read whole), with a note on
stderr saying how many rows are not shown. ``--path`` defaults to the workbook's ``reports/perf_log.csv``."""
from __future__ import annotations

import sys

from ..report.perflog import PerfLog, markdown_table
from ..text import printable
from .parsers import add_log


def register(subparsers) -> None:
    add_log(subparsers).set_defaults(func=run)


def run(args) -> int:
    frame = PerfLog(args.path).read(args.investigation, last_runs=None if args.all else args.runs)
    for warning in frame.attrs.get("warnings", []):
        print(f"perfkit log: note: {printable(warning)} (--runs N or --all for more)", file=sys.stderr)
    if args.json:
        print(frame.to_json(orient="records", indent=1))
    else:
        print(markdown_table(frame), end="")
    return 0
