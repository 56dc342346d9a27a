"""``load_trace``: files, directories or lists of PyTorch profiler traces -> :class:`Trace`."""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from ...errors import TraceError
from . import cache
from ...limits import RANK_RANGE, span
from .columns import DROP_LABELS, ColumnBuilder
from .durations import pair_durations
from .metadata import checked_base_time, checked_devices
from ..model import Trace, TraceFile
from ..nesting import add_nesting, shift_parents
from ..schema import LAUNCH_CATEGORIES
from .parse import CHUNK_BYTES, ParsedTrace, parse_trace
from .jobs import assign_ranks, file_facts, one_job
from .split import refuse_arg_ranks, refuse_plain_and_gzip, split_merged_ranks
from ..steps import STEP_COLUMNS, file_steps
from .values import short_repr as _short
from .workers import process_pool, release_freed_memory, resolve_workers, small_pages

TRACE_SUFFIXES = (".json", ".json.gz")
MAX_FILES = 2**15 - 1  # file_id is int16 (schema.INT_COLUMNS)
_FLAG_KEYS = ("with_stack", "record_shapes", "profile_memory", "with_flops", "with_modules")


def load_trace(source, *, use_cache: bool = True, salvage: bool = False, progress: bool = False,
               workers: int | None = None, run: int | None = None) -> Trace:
    """Load one trace file, a directory of per-rank/worker files, or a list of files.

    ``source``: a ``.json`` / ``.json.gz`` path, a directory (as written by
    ``torch.profiler.tensorboard_trace_handler``), or an iterable of paths.
    ``use_cache``: read/write the columnar cache (see :mod:`perfkit.trace.loader.cache`).
    ``salvage``: keep the complete events of a file cut off mid-write (with a warning) instead of raising.
    ``progress``: show a tqdm bar over the files (several files) or the bytes of one large file.
    ``workers``: processes that parse (default: one per core); several files are parsed one per
    worker, each cached as it finishes, and one large file is parsed in chunks by all of them.
    Pass ``workers=1`` where the caller is itself a worker (a Dask task, a process pool).
    ``run``: of several files, the run to load (1 = the newest) where they are not the ranks of one job
    (:mod:`perfkit.trace.loader.jobs`); without it such files are refused, with the runs they hold.
    Raises :class:`~perfkit.errors.TraceError` (naming the file and the problem) for unreadable input
    and for files of several runs, ParameterError for a ``run`` that is not one of them.
    """
    paths = resolve_paths(source)
    if len(paths) > MAX_FILES:
        raise TraceError(os.fsdecode(source) if isinstance(source, (str, bytes, os.PathLike)) else "<list>",
                         f"{len(paths):,} trace files: perfkit loads at most {MAX_FILES:,} files at once (file_id is a "
                         "16-bit column)", "Load the ranks in groups (a list of files) or merge the files first")
    workers = resolve_workers(workers)
    with small_pages():
        loaded = list(_load_files(paths, use_cache=use_cache, salvage=salvage, progress=progress, workers=workers))
    paths, loaded, warnings = _one_job(source, paths, loaded, run)
    paths, loaded = _split_merged(paths, loaded)
    ranks, rank_warnings = assign_ranks(paths, [meta["rank"] for _, _, meta, _ in loaded],
                                   [_world_size(meta) for _, _, meta, _ in loaded])
    warnings += rank_warnings
    files, events, flows, steps = [], [], [], []
    offset = 0
    for path, rank, (ev, fl, meta, warns) in zip(paths, ranks, loaded):
        if len(ev) and ev["rank"].iat[0] != rank:
            ev = ev.assign(rank=np.int32(rank))
        files.append(_trace_file(path, meta, rank))
        events.append(shift_parents(ev, offset))  # parent labels are per file until concatenated
        offset += len(ev)
        flows.append(fl)
        steps.append(pd.DataFrame(meta["steps"]).assign(rank=rank))
        warnings.extend(f"{path.name}: {w}" for w in [*meta["warnings"], *warns])
        if meta["step_warning"]:
            warnings.append(f"{path.name} (rank {rank}): {meta['step_warning']}")
    table = pd.concat(steps, ignore_index=True)[STEP_COLUMNS].sort_values(["rank", "start_us"], kind="stable")
    return Trace(_concat(events), _concat(flows), files, table.reset_index(drop=True), warnings)


def _one_job(source, paths: list[Path], loaded: list, run: int | None):
    """The files of ``loaded`` that are one job (:func:`perfkit.trace.loader.jobs.one_job`), their file ids
    renumbered, and the warning naming the run ``run`` picked."""
    facts = [file_facts(path, meta["rank"], _world_size(meta), ev, meta["base_time_ns"])
             for path, (ev, _, meta, _) in zip(paths, loaded)]
    keep, notes = one_job(source, facts, run)
    if len(keep) == len(paths):
        return paths, loaded, notes
    picked = [(*_with_file_id(loaded[i][0], loaded[i][1], n), *loaded[i][2:]) for n, i in enumerate(keep)]
    return [paths[i] for i in keep], picked, notes


