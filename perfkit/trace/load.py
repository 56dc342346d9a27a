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
from .nesting import add_nesting, shift_parents
from .schema import LAUNCH_CATEGORIES
from .parse import CHUNK_BYTES, LayoutFallback, iter_event_batches, read_bytes
from .steps import STEP_COLUMNS, file_steps

TRACE_SUFFIXES = (".json", ".json.gz")
_FLAG_KEYS = ("with_stack", "record_shapes", "profile_memory", "with_flops", "with_modules")


def load_trace(source, *, use_cache: bool = True, salvage: bool = False, progress: bool = False) -> Trace:
    """Load one trace file, a directory of per-rank/worker files, or a list of files.

    ``source``: a ``.json`` / ``.json.gz`` path, a directory (as written by
    ``torch.profiler.tensorboard_trace_handler``), or an iterable of paths.
    ``use_cache``: read/write the columnar cache (see :mod:`perfkit.trace.cache`).
    ``salvage``: keep the complete events of a file cut off mid-write (with a warning) instead of raising.
    ``progress``: show tqdm progress over files, and over the bytes parsed of each large file.
    Raises :class:`~perfkit.errors.TraceError` (naming the file and the problem) for unreadable input.
    """
    paths = resolve_paths(source)
    files, events, flows, steps, warnings = [], [], [], [], []
    offset = 0
    for file_id, path in enumerate(_progress(paths, progress)):
        ev, fl, meta, warns = _load_file(path, file_id, use_cache=use_cache, salvage=salvage, progress=progress)
        if meta["rank"] is None:
            meta["rank"] = file_id
            ev = ev.assign(rank=np.int32(file_id))
        files.append(_trace_file(path, meta))
        events.append(shift_parents(ev, offset))  # parent labels are per file until concatenated
        offset += len(ev)
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


def _load_file(path: Path, file_id: int, *, use_cache: bool, salvage: bool, progress: bool = False):
    if use_cache:
        hit = cache.read(path)
        if hit is not None:
            events, flows, meta = hit
            return (*_with_file_id(events, flows, file_id), meta, [])
    events, flows, meta, warnings = _parse_file(path, salvage=salvage, progress=progress)
    if use_cache and not warnings:  # only clean parses are cached, so a cache hit has no warnings
        problem = cache.write(path, events, flows, meta)
        warnings = [problem] if problem else []
    return (*_with_file_id(events, flows, file_id), meta, warnings)


def _with_file_id(events: pd.DataFrame, flows: pd.DataFrame, file_id: int):
    if len(events) and events["file_id"].iat[0] != file_id:
        events = events.assign(file_id=np.int16(file_id))
        flows = flows.assign(file_id=np.int16(file_id))
    return events, flows


def _parse_file(path: Path, *, salvage: bool, progress: bool = False):
    text, warnings = read_bytes(path, salvage=salvage)
    box = [text]
    bar = _byte_progress(path, len(text)) if progress else None
    del text
    try:
        return _build(path, box, salvage=salvage, chunked=True, warnings=warnings, bar=bar)
    except LayoutFallback:
        return _build(path, box, salvage=salvage, chunked=False, warnings=warnings, bar=bar)
    finally:
        if bar is not None:
            bar.close()


def _build(path: Path, box: list, *, salvage: bool, chunked: bool, warnings: list, bar=None):
    """Parse the text in ``box``; the box is emptied once parsed so the text is freed before the
    tables are assembled (the peak is then text or tables, not both)."""
    meta_doc, batches, parse_warnings = iter_event_batches(path, box[0], salvage=salvage, chunked=chunked)
    rank = _rank(meta_doc)
    builder = ColumnBuilder(file_id=0, rank=rank if rank is not None else 0)
    size = len(box[0])
    for batch in batches:
        builder.add(batch)
        if bar is not None:
            bar.update(min(size, CHUNK_BYTES, bar.total - bar.n))
    box.clear()
    del batches
    events, flows = builder.frames()
    _validate(path, events, builder.n_seen)
    _fill_copy_bytes(events)
    steps, step_warning = file_steps(events)
    add_nesting(events, steps)
    meta = dict(_meta(meta_doc, builder), steps=steps.to_dict(orient="list"), step_warning=step_warning)
    return events, flows, meta, warnings + parse_warnings


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


def _byte_progress(path: Path, size: int):
    """A tqdm bar over the bytes of one file, only for files large enough to wait for."""
    if size < 4 * CHUNK_BYTES:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=size, desc=f"parsing {path.name}", unit="B", unit_scale=True, leave=False)


def _progress(paths, enabled: bool):
    if not enabled or len(paths) < 2:
        return paths
    from tqdm.auto import tqdm

    return tqdm(paths, desc="loading traces", unit="file")
