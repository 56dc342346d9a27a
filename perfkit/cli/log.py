"""``perfkit log [--path FILE] [--investigation X] [--json]``: print the performance log as a
markdown table (regressions in bold) or as JSON records. ``--path`` defaults to the workbook's
``reports/perf_log.csv``."""
from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser("log", help="print the performance log",
                              description="Print the perf log: date | investigation | change | "
                                          "metric | before -> after | delta | verdict.")
    p.add_argument("--path", default=None, help="log file (default: the workbook's reports/perf_log.csv)")
    p.add_argument("--investigation", default=None, help="only rows of this investigation")
    p.add_argument("--json", action="store_true", help="all columns as JSON records")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..report.perflog import PerfLog  # pandas: imported when the command runs, not by --help

    log = PerfLog(args.path)
    if args.json:
        print(log.read(args.investigation).to_json(orient="records", indent=1))
    else:
        print(log.to_markdown(args.investigation), end="")
    return 0