def _split_merged(paths: list[Path], loaded: list) -> tuple[list[Path], list]:
    """Each file holding several merged ranks (:mod:`perfkit.trace.loader.split`) as one entry per rank,
    with file ids renumbered in order."""
    out_paths, out = [], []
    for path, (ev, fl, meta, warns) in zip(paths, loaded):
        parts = split_merged_ranks(ev, fl, meta)
        if len(out) + len(parts) > MAX_FILES:
            raise TraceError(path, f"holds {len(parts):,} merged ranks: perfkit loads at most {MAX_FILES:,} "
                             "ranks at once", "Split the file, or load fewer files with it")
        for part_ev, part_fl, part_meta in parts:
            out_paths.append(path)
            out.append((*_with_file_id(part_ev, part_fl, len(out)), part_meta, warns))
    return out_paths, out


def resolve_paths(source) -> list[Path]:
    """The trace files ``source`` names: a file, the ``*.json``/``*.json.gz`` of a directory (sorted),
    or a list of files. Raises TraceError naming the path that is missing, unreadable, or not a
    regular file (a pipe or a device would block or never end)."""
    if isinstance(source, bytes):
        source = os.fsdecode(source)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        return _directory_traces(path) if _is_dir(path) else [_regular_file(path)]
    if isinstance(source, Iterable) and not isinstance(source, dict):
        try:
            paths = [Path(os.fsdecode(p)) for p in source]
        except TypeError:
            raise TraceError(repr(source)[:80], "expected a list of paths") from None
        if not paths:
            raise TraceError("<list>", "empty list of trace files")
        return [_regular_file(p) for p in paths]
    raise TraceError(repr(source)[:80], "expected a path, a directory or a list of paths")


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError as exc:  # e.g. a name too long
        raise TraceError(path, f"cannot reach it: {exc.strerror or exc}") from None


def _directory_traces(path: Path) -> list[Path]:
    try:
        entries = sorted(p for p in path.iterdir() if p.name.endswith(TRACE_SUFFIXES) and not p.is_dir() and not cache.is_entry(p))
    except OSError as exc:
        raise TraceError(path, f"cannot list the directory: {exc.strerror or exc}", _access_fix(exc)) from None
    if not entries:
        raise TraceError(path, "directory has no trace files (*.json, *.json.gz)",
                         "Point at the directory tensorboard_trace_handler wrote, or at a trace file")
    return [_regular_file(p) for p in refuse_plain_and_gzip(path, entries)]


def _regular_file(path: Path) -> Path:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        what = "a symbolic link to a missing file" if path.is_symlink() else "no such file or directory"
        raise TraceError(path, what) from None
    except OSError as exc:
        raise TraceError(path, f"cannot reach the file: {exc.strerror or exc}", _access_fix(exc)) from None
    if not stat.S_ISREG(mode):
        raise TraceError(path, "not a regular file (a directory, pipe, socket or device)",
                         "Pass a .json / .json.gz trace file or a directory of them")
    return path


def _access_fix(exc: OSError) -> str:
    return "Check the permissions of the path and of the directories above it" if isinstance(exc, PermissionError) else ""


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


def _cached(path: Path, file_id: int, stamp: dict | None = None):
    """The cached tables of ``path`` (stamped now unless ``stamp`` is given), or None."""
    try:
        hit = cache.read(path, cache.stamp(path) if stamp is None else stamp)
    except OSError as exc:
        raise TraceError(path, f"cannot read the file: {exc.strerror or exc}", _access_fix(exc)) from None
    if hit is None:
        return None
    events, flows, meta = hit
    return (*_with_file_id(events, flows, file_id), meta, [])


def _load_file(path: Path, file_id: int, *, use_cache: bool, salvage: bool, progress: bool = False,
               workers: int = 1):
    """(events, flows, meta, warnings) of one file, parsed by ``workers`` processes. The cache stamp is taken
    before the file is read and checked again after: a file replaced during the load is never cached."""
    try:
        stamp = cache.stamp(path) if use_cache else None
        hit = _cached(path, file_id, stamp) if use_cache else None
        if hit is not None:
            return hit
        writer = cache.Writer(path, stamp) if use_cache else None
        events, flows, meta, warnings = _parse_file(path, salvage=salvage, progress=progress, workers=workers, writer=writer)
    except OSError as exc:
        raise TraceError(path, f"cannot read the file: {exc.strerror or exc}", _access_fix(exc)) from None
    if use_cache and not warnings:  # only clean parses are cached, so a cache hit has no warnings
        warnings = writer.finish(events, meta)
    return (*_with_file_id(events, flows, file_id), meta, warnings)


def _with_file_id(events: pd.DataFrame, flows: pd.DataFrame, file_id: int):
    if len(events) and events["file_id"].iat[0] != file_id:
        events = events.assign(file_id=np.int16(file_id))
        flows = flows.assign(file_id=np.int16(file_id))
    return events, flows


