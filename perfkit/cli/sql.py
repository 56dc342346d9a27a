"""``perfkit sql QUERY TRACE... [--csv | --json | --markdown]``: DuckDB SQL over the tables of a trace."""
from __future__ import annotations

import sys

import pandas as pd

from ..analysis.sql import sql, sql_answer
from ..report.replies import reply_text
from ..text import csv_safe_frame
from .parsers import add_sql


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
        print(f"perfkit sql: warning: {warning}", file=sys.stderr)
    if args.csv:
        print(csv_safe_frame(frame).to_csv(index=False), end="")
    elif args.json:
        if len(frame):
            print(frame.to_json(orient="records", lines=True).rstrip("\n"))
    else:
        with pd.option_context("display.max_rows", 200, "display.max_columns", 50, "display.width", 200):
            print(frame.to_string(index=False) if len(frame) else "(no rows)")
    return 0
