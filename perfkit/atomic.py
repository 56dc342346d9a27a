"""Atomic file writes, in one place: everything perfkit writes (caches, reports, traces, logs)
appears whole or not at all, and an interrupted write never destroys the previous version."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def atomic_write(target, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``target``, fsync it, then move it into
    place with the mode a plain ``open()`` would give (0644 under the usual umask: ``mkstemp``
    makes 0600 files, which other users could not read)."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        fsync_path(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def write_text_atomic(target, text: str) -> None:
    atomic_write(target, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def fsync_path(path) -> None:
    """Flush a file's (or a directory's entries') data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
