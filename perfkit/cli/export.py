"""``perfkit export --parquet DIR TRACE...``: traces as a Parquet dataset partitioned by rank."""
from __future__ import annotations

import sys

from ..errors import ParameterError


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write traces as a Parquet dataset (DuckDB, Dask, Spark)")
    p.add_argument("traces", nargs="+", help=".json / .json.gz trace files or one tensorboard_trace_handler directory")
    p.add_argument("--parquet", required=True, metavar="DIR", help="the dataset directory to create")
    p.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")
    p.add_argument("--workers", type=int, default=None, help="parsing processes (default: one per core)")
    p.add_argument("--salvage", action="store_true", help="recover the complete events of a file cut off mid-write")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..trace.export import export_parquet, occupied

    if occupied(args.parquet) and not args.overwrite:
        raise ParameterError(f"{args.parquet} already exists; choose a new directory or pass --overwrite to replace it")
    source = args.traces[0] if len(args.traces) == 1 else args.traces
    dataset = export_parquet(source, args.parquet, overwrite=args.overwrite, workers=args.workers,
                             use_cache=not args.no_cache, salvage=args.salvage, progress=sys.stderr.isatty())
    rows = ", ".join(f"{n:,} {table}" for table, n in dataset.rows.items())
    print(f"wrote {dataset.directory}: ranks {list(dataset.ranks)}; {rows}")
    print(f"read it with DuckDB: SELECT * FROM read_parquet('{dataset.directory}/events/*/*.parquet', hive_partitioning=true)")
    return 0
