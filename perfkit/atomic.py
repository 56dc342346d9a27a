"""Atomic file writes, in one place: everything perfkit writes (caches, reports, traces, logs)
appears whole or not at all, and an interrupted write never destroys the previous version."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def atomic_write(target, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``target``, fsync it, then move it into place."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    try:
        write(tmp)
        fsync_path(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(target, text: str) -> None:
    atomic_write(target, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def fsync_path(path) -> None:
    """Flush a file's (or a directory's entries') data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
