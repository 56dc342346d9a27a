"""``load_trace``: files, directories or lists of PyTorch profiler traces -> :class:`Trace`."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from ..errors import TraceError
from . import cache
from .columns import ColumnBuilder
from .model import Trace, TraceFile
from .schema import LAUNCH_CATEGORIES
from .parse import CHUNK_BYTES, ParsedTrace, parse_trace
from .steps import STEP_COLUMNS, file_steps
from .workers import process_pool, resolve_workers

TRACE_SUFFIXES = (".json", ".json.gz")
_FLAG_KEYS = ("with_stack", "record_shapes", "profile_memory", "with_flops", "with_modules")


def load_trace(source, *, use_cache: bool = True, salvage: bool = False, progress: bool = False,
               workers: int | None = None) -> Trace:
    """Load one trace file, a directory of per-rank/worker files, or a list of files.

    ``source``: a ``.json`` / ``.json.gz`` path, a directory (as written by
    ``torch.profiler.tensorboard_trace_handler``), or an iterable of paths.
    ``use_cache``: read/write the columnar cache (see :mod:`perfkit.trace.cache`).
    ``salvage``: keep the complete events of a file cut off mid-write (with a warning) instead of raising.
    ``progress``: show a tqdm bar over the files (several files) or the bytes of one large file.
    ``workers``: processes that parse (default: one per core); several files are parsed one per
    worker, each cached as it finishes, and one large file is parsed in chunks by all of them.
    Pass ``workers=1`` where the caller is itself a worker (a Dask task, a process pool).
    Raises :class:`~perfkit.errors.TraceError` (naming the file and the problem) for unreadable input.
    """
    paths = resolve_paths(source)
    workers = resolve_workers(workers)
    files, events, flows, steps, warnings = [], [], [], [], []
    loaded = _load_files(paths, use_cache=use_cache, salvage=salvage, progress=progress, workers=workers)
    for file_id, (path, (ev, fl, meta, warns)) in enumerate(zip(paths, loaded)):
        if meta["rank"] is None:
            meta["rank"] = file_id
            ev = ev.assign(rank=np.int32(file_id))
        files.append(_trace_file(path, meta))
        events.append(ev)
        flows.append(fl)
        steps.append(pd.DataFrame(meta["steps"]).assign(rank=meta["rank"]))
        warnings.extend(f"{path.name}: {w}" for w in warns)
        if meta["step_warning"]:
            warnings.append(f"{path.name} (rank {meta['rank']}): {meta['step_warning']}")
    table = pd.concat(steps, ignore_index=True)[STEP_COLUMNS].sort_values(["rank", "start_us"], kind="stable")
    return Trace(_concat(events), _concat(flows), files, table.reset_index(drop=True), warnings)


def resolve_paths(source) -> list[Path]:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise TraceError(path, "directory has no trace files (*.json, *.json.gz)",
                                 "Point at the directory tensorboard_trace_handler wrote, or at a trace file")
            return found
        if not path.exists():
            raise TraceError(path, "no such file or directory")
        return [path]
    if isinstance(source, Iterable):
        paths = [Path(p) for p in source]
        if not paths:
            raise TraceError("<list>", "empty list of trace files")
        for p in paths:
            if not p.is_file():
                raise TraceError(p, "no such file")
        return paths
    raise TraceError(repr(source), "expected a path, a directory or a list of paths")


def _load_files(paths: list[Path], *, use_cache: bool, salvage: bool, progress: bool, workers: int):
    """(events, flows, meta, warnings) of each path, in order. One file gets every worker; several
    are parsed one per worker process (cache hits are read here, memory-mapped), each written to
    the cache by the worker that parsed it, so at most ``workers`` parses are in memory at once."""
    if len(paths) == 1:
        yield _load_file(paths[0], 0, use_cache=use_cache, salvage=salvage, progress=progress, workers=workers)
        return
    hits = [_cached(path, file_id) if use_cache else None for file_id, path in enumerate(paths)]
    missing = [file_id for file_id, hit in enumerate(hits) if hit is None]
    pool = process_pool(min(workers, len(missing))) if workers > 1 and len(missing) > 1 else None
    bar = _file_progress(len(paths), len(paths) - len(missing)) if progress else None  # after the fork
    try:
        futures = {i: pool.submit(_load_file, paths[i], i, use_cache=use_cache, salvage=salvage)
                   for i in missing} if pool is not None else {}
        for future in futures.values():
            if bar is not None:
                future.add_done_callback(lambda _: bar.update(1))
        for file_id, hit in enumerate(hits):
            if hit is None and pool is None:
                hit = _load_file(paths[file_id], file_id, use_cache=use_cache, salvage=salvage)
                if bar is not None:
                    bar.update(1)
            yield hit if hit is not None else futures[file_id].result()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()


def _cached(path: Path, file_id: int):
    hit = cache.read(path)
    if hit is None:
        return None
    events, flows, meta = hit
    return (*_with_file_id(events, flows, file_id), meta, [])


def _load_file(path: Path, file_id: int, *, use_cache: bool, salvage: bool, progress: bool = False, workers: int = 1):
    """The per-file load: cache hit, or parse (with ``workers`` processes) and cache."""
    if use_cache:
        hit = _cached(path, file_id)
        if hit is not None:
            return hit
    events, flows, meta, warnings = _parse_file(path, salvage=salvage, progress=progress, workers=workers)
    if use_cache and not warnings:  # only clean parses are cached, so a cache hit has no warnings
        problem = cache.write(path, events, flows, meta)
        warnings = [problem] if problem else []
    return (*_with_file_id(events, flows, file_id), meta, warnings)


def _with_file_id(events: pd.DataFrame, flows: pd.DataFrame, file_id: int):
    if len(events) and events["file_id"].iat[0] != file_id:
        events = events.assign(file_id=np.int16(file_id))
        flows = flows.assign(file_id=np.int16(file_id))
    return events, flows


def _parse_file(path: Path, *, salvage: bool, progress: bool = False, workers: int = 1):
    bar = _ByteProgress(path) if progress else None
    try:
        parsed = parse_trace(path, salvage=salvage, workers=workers, on_progress=bar)
    finally:
        if bar is not None:
            bar.close()
    return _build(path, parsed)


def _build(path: Path, parsed: ParsedTrace):
    """The tables and metadata of a parsed file (columns assembled, validated, steps found)."""
    meta_doc, builder = parsed.meta, parsed.columns
    rank = _rank(meta_doc)
    builder.rank = rank if rank is not None else 0
    events, flows = builder.frames()
    _validate(path, events, builder.n_seen)
    _fill_copy_bytes(events)
    steps, step_warning = file_steps(events)
    meta = dict(_meta(meta_doc, builder), steps=steps.to_dict(orient="list"), step_warning=step_warning)
    return events, flows, meta, parsed.warnings


def _rank(meta_doc: dict):
    info = meta_doc.get("distributedInfo")
    if isinstance(info, dict) and info.get("rank") is not None:
        try:
            return int(info["rank"])
        except (TypeError, ValueError):
            return None
    return None


def _validate(path: Path, events: pd.DataFrame, n_seen: int) -> None:
    if n_seen == 0:
        raise TraceError(path, "traceEvents is empty", "Profile at least one step (check the profiler schedule)")
    complete = events["ph"] == "X"
    for column, what in (("ts_us", "'ts'"), ("dur_us", "'dur'")):
        bad = events[complete & events[column].isna()] if column == "dur_us" else events[events[column].isna()]
        if len(bad):
            first = bad.iloc[0]
            raise TraceError(path, f"{len(bad):,} events have no numeric {what} (first: {first['name']!r}, "
                             f"cat {first['cat']!r})", "The file was not written by torch.profiler or was edited")
    negative = events[complete & (events["dur_us"] < 0)]
    if len(negative):
        first = negative.iloc[0]
        raise TraceError(path, f"{len(negative):,} events have a negative duration (first: {first['name']!r} "
                         f"dur {first['dur_us']} us at ts {first['ts_us']})", "The trace is corrupt; re-export it")


def _fill_copy_bytes(events: pd.DataFrame) -> None:
    """ROCm writes a copy's size only on its runtime call (``hipMemcpy* size``): give it to the GPU event."""
    gpu = (events["cat"] == "gpu_memcpy") & (events["bytes"] < 0) & (events["correlation"] >= 0)
    if not gpu.any():
        return
    host = events[events["cat"].isin(LAUNCH_CATEGORIES) & (events["bytes"] >= 0) & (events["correlation"] >= 0)]
    size = host.drop_duplicates("correlation").set_index("correlation")["bytes"]
    filled = events.loc[gpu, "correlation"].map(size)
    events.loc[filled.dropna().index, "bytes"] = filled.dropna().astype("int64")


