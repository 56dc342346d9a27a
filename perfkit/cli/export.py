"""``perfkit export --parquet DIR TRACE...``: traces as a Parquet dataset partitioned by rank."""
from __future__ import annotations

import sys

from ..errors import ParameterError
from ..export.parquet import export_parquet, occupied
from .parsers import add_export


def register(subparsers) -> None:
    add_export(subparsers).set_defaults(func=run)


def run(args) -> int:
    if occupied(args.parquet) and not args.overwrite:
        raise ParameterError(f"{args.parquet} already exists; choose a new directory or pass --overwrite to replace it")
    source = args.traces[0] if len(args.traces) == 1 else args.traces
    dataset = export_parquet(source, args.parquet, overwrite=args.overwrite, workers=args.workers,
                             use_cache=not args.no_cache, salvage=args.salvage, progress=sys.stderr.isatty())
    rows = ", ".join(f"{n:,} {table}" for table, n in dataset.rows.items())
    print(f"wrote {dataset.directory}: ranks {list(dataset.ranks)}; {rows}")
    print("".join(f"warning  {w}\n" for w in dataset.warnings), end="")
    print(f"read it with DuckDB: SELECT * FROM read_parquet('{dataset.directory}/events/*/*.parquet', hive_partitioning=true)")
    return 0
