"""``perfkit sql QUERY TRACE... [--csv | --json | --markdown]``: DuckDB SQL over the tables of a trace."""
from __future__ import annotations

import itertools
import sys

from ..analysis.sql import sql, sql_answer
from ..report.replies import reply_text
from ..report.terminal.sql import result_lines
from ..text import printable
from .parsers import add_sql

_LINES_PER_WRITE = 512  # a reader that leaves (| head) is seen at the next write, in every format alike


def register(subparsers) -> None:
    add_sql(subparsers).set_defaults(func=run)


def run(args) -> int:
    source = args.traces[0] if len(args.traces) == 1 else args.traces
    if args.markdown:
        answer = sql_answer(args.query, source, limit=args.limit, use_cache=not args.no_cache,
                            allow_files=args.allow_files)
        print(reply_text("sql", answer, budget=args.budget, cursor=args.cursor))
        return 0
    frame = sql(args.query, source, use_cache=not args.no_cache, allow_files=args.allow_files)
    for warning in frame.attrs.get("warnings", []):
        print(f"perfkit sql: warning: {printable(warning)}", file=sys.stderr)
    lines = result_lines(frame, "csv" if args.csv else "json" if args.json else "table")
    while chunk := list(itertools.islice(lines, _LINES_PER_WRITE)):
        sys.stdout.write("".join(chunk))
    return 0