def _meta(meta_doc: dict, builder: ColumnBuilder) -> dict:
    devices = meta_doc.get("deviceProperties") or []
    return {
        "rank": _rank(meta_doc),
        "schema_version": meta_doc.get("schemaVersion"),
        "base_time_ns": meta_doc.get("baseTimeNanoseconds"),
        "trace_name": str(meta_doc.get("traceName", "")),
        "devices": [d for d in devices if isinstance(d, dict)],
        "distributed": meta_doc.get("distributedInfo") if isinstance(meta_doc.get("distributedInfo"), dict) else {},
        "flags": {k: meta_doc[k] for k in _FLAG_KEYS if k in meta_doc},
        "events_read": builder.n_seen,
    }


def _trace_file(path: Path, meta: dict) -> TraceFile:
    return TraceFile(
        path=str(path), rank=meta["rank"],
        schema_version=meta["schema_version"], base_time_ns=meta["base_time_ns"], trace_name=meta["trace_name"],
        devices=tuple(meta["devices"]), distributed=meta["distributed"], flags=meta["flags"],
        events_read=meta["events_read"],
    )


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if len(frames) == 1:
        return frames[0]
    from pandas.api.types import union_categoricals

    out = {}
    for col in frames[0].columns:
        parts = [f[col] for f in frames]
        if isinstance(parts[0].dtype, pd.CategoricalDtype):
            out[col] = pd.Categorical(union_categoricals([p.astype("category") for p in parts]))
        else:
            out[col] = np.concatenate([p.to_numpy() for p in parts])
    return pd.DataFrame(out)


class _ByteProgress:
    """``on_progress`` for one file: a tqdm bar over its bytes on disk, opened on the first call
    (after the parser's worker processes are forked) and only for files large enough to wait for."""

    def __init__(self, path: Path):
        self.path, self.bar = path, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if total < 4 * CHUNK_BYTES:
                return
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=f"parsing {self.path.name}", unit="B", unit_scale=True, leave=False)
        self.bar.update(max(done - self.bar.n, 0))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _file_progress(total: int, done: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="loading traces", unit="file")
