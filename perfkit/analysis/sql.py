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

A query is confined to these views unless ``allow_files=True``: once they are registered, DuckDB's
``enable_external_access`` is turned off and its configuration locked, so a query pasted from a
shared notebook cannot read (``read_csv('/etc/passwd')``, ``glob``), write (``COPY ... TO``,
``ATTACH``) or load extensions. A result is cut at ``PERFKIT_SQL_MAX_ROWS`` rows (streamed, so
``SELECT * FROM range(300000000)`` costs one batch past the cap), with a warning in
``frame.attrs["warnings"]``.

A query runs in a worker thread while the calling thread waits, so that it can be stopped: after
``PERFKIT_SQL_TIMEOUT_S`` seconds, or at Ctrl-C, the caller calls DuckDB's ``interrupt()``. (A
query run in the main thread could not be: DuckDB holds it in C++, where Python runs no signal
handler, so `SELECT count(*) FROM range(1e14)` ignored Ctrl-C for hours.)
"""
from __future__ import annotations

import decimal
import json
import math
import threading
import time
from typing import Iterator

import orjson
import pandas as pd

from ..errors import MissingDependencyError, ParameterError, PerfkitError
from ..limits import SQL_MAX_ROWS, SQL_TIMEOUT_S
from ..text import json_text, path_text
from ..trace import Trace, load_trace

VIEWS = ("events", "flows", "steps", "ranks")
RANK_COLUMNS = ["file_id", "rank", "path", "trace_name", "schema_version", "base_time_ns", "backend", "world_size",
                "devices", "flags", "events_read"]


_EXAMPLE = "e.g. \"SELECT name, sum(dur_us) FROM events GROUP BY name\""
_BATCH_ROWS = 65_536
ANSWER_ROWS, ANSWER_MAX_ROWS = 100, 1_000  # rows sql_answer holds by default and at most: aggregate for more


def sql(query: str, trace_or_dir, *, use_cache: bool = True, allow_files: bool = False,
        max_rows: int | None = None) -> pd.DataFrame:
    """Run the DuckDB ``query`` over the views ``events``, ``flows``, ``steps`` and ``ranks`` of
    ``trace_or_dir`` (a loaded :class:`Trace`, a trace file, a directory or a list of files) and
    return its result as a DataFrame (at most ``PERFKIT_SQL_MAX_ROWS`` rows; a longer result is
    cut there; ``max_rows``: a lower cap, ``perfkit mcp``'s row limit). ``frame.attrs["warnings"]`` holds the trace's
    load warnings (events dropped for a bad value are in no view: a count over them must say so) and the cut, if
    any. ``allow_files``: let the query read and
    write files (``read_csv``, ``COPY ... TO``, ``ATTACH``); by default it sees the views only.
    Raises ParameterError for an empty query, one with no result (only comments, ``CREATE``...), a
    failing one (with DuckDB's message and the view names) or one still running after
    ``PERFKIT_SQL_TIMEOUT_S`` seconds (it is stopped), PerfkitError when DuckDB runs out of memory,
    KeyboardInterrupt at Ctrl-C once the query has stopped, TraceError for unreadable traces,
    MissingDependencyError without duckdb."""
    if not isinstance(query, str) or not query.strip():
        raise ParameterError(f"the SQL query is empty; {_EXAMPLE}")
    duckdb = _duckdb()
    max_rows, timeout_s = min(max_rows or SQL_MAX_ROWS.value(), SQL_MAX_ROWS.value()), SQL_TIMEOUT_S.value()
    trace = trace_or_dir if isinstance(trace_or_dir, Trace) else load_trace(trace_or_dir, use_cache=use_cache)
    with duckdb.connect(":memory:") as con:
        for name, table in arrow_tables(trace).items():
            con.register(name, table)
        if not allow_files:
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        try:
            frame = _interruptible(con, lambda: _run(con, query, max_rows), timeout_s)
            warnings = [*trace.warnings, *frame.attrs.get("warnings", [])]  # what the views lack, then the cut
            if warnings:
                frame.attrs["warnings"] = warnings
            return frame
        except (MemoryError, OSError, duckdb.OutOfMemoryException) as exc:  # also via pyarrow's reader
            if isinstance(exc, OSError) and "out of memory" not in str(exc).lower():
                raise
            raise PerfkitError(f"the SQL query ran out of memory ({_first_line(exc)}): aggregate, add a LIMIT, or "
                               f"select fewer columns{_memory_hint(allow_files)}") from None
        except duckdb.Error as exc:
            raise ParameterError(f"SQL query failed (views: {', '.join(VIEWS)}; their columns: `perfkit sql --help`"
                                 f"{_files_hint(exc, allow_files)}): {' '.join(str(exc).split())}") from None


def _run(con, query: str, max_rows: int) -> pd.DataFrame:
    relation = con.sql(query)
    if relation is None:
        raise ParameterError(f"the SQL query returns no table (only comments, or a statement such as "
                             f"CREATE or SET); ask with a SELECT, {_EXAMPLE}")
    exact = relation.project(", ".join(_select(i, name, kind) for i, (name, kind) in
                                       enumerate(zip(relation.columns, relation.types), start=1)))
    return _fetch(exact.limit(max_rows + 1), max_rows, [_kind(t) for t in relation.types])


# What each DuckDB result type becomes in the frame, so that every type has an exact value in every output format
# (``perfkit sql``'s table, CSV and JSON): numbers, text and booleans as they are (integers in nullable integer
# columns, so a NULL does not turn 2**53 + 1 into a float); HUGEINT and its kin as Python ints (pandas has no
# 128-bit integer), DECIMAL as ``decimal.Decimal``; lists, structs and maps of those as Python lists and dicts;
# everything pandas cannot hold exactly or at all (BLOB, BIT, INTERVAL, UNION, UUID, ENUM, dates and times, whose
# range and precision pass datetime64[ns]'s: DATE 'infinity', year 5000, TIME_NS) as DuckDB's own text of it.
_PLAIN = frozenset({"boolean", "tinyint", "smallint", "integer", "bigint", "utinyint", "usmallint", "uinteger",
                    "ubigint", "float", "double", "varchar"})
_BIG_INTEGERS = frozenset({"hugeint", "uhugeint", "bignum", "varint"})
_NESTED = frozenset({"list", "struct", "map", "array"})


def _kind(duck_type) -> str:
    """"plain", "decimal", "integer" (a big integer, fetched as text), "nested" (plain leaves) or "text"."""
    kind = duck_type.id
    if kind in _PLAIN:
        return "plain"
    if kind == "decimal":
        return "decimal"
    if kind in _BIG_INTEGERS:
        return "integer"
    if kind in _NESTED and all(isinstance(child, str) or _kind(child) in ("plain", "nested")
                               for _, child in duck_type.children if not isinstance(child, int)):
        return "nested"
    return "text"


def _select(position: int, name: str, duck_type) -> str:
    """The result's column ``position`` (1-based: names may repeat) as the frame takes it, under its own name."""
    alias = '"' + name.replace('"', '""') + '"'
    return f"#{position} AS {alias}" if _kind(duck_type) in ("plain", "decimal", "nested") else \
        f"CAST(#{position} AS VARCHAR) AS {alias}"


def _interruptible(con, work, timeout_s: int):
    """``work()`` run in a worker thread, stopped with ``con.interrupt()`` after ``timeout_s`` seconds
    (ParameterError) or at Ctrl-C (KeyboardInterrupt, once DuckDB has stopped). The caller waits on
    an Event: a Thread.join interrupted by Ctrl-C can report a live thread as finished. Where no
    thread can start (an address-space limit leaves no room for its stack), ``work()`` runs here."""
    outcome, done = {}, threading.Event()

    def target():
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller's thread, raised there
            outcome["error"] = exc
        finally:
            done.set()

    try:
        threading.Thread(target=target, name="perfkit-sql", daemon=True).start()
    except RuntimeError:  # "can't start new thread": no address space left for its stack (a ulimit -v)
        return work()  # run here, where it cannot be stopped early, rather than not at all
    deadline = time.monotonic() + timeout_s
    try:
        while not done.wait(min(0.25, max(deadline - time.monotonic(), 0.0))):
            if time.monotonic() >= deadline:
                con.interrupt()
                done.wait()
                raise ParameterError(f"the SQL query was stopped after {timeout_s:,} s ({SQL_TIMEOUT_S.env}, which "
                                     f"guards {SQL_TIMEOUT_S.guards}): filter or aggregate first, add a LIMIT, or "
                                     f"raise it, e.g. {SQL_TIMEOUT_S.env}={timeout_s * 4}")
    except KeyboardInterrupt:
        con.interrupt()  # the connection cannot be closed while the query runs: stop it first
        done.wait()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _memory_hint(allow_files: bool) -> str:
    """DuckDB's own advice (``SET memory_limit``, ``SET threads``) is refused while the configuration is locked."""
    if allow_files:
        return "; or start the query with `SET threads = 1;` (each thread holds its own buffers)"
    return ("; DuckDB's own advice (`SET threads`, `SET memory_limit`) is refused while perfkit locks its "
            "configuration: for a query you trust, pass --allow-files (allow_files=True) and start the query "
            "with `SET threads = 1;`")


def _first_line(exc) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _fetch(relation, max_rows: int, kinds: list[str]) -> pd.DataFrame:
    """The first ``max_rows`` rows of ``relation``, streamed in batches so that a huge result is
    never materialized whole. The caller limits ``relation`` to ``max_rows + 1`` rows: DuckDB then
    stops producing (an ORDER BY becomes a top-N) instead of buffering ahead of the reader, which ran
    out of memory under a 2 GiB address-space limit 1 run in 5 on ``SELECT * FROM range(300000000)``."""
    import pyarrow as pa

    reader = relation.to_arrow_reader(_BATCH_ROWS)
    batches, rows = [], 0
    for batch in reader:
        batches.append(batch)
        rows += batch.num_rows
        if rows > max_rows:
            break
    table = pa.Table.from_batches(batches, schema=reader.schema).slice(0, max_rows)
    frame = pd.DataFrame({i: _column(table.column(i), kind) for i, kind in enumerate(kinds)})
    frame.columns = table.column_names
    if rows > max_rows:
        frame.attrs["warnings"] = [f"the result has more than {max_rows:,} rows ({SQL_MAX_ROWS.env}, which guards "
                                   f"{SQL_MAX_ROWS.guards}): only its first {max_rows:,} are shown; aggregate, add a "
                                   f"LIMIT, or raise {SQL_MAX_ROWS.env}"]
    return frame


def _column(column, kind: str):
    """One Arrow result column as an exact pandas column (see ``_kind``)."""
    import pyarrow as pa

    if kind == "plain" and not (column.null_count and pa.types.is_floating(column.type)):
        return column.to_pandas(types_mapper={pa.bool_(): pd.BooleanDtype(), **_nullable_integers()}.get
                                if column.null_count else None)
    values = column.to_pylist()  # floats with NULLs too: a NULL stays None, apart from NaN
    if kind == "integer":
        values = [None if v is None else int(v) for v in values]
    return pd.Series(values, dtype=object)


def _nullable_integers() -> dict:
    import pyarrow as pa

    return {getattr(pa, f"{sign}int{bits}")(): getattr(pd, f"{sign.upper()}Int{bits}Dtype")()
            for sign in ("", "u") for bits in (8, 16, 32, 64)}


def _files_hint(exc, allow_files: bool) -> str:
    if allow_files or "disabled by configuration" not in str(exc):
        return ""
    return "; queries see these views only: pass allow_files=True / --allow-files to let it read or write files"


def arrow_tables(trace: Trace) -> dict:
    """The four views of ``trace`` as ``pyarrow.Table`` objects, by view name."""
    import pyarrow as pa

    frames = {"events": trace.events, "flows": trace.flows, "steps": trace.steps, "ranks": ranks_frame(trace)}
    return {name: pa.Table.from_pandas(frame, preserve_index=False) for name, frame in frames.items()}


def ranks_frame(trace: Trace) -> pd.DataFrame:
    """One row per source file of ``trace`` (``RANK_COLUMNS``)."""
    rows = [{"file_id": i, "rank": f.rank, "path": path_text(f.path), "trace_name": f.trace_name,
             "schema_version": None if f.schema_version is None else str(f.schema_version),
             "base_time_ns": f.base_time_ns, "backend": str(f.distributed.get("backend", "")),
             "world_size": _int_or_none(f.distributed.get("world_size")),
             "devices": ", ".join(str(d.get("name", "")) for d in f.devices), "flags": json.dumps(f.flags),
             "events_read": f.events_read} for i, f in enumerate(trace.files)]
    frame = pd.DataFrame(rows, columns=RANK_COLUMNS)
    return frame.astype({"base_time_ns": "Int64", "world_size": "Int64"})


def _int_or_none(value):
    """``value`` as an int64, or None (a world_size of ``"eight"``, ``[8]`` or ``2**70``)."""
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if -(2**63) <= number <= 2**63 - 1 else None


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise MissingDependencyError("duckdb", "perfkit sql") from None
    return duckdb


def sql_answer(query: str, trace_or_source, limit: int = ANSWER_ROWS, **kwargs) -> dict:
    """What ``perfkit mcp``'s sql tool and ``perfkit sql --markdown`` answer: the rows of ``query`` (:func:`sql`
    over ``trace_or_source``, with ``kwargs``) as ``{query, columns, rows, limit, limited, warnings}``: at most
    ``limit`` rows (1 to ``ANSWER_MAX_ROWS``), each an object of column to value; ``limited`` where more matched.
    Raises ParameterError for a limit out of range and sql's errors."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= ANSWER_MAX_ROWS:
        raise ParameterError(f"limit={limit!r:.40}: give 1 to {ANSWER_MAX_ROWS:,} rows; aggregate (GROUP BY) or "
                             f"add a WHERE for the rest")
    frame = sql(query, trace_or_source, max_rows=limit, **kwargs)
    limited = bool(frame.attrs.get("warnings"))
    return {"query": query, "columns": [str(c) for c in frame.columns], "rows": [orjson.loads(r) for r in json_lines(frame)],
            "limit": limit, "limited": limited,
            "warnings": [f"more than {limit:,} rows matched: the first {limit:,} are here; aggregate, add a WHERE, "
                         f"or raise limit (at most {ANSWER_MAX_ROWS:,})"] if limited else []}


# -- a result's values, exact: what every output format of perfkit sql and its MCP tool reads --------------------
def column_values(series: pd.Series) -> list:
    """The column's values as Python objects, every NULL (None, NA, a text column's NaN) as None."""
    text = pd.api.types.is_string_dtype(series.dtype) and series.dtype != object
    if series.dtype.kind == "f":  # float64: no NULL in it (sql keeps a float column with NULLs as objects)
        return series.tolist()
    values = series.astype(object).tolist()
    return [None if v is None or v is pd.NA or (text and isinstance(v, float)) else v for v in values]


def result_rows(frame: pd.DataFrame) -> Iterator[tuple]:
    """Each row of a result frame as Python values (``column_values``)."""
    return zip(*(column_values(frame.iloc[:, i]) for i in range(frame.shape[1])))


def json_token(value) -> str:
    """A value as a JSON token: exact numbers, null for NULL and for the floats JSON has no number for."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, decimal.Decimal)):
        return str(value) if isinstance(value, int) or value.is_finite() else "null"
    if isinstance(value, float):
        return repr(value)
    return json_text(value)


def json_lines(frame: pd.DataFrame) -> Iterator[str]:
    """Each row of a result frame as one line of strict JSON, every number exact (``json_token``)."""
    keys = [json_text(str(name)) for name in frame.columns]
    for row in result_rows(frame):
        yield "{" + ",".join(f"{k}:{json_token(v)}" for k, v in zip(keys, row)) + "}\n"
