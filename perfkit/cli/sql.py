"""``perfkit sql QUERY TRACE... [--csv | --json]``: DuckDB SQL over the tables of a trace."""
from __future__ import annotations

import sys

from ..text import csv_safe_frame

VIEWS_HELP = ("views: events (name, cat, ph, ts_us, dur_us, pid, tid, file_id, rank, device, stream, correlation, "
              "external_id, bytes, python_id, python_parent, alloc_bytes), flows (id, ph, cat, pid, tid, ts_us, "
              "file_id), steps (rank, step, start_us, end_us, dur_us, source), ranks (file_id, rank, path, trace_name, "
              "schema_version, base_time_ns, backend, world_size, devices, flags, events_read); times in microseconds")


def register(subparsers) -> None:
    p = subparsers.add_parser("sql", help="run a DuckDB SQL query over a trace's events, flows, steps and ranks",
                              description=VIEWS_HELP)
    p.add_argument("query", help="SQL, e.g. \"SELECT name, sum(dur_us) FROM events WHERE cat='kernel' GROUP BY 1\"")
    p.add_argument("traces", nargs="+", help=".json / .json.gz trace files, or one tensorboard_trace_handler directory")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true", help="print the result as CSV")
    out.add_argument("--json", action="store_true", help="print the result as JSON, one object per row and line")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")
    p.add_argument("--allow-files", action="store_true",
                   help="let the query read and write files (read_csv, COPY ... TO, ATTACH); by default it sees "
                        "the trace's views only, so a pasted query cannot touch this machine's files")
    p.set_defaults(func=run)


def run(args) -> int:
    import pandas as pd

    from ..analysis.sql import sql

    source = args.traces[0] if len(args.traces) == 1 else args.traces
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
