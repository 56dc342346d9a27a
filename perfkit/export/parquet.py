"""Loaded traces as a Parquet dataset that DuckDB, Dask and Spark read as it is.

Layout: one directory per table, partitioned by rank the Hive way (``rank=<r>`` directories, the
``rank`` column living in the path only, as Spark requires), one file per source trace file::

    DIR/events/rank=<r>/file-<file_id>.parquet   Trace.events without rank (schema: perfkit.trace.schema),
                                                 with ``row`` (position in the file) that ``parent`` refers to
    DIR/flows/rank=<r>/file-<file_id>.parquet    Trace.flows
    DIR/steps/rank=<r>/steps.parquet             Trace.steps without rank
    DIR/files/rank=<r>/file-<file_id>.parquet    one row per source file (path, metadata; JSON as text)
    DIR/_perfkit.json                            format version, perfkit version, sources

String columns are dictionary-encoded; files are Snappy-compressed (every Parquet reader has it).
:func:`export_parquet` writes a new dataset atomically; :func:`write_ranks` adds a trace's files
to a dataset directory (what a worker of a distributed engine writes for the ranks it loaded).
"""
from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..atomic import atomic_write, followed, new_folder_mode, output_error, staged, write_text_atomic
from ..errors import ParameterError
from ..text import path_text
from ..trace.loader.load import load_trace, resolve_paths
from ..trace.model import Trace
from ..trace.schema import SCHEMA_VERSION

EXPORT_FORMAT = 1
TABLES = ("events", "flows", "steps", "files")
_MANIFEST = "_perfkit.json"


@dataclass(frozen=True)
class ParquetDataset:
    """What :func:`export_parquet` wrote: the directory, its ranks, and the rows of each table."""

    directory: Path
    ranks: tuple
    rows: dict
    warnings: tuple = ()  # what the loader set aside: those events are not in the dataset

    def __repr__(self) -> str:
        counts = ", ".join(f"{n:,} {table}" for table, n in self.rows.items())
        return f"<ParquetDataset {self.directory}: ranks {list(self.ranks)}; {counts}>"


def occupied(directory: str | os.PathLike) -> bool:
    """True when ``directory`` exists as a file or a non-empty folder (an export would replace it)."""
    target = Path(directory)
    return target.exists() and (not target.is_dir() or any(target.iterdir()))


def check_target(target: Path, sources: list, *, overwrite: bool) -> None:
    """Refuse a target the export may not replace: an occupied one without ``overwrite``; with it, one that
    is or holds an input trace, or that is not a dataset perfkit wrote (perfkit deletes only what it made)."""
    if not occupied(target):
        return
    if not overwrite:
        raise ParameterError(f"{target} already exists; choose a new directory or pass overwrite=True to replace it")
    real = Path(os.path.realpath(target))
    for src in (Path(os.path.realpath(p)) for p in sources):
        if src == real or real in src.parents:
            raise ParameterError(f"{target} holds {src}, a trace being exported: replacing it would delete the input; "
                                 "write the dataset to a new directory")
    if not (target.is_dir() and (target / _MANIFEST).is_file()):
        raise ParameterError(f"{target} is not a Parquet dataset perfkit wrote (no {_MANIFEST} in it): --overwrite "
                             "replaces only those; choose a new directory")


def export_parquet(source, directory, *, overwrite: bool = False, **load_options) -> ParquetDataset:
    """Load ``source`` (as :func:`~perfkit.trace.load_trace` does, with ``load_options``) and write
    it to ``directory`` as a Parquet dataset partitioned by rank.

    The dataset is written beside ``directory`` and moved into place when complete, so a failed
    export leaves nothing half-written. Raises :class:`ParameterError` when ``directory`` exists
    and is not empty (unless ``overwrite``), when ``overwrite`` would replace something that is not a
    dataset perfkit wrote (no ``_perfkit.json``) or would delete a trace being exported, TraceError for
    unreadable traces, OutputError when the dataset cannot be written (no space, a read-only file system).
    """
    target = followed(Path(os.path.abspath(directory)))  # a link to a dataset: the dataset is replaced, the link stays
    check_target(target, resolve_paths(source), overwrite=overwrite)
    trace = load_trace(source, **load_options)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(target.stat().st_mode) if target.is_dir() else new_folder_mode()
    except OSError as exc:
        raise output_error(target, exc) from exc
    with staged(target, folder=True) as staging:
        try:
            rows = write_ranks(trace, staging)
            write_text_atomic(staging / _MANIFEST, json.dumps(_manifest(trace), indent=1))
            os.chmod(staging, mode)  # mkdtemp's 0700, where mkdir gives 0755 under the usual umask
            _move_into_place(staging, target)
        except OSError as exc:  # no space, a read-only mount: nothing of the export is left
            raise output_error(target, exc) from exc
    return ParquetDataset(target, tuple(trace.ranks), rows, tuple(trace.warnings))


