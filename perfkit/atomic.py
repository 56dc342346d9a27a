"""Atomic file writes, in one place: everything perfkit writes (caches, reports, traces, logs)
appears whole or not at all, and an interrupted write never destroys the previous version.

What the user points perfkit at is written to, never replaced: a symlink is followed (the file it
names is replaced, the link stays), and a target that is not a regular file (``-`` for standard
output, ``/dev/stdout``, a device, a FIFO) is streamed to once the whole output is ready."""
from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable

from .errors import OutputError


def atomic_write(target, write: Callable[[str], None], *, user_output: bool = False) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``target``, fsync it, then move it into
    place with the mode a plain ``open()`` would give (0644 under the usual umask: ``mkstemp``
    makes 0600 files, which other users could not read). Raises :class:`OutputError` naming
    ``target`` when it cannot be written (the previous version, if any, is left as it was)."""
    target = Path(target)
    if user_output and _streamed(target):  # a path the user named (annotate -o): never a cache that waits on a FIFO
        _stream(target, write)
        return
    target = Path(os.path.realpath(target)) if user_output and target.is_symlink() else target
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    except OSError as exc:
        raise output_error(target, exc) from exc
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        fsync_path(tmp)
        os.replace(tmp, target)
    except OSError as exc:
        raise output_error(target, exc) from exc
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _streamed(target: Path) -> bool:
    """``-`` or an existing target that is not a regular file (after symlinks): written to, not replaced."""
    if str(target) == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(target).st_mode) and not stat.S_ISDIR(os.stat(target).st_mode)
    except OSError:
        return False


def _stream(target: Path, write: Callable[[str], None]) -> None:
    """``write`` into a temporary file, then copy it to ``target`` (or standard output for ``-``)."""
    with tempfile.TemporaryDirectory(prefix=".perfkit-out.") as folder:
        tmp = os.path.join(folder, "out")
        write(tmp)
        try:
            with open(tmp, "rb") as src:
                if str(target) == "-":
                    sys.stdout.flush()
                    shutil.copyfileobj(src, sys.stdout.buffer)
                    sys.stdout.buffer.flush()
                else:
                    with open(target, "wb") as dst:
                        shutil.copyfileobj(src, dst)
        except OSError as exc:
            raise output_error(target, exc) from exc


_FIXES = {
    errno.ENOSPC: "free some space or write it elsewhere (nothing was half-written)",
    errno.EDQUOT: "free some of your quota or write it elsewhere (nothing was half-written)",
    errno.EROFS: "write it to a folder on a writable file system",
    errno.EACCES: "write it to a folder you may write to",
    errno.EPERM: "write it to a folder you may write to",
    errno.ENOENT: "choose a path in an existing folder you may write to",
    errno.ENOTDIR: "a file is in the way of the folder: choose another path",
    errno.EISDIR: "a folder has that name: choose a file name",
    errno.EFBIG: "the file is larger than this shell lets a process write (ulimit -f): raise the limit or write it "
                 "elsewhere (nothing was half-written)",
}


def output_error(target, exc: OSError) -> OutputError:
    """``exc``, raised while writing ``target``, as an OutputError that says what to do."""
    if isinstance(exc, OutputError):  # raised for a file inside ``target`` (a dataset folder): name target
        return exc if exc.path == str(target) else OutputError(target, exc.reason, exc.fix)
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT and not Path(target).parent.exists():
        reason = f"its folder {Path(target).parent} does not exist"
    return OutputError(target, reason, _FIXES.get(exc.errno, ""))


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def write_text_atomic(target, text: str, *, user_output: bool = False) -> None:
    atomic_write(target, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), user_output=user_output)


def fsync_path(path) -> None:
    """Flush a file's (or a directory's entries') data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
