"""``sql(query, trace_or_dir)``: DuckDB SQL over a trace's tables, for the questions the built-in
analyses don't answer.

Views (the schema of ``Trace``, :mod:`perfkit.trace.schema`; times in microseconds):

* ``events``: one row per event: name, cat, ph, ts_us, dur_us, pid, tid, file_id, rank, device,
  stream, correlation, external_id, bytes, python_id, python_parent, alloc_bytes;
* ``flows``: id, ph, cat, pid, tid, ts_us, file_id (launch -> GPU and forward -> backward arrows);
* ``steps``: rank, step, start_us, end_us, dur_us, source;
* ``ranks``: one row per file: file_id, rank, path, trace_name, schema_version, base_time_ns,
  backend, world_size, devices (GPU names, comma-separated), flags (profiler flags as JSON),
  events_read.

The tables reach DuckDB as Arrow tables (``pyarrow.Table.from_pandas``: numeric columns are not
copied, names stay dictionary-encoded) and DuckDB scans them in place. DuckDB is imported only here.
"""
from __future__ import annotations

import json

import pandas as pd

from ..errors import MissingDependencyError, ParameterError
from ..trace import Trace, load_trace

VIEWS = ("events", "flows", "steps", "ranks")
RANK_COLUMNS = ["file_id", "rank", "path", "trace_name", "schema_version", "base_time_ns", "backend", "world_size",
                "devices", "flags", "events_read"]


def sql(query: str, trace_or_dir, *, use_cache: bool = True) -> pd.DataFrame:
    """Run the DuckDB ``query`` over the views ``events``, ``flows``, ``steps`` and ``ranks`` of
    ``trace_or_dir`` (a loaded :class:`Trace`, a trace file, a directory or a list of files) and
    return its result as a DataFrame. Raises ParameterError for an empty or failing query (with
    DuckDB's message and the view names), TraceError for unreadable traces, MissingDependencyError
    without duckdb."""
    if not isinstance(query, str) or not query.strip():
        raise ParameterError("the SQL query is empty; e.g. \"SELECT name, sum(dur_us) FROM events GROUP BY name\"")
    duckdb = _duckdb()
    trace = trace_or_dir if isinstance(trace_or_dir, Trace) else load_trace(trace_or_dir, use_cache=use_cache)
    with duckdb.connect(":memory:") as con:
        for name, table in arrow_tables(trace).items():
            con.register(name, table)
        try:
            return con.execute(query).df()
        except duckdb.Error as exc:
            raise ParameterError(f"SQL query failed (views: {', '.join(VIEWS)}; their columns: `perfkit sql --help`): "
                                 f"{exc}") from None


def arrow_tables(trace: Trace) -> dict:
    """The four views of ``trace`` as ``pyarrow.Table`` objects, by view name."""
    import pyarrow as pa

    frames = {"events": trace.events, "flows": trace.flows, "steps": trace.steps, "ranks": ranks_frame(trace)}
    return {name: pa.Table.from_pandas(frame, preserve_index=False) for name, frame in frames.items()}


def ranks_frame(trace: Trace) -> pd.DataFrame:
    """One row per source file of ``trace`` (``RANK_COLUMNS``)."""
    rows = [{"file_id": i, "rank": f.rank, "path": f.path, "trace_name": f.trace_name,
             "schema_version": None if f.schema_version is None else str(f.schema_version),
             "base_time_ns": f.base_time_ns, "backend": str(f.distributed.get("backend", "")),
             "world_size": _int_or_none(f.distributed.get("world_size")),
             "devices": ", ".join(str(d.get("name", "")) for d in f.devices), "flags": json.dumps(f.flags),
             "events_read": f.events_read} for i, f in enumerate(trace.files)]
    frame = pd.DataFrame(rows, columns=RANK_COLUMNS)
    return frame.astype({"base_time_ns": "Int64", "world_size": "Int64"})


def _int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise MissingDependencyError("duckdb", "perfkit sql") from None
    return duckdb
