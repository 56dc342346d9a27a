"""Columnar cache of loaded traces (uncompressed Arrow IPC files, memory-mapped when read).

The first load of a file writes ``<key>.events.arrow``, ``<key>.flows.arrow`` and ``<key>.json``
(format version, perfkit version, the file's fingerprint and its metadata) into the cache directory:
``$PERFKIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/perfkit`` (``~/.cache/perfkit``). A later load
of the unchanged file reads the cache. The fingerprint is the file's size, modification time and a
hash of its first and last 64 KiB, so a changed file misses the cache; a cache written by another
perfkit or cache format version is ignored and rewritten, never misread. Writes are atomic.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pandas as pd

from .. import __version__
from ..atomic import atomic_write, write_text_atomic
from .schema import SCHEMA_VERSION

CACHE_FORMAT = 3
_EDGE = 64 << 10


def cache_dir() -> Path:
    env = os.environ.get("PERFKIT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perfkit"


def fingerprint(path: Path) -> dict:
    stat = path.stat()
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        digest.update(fh.read(_EDGE))
        if stat.st_size > _EDGE:
            fh.seek(max(stat.st_size - _EDGE, _EDGE))
            digest.update(fh.read(_EDGE))
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "edges": digest.hexdigest()}


def _key(path: Path) -> str:
    return hashlib.blake2b(str(path.resolve()).encode(), digest_size=12).hexdigest()


def _stamp(path: Path) -> dict:
    return {"cache_format": CACHE_FORMAT, "schema": SCHEMA_VERSION, "perfkit": __version__,
            "source": str(path.resolve()), "fingerprint": fingerprint(path)}


def read(path: Path):
    """(events, flows, meta dict) from the cache, or None when absent, stale or from another version."""
    base = cache_dir() / _key(path)
    try:
        info = json.loads(base.with_suffix(".json").read_text())
        if {k: info.get(k) for k in ("cache_format", "schema", "perfkit", "source", "fingerprint")} != _stamp(path):
            return None
        import pyarrow.feather as feather

        events = feather.read_table(f"{base}.events.arrow", memory_map=True).to_pandas(split_blocks=True)
        flows = feather.read_table(f"{base}.flows.arrow", memory_map=True).to_pandas(split_blocks=True)
    except (OSError, ValueError, KeyError):
        return None
    return events, flows, info["meta"]


def write(path: Path, events: pd.DataFrame, flows: pd.DataFrame, meta: dict) -> str | None:
    """Write the cache; returns a warning string when the cache directory is not writable."""
    import pyarrow as pa
    import pyarrow.feather as feather

    directory = cache_dir()
    base = directory / _key(path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for suffix, frame in ((".events.arrow", events), (".flows.arrow", flows)):
            table = pa.Table.from_pandas(frame, preserve_index=False)
            atomic_write(f"{base}{suffix}", lambda tmp, t=table: feather.write_feather(t, tmp, compression="uncompressed"))
        info = dict(_stamp(path), meta=meta)
        write_text_atomic(base.with_suffix(".json"), json.dumps(info))
    except OSError as exc:
        return f"trace cache not written to {directory} ({exc}); set PERFKIT_CACHE_DIR to a writable directory"
    return None