def write_ranks(trace: Trace, directory) -> dict:
    """Write ``trace``'s rows into the dataset layout under ``directory`` (each file atomically;
    files of other ranks already there are kept). Returns the rows written per table."""
    directory = Path(directory)
    ranks = {i: f.rank for i, f in enumerate(trace.files)}
    rows = dict.fromkeys(TABLES, 0)
    for table, frame in (("events", trace.events), ("flows", trace.flows), ("files", _files_frame(trace))):
        file_rank = frame["file_id"].map(ranks) if table != "events" else frame["rank"]
        for (rank, file_id), part in frame.groupby([file_rank.to_numpy(), frame["file_id"].to_numpy()], sort=True):
            part = _file_rows(part) if table == "events" else part
            _write(part.drop(columns=["rank"], errors="ignore"), directory / table / f"rank={rank}" / f"file-{file_id}.parquet")
            rows[table] += len(part)
    for rank, part in trace.steps.groupby("rank", sort=True):
        _write(part.drop(columns=["rank"]), directory / "steps" / f"rank={rank}" / "steps.parquet")
        rows["steps"] += len(part)
    return rows


def _file_rows(events: pd.DataFrame) -> pd.DataFrame:
    """One file's events with ``row`` (position in the file) first and ``parent`` pointing at a
    ``row`` of the same file: in Trace.events both are labels of the whole table (files follow each
    other), which mean nothing once the files are apart."""
    first = int(events.index[0]) if len(events) else 0
    out = events.reset_index(drop=True)
    out.insert(0, "row", np.arange(len(out), dtype=np.int64))
    if "parent" in out:
        parent = out["parent"].to_numpy()
        out["parent"] = np.where(parent >= 0, parent - first, -1).astype(parent.dtype)
    return out


def _write(frame: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), b"perfkit.export_format": str(EXPORT_FORMAT).encode()})
    atomic_write(path, lambda tmp: _write_parquet(pq, table, tmp))


def _write_parquet(pq, table, tmp: str) -> None:
    with open(tmp, "wb") as fh:  # a file object: pyarrow cannot encode a path whose bytes are not UTF-8
        pq.write_table(table, fh, compression="snappy")


def _files_frame(trace: Trace) -> pd.DataFrame:
    return pd.DataFrame({
        "file_id": pd.Series(range(len(trace.files)), dtype="int16"),
        "path": [path_text(f.path) for f in trace.files],
        "trace_name": [f.trace_name for f in trace.files],
        "schema_version": [None if f.schema_version is None else str(f.schema_version) for f in trace.files],
        "base_time_ns": pd.array([f.base_time_ns for f in trace.files], dtype="Int64"),
        "events_read": pd.Series([f.events_read for f in trace.files], dtype="int64"),
        "devices": [json.dumps(list(f.devices)) for f in trace.files],
        "distributed": [json.dumps(f.distributed) for f in trace.files],
        "flags": [json.dumps(f.flags) for f in trace.files],
    })


def _manifest(trace: Trace) -> dict:
    return {"format": EXPORT_FORMAT, "perfkit": __version__, "schema": SCHEMA_VERSION, "tables": list(TABLES),
            "partitioning": "hive: rank=<int>", "ranks": trace.ranks, "sources": [path_text(f.path) for f in trace.files]}


def _move_into_place(staging: Path, target: Path) -> None:
    """``staging`` becomes ``target``; a dataset already there is first moved aside into a hidden ``.part`` of
    its own, removed once the new one is in place (or by the next export, if this process dies between)."""
    if not target.exists():
        os.replace(staging, target)
        return
    with staged(target, folder=True) as aside:
        os.replace(target, aside)
        os.replace(staging, target)