def _parse_file(path: Path, *, salvage: bool, progress: bool = False, workers: int = 1, writer=None):
    bar = _ByteProgress(path) if progress else None
    try:
        parsed = parse_trace(path, salvage=salvage, workers=workers, on_progress=bar)
    finally:
        if bar is not None:
            bar.close()
    return _build(path, parsed, writer if not parsed.warnings else None)


def _build(path: Path, parsed: ParsedTrace, writer: cache.Writer | None = None):
    """The tables and metadata of a parsed file (assembled, validated, steps and nesting found; ``writer`` started)."""
    meta_doc, builder = parsed.meta, parsed.columns
    rank = _rank(meta_doc)
    builder.rank = rank if rank is not None else 0
    events, flows = builder.frames()
    release_freed_memory()  # the chunks' columns, now merged: ~140 MB on 2M events
    events, pair_warnings = pair_durations(events)
    _validate(path, events, builder)
    refuse_arg_ranks(path, events, builder.arg_ranks)
    _fill_copy_bytes(events)
    steps, step_warning = file_steps(events)
    if writer is not None:
        writer.start(events, flows)
    add_nesting(events, steps)
    meta = dict(_meta(meta_doc, builder), steps=steps.to_dict(orient="list"), step_warning=step_warning)
    meta["warnings"] += pair_warnings
    return events, flows, meta, parsed.warnings


def _rank(meta_doc: dict):
    """``distributedInfo.rank`` as an int in RANK_RANGE, else None (no claim)."""
    info = meta_doc.get("distributedInfo")
    return _small_int(info.get("rank"), RANK_RANGE) if isinstance(info, dict) else None


def _world_size(meta: dict):
    return _small_int(meta["distributed"].get("world_size"), RANK_RANGE)


def _small_int(value, bounds: tuple):
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = int(float(value)) if isinstance(value, (float, str)) else value
    except (ValueError, OverflowError):
        return None
    return number if bounds[0] <= number <= bounds[1] else None


def _validate(path: Path, events: pd.DataFrame, builder: ColumnBuilder) -> None:
    if builder.n_seen == 0:
        raise TraceError(path, "traceEvents is empty", "Profile at least one step (check the profiler schedule)")
    if len(events) == 0 and builder.drops:
        reasons = "; ".join(builder.drops.messages(DROP_LABELS, builder.n_seen))
        raise TraceError(path, f"no usable event: {reasons}", "The file was not written by torch.profiler or was edited")
    if len(events) == 0:
        phases = ", ".join(f"{n:,} {_short(ph)}" for ph, n in sorted(builder.skipped_phases.items()))
        raise TraceError(path, f"no timed event: its {builder.n_seen:,} events are of phases perfkit does not read "
                         f"({phases or 'unbalanced B/E'}; it reads X, B/E, i and C)",
                         "Profile at least one step; a file of metadata (M) events only is not a trace of a run")


def _load_warnings(meta_doc: dict, builder: ColumnBuilder) -> list[str]:
    """What the file's content costs the figures (dropped events, an unusable rank claim): kept
    in the metadata, so a cached load repeats them."""
    out = [*builder.drops.messages(DROP_LABELS, builder.n_seen), *builder.flow_drops.messages(DROP_LABELS, builder.n_seen)]
    info = meta_doc.get("distributedInfo")
    if isinstance(info, dict) and info.get("rank") is not None and _rank(meta_doc) is None:
        out.append(f"distributedInfo.rank {_short(info['rank'])} is not a rank in {span(RANK_RANGE)}: "
                   "ignored (the file is loaded as if it named none)")
    return out


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
    devices, device_warnings = checked_devices(meta_doc.get("deviceProperties"))
    base_time, time_warnings = checked_base_time(meta_doc.get("baseTimeNanoseconds"))
    return {
        "rank": _rank(meta_doc),
        "schema_version": meta_doc.get("schemaVersion"),
        "base_time_ns": base_time,
        "trace_name": str(meta_doc.get("traceName", "")),
        "devices": devices,
        "distributed": meta_doc.get("distributedInfo") if isinstance(meta_doc.get("distributedInfo"), dict) else {},
        "flags": {k: meta_doc[k] for k in _FLAG_KEYS if k in meta_doc},
        "recorder": meta_doc["perfkit_profile"] if isinstance(meta_doc.get("perfkit_profile"), dict) else {},
        "events_read": builder.n_seen,
        "warnings": [*_load_warnings(meta_doc, builder), *device_warnings, *time_warnings],
    }


def _trace_file(path: Path, meta: dict, rank: int) -> TraceFile:
    return TraceFile(
        path=str(path), rank=rank, claimed_rank=meta["rank"],
        schema_version=meta["schema_version"], base_time_ns=meta["base_time_ns"], trace_name=meta["trace_name"],
        devices=tuple(meta["devices"]), distributed=meta["distributed"], flags=meta["flags"],
        recorder=meta["recorder"], events_read=meta["events_read"],
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
