"""Atomic file writes, in one place: everything perfkit writes (caches, reports, traces, logs, datasets)
appears whole or not at all, and an interrupted write never destroys the previous version.

What a path the user names (``user_output``: ``annotate -o``, ``--collapsed``, ``perfkit init``'s files) is
written to, never replaced: a symlink is followed (the file it names is replaced, the link stays; a link to
nothing yet is followed as ``>`` follows it; a loop of links is refused), and a target that is not a regular
file (``-`` for standard output, ``/dev/stdout``, a device, a FIFO) is streamed to once the whole output is
ready. A path perfkit chose (a cache entry, a report in its run folder) is never followed: a link planted
there is replaced, and a device, FIFO or folder in its place is refused, never replaced. Either way an
existing file keeps its mode and owner (perfkit refuses one it could not give back to its owner, or may not
write).

The new version is written into a hidden ``.NAME.XXXXXXXX.part`` beside the target (a folder for a dataset)
and moved into place. The writer holds an exclusive ``flock`` on it while it writes, so the next write to
the same target removes the ``.part`` files of writers that died (SIGKILL, a power cut) and no one else's.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .errors import OutputError, ParameterError

_NAME_MAX = 255  # bytes in one file name on Linux and macOS file systems
_PART, _NEW = ".part", ".new"
_RANDOM = 8  # characters tempfile adds


def atomic_write(target, write: Callable[[str], None], *, user_output: bool = False) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``target``, fsync it, then move it into
    place with the mode and owner of the file it replaces, or the mode a plain ``open()`` would give
    a new one (0644 under the usual umask: ``mkstemp`` makes 0600 files, which other users could not
    read). Raises :class:`OutputError` naming ``target`` when it cannot be written (the previous
    version, if any, is left as it was)."""
    target = Path(target)
    if user_output and _streamed(target):  # a path the user named (annotate -o): never a cache that waits on a FIFO
        _stream(target, write)
        return
    # A path the user named is written through its link; one perfkit chose (a cache entry, a report) never is:
    # a link planted there (to /dev/zero, to another user's file) is replaced, not followed.
    target = followed(target) if user_output else target
    previous = _previous(target, follow=user_output)
    with staged(target) as tmp:
        try:
            _take_over(tmp, target, previous)
            write(str(tmp))
            fsync_path(tmp)
            os.replace(tmp, target)
        except OSError as exc:
            raise output_error(target, exc) from exc


def followed(target: Path) -> Path:
    """``target``, or the path its symbolic link(s) name (which need not exist yet). Raises OutputError
    for a loop of links."""
    try:
        if not stat.S_ISLNK(os.lstat(target).st_mode):
            return target
    except (FileNotFoundError, NotADirectoryError):
        return target
    except OSError as exc:  # a name too long
        raise output_error(target, exc) from exc
    real = Path(os.path.realpath(target))
    if real.is_symlink():  # realpath stops where it cannot resolve: a loop
        raise OutputError(target, "it is a loop of symbolic links", "remove the link or write elsewhere")
    return real


def _previous(target: Path, follow: bool) -> os.stat_result | None:
    """The stat of the regular file ``target`` replaces (None: there is none, or ``target`` is a link that is not
    ``follow``ed and is replaced as it is). Raises OutputError for a folder, a device, a FIFO or a socket (never
    replaced: a device node replaced by a file breaks the system), and when this process may not write the
    file (a file it could not open for writing is not its to replace)."""
    try:
        info = os.stat(target) if follow else os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise output_error(target, exc) from exc
    if stat.S_ISLNK(info.st_mode):
        return None
    if stat.S_ISDIR(info.st_mode):
        raise output_error(target, OSError(errno.EISDIR, "Is a directory"))
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(target, "it is not a regular file (a device, a FIFO or a socket), which perfkit never "
                          "replaces", "write to a file")
    if not os.access(target, os.W_OK):
        read_only = os.statvfs(target).f_flag & os.ST_RDONLY
        raise output_error(target, OSError(errno.EROFS, "Read-only file system") if read_only else
                           OSError(errno.EACCES, "Permission denied"))
    return info


def _take_over(tmp: Path, target: Path, previous: os.stat_result | None) -> None:
    """Give ``tmp`` the mode and owner of the file it will replace (a new file: 0666 less the umask)."""
    if previous is None:
        os.chmod(tmp, 0o666 & ~_umask())
        return
    made = os.stat(tmp)
    if previous.st_uid != made.st_uid:
        try:
            os.chown(tmp, previous.st_uid, previous.st_gid)
        except PermissionError:
            raise OutputError(target, f"it belongs to another user (uid {previous.st_uid}), and a new version "
                              "written by you would be yours", "ask its owner, or write it elsewhere") from None
    elif previous.st_gid != made.st_gid:
        with contextlib.suppress(PermissionError):  # a group this user is not in: the file stays the user's own
            os.chown(tmp, -1, previous.st_gid)
    os.chmod(tmp, stat.S_IMODE(previous.st_mode))


@contextlib.contextmanager
def staged(target: Path, *, folder: bool = False) -> Iterator[Path]:
    """A new hidden ``.NAME.XXXXXXXX.part`` file (or, with ``folder``, directory) beside ``target``, held under
    an exclusive flock until the block ends and removed then unless it was moved into place. First removes
    the ``.part`` of earlier writers of ``target`` that died (their lock is free). Raises OutputError when
    none can be made there."""
    target = Path(target)
    prefix = _hidden_prefix(target.name)
    remove_abandoned(target.parent, prefix)
    try:
        new = Path(tempfile.mkdtemp(prefix=prefix, suffix=_NEW, dir=target.parent) if folder else
                   _closed(tempfile.mkstemp(prefix=prefix, suffix=_NEW, dir=target.parent)))
        fd = os.open(new, os.O_RDONLY)
    except OSError as exc:
        raise output_error(target, exc) from exc
    part = new.with_name(new.name[:-len(_NEW)] + _PART)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(new, part)  # only now a .part: a cleaner never sees it before it is locked
        yield part
    finally:
        _remove(part if part.exists() or part.is_symlink() else new)
        os.close(fd)


def remove_abandoned(folder: Path, prefix: str = ".") -> list[Path]:
    """Remove the ``PREFIX*.part`` files and folders in ``folder`` whose writer died (no one holds their lock);
    returns what was removed."""
    removed = []
    try:
        parts = [p for p in folder.glob(f"{_glob_escape(prefix)}*{_PART}") if p.name.startswith(".")]
    except OSError:
        return removed
    for part in parts:
        try:
            fd = os.open(part, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:  # gone, a link (not ours), unreadable
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a live writer's
            os.close(fd)
            continue
        try:
            _remove(part)
            removed.append(part)
        finally:
            os.close(fd)
    return removed


def _hidden_prefix(name: str) -> str:
    """``.NAME.``, NAME cut (at a character boundary) so that the temporary's whole name stays within 255
    bytes: a 252-byte output name must still be writable."""
    room = _NAME_MAX - 2 - _RANDOM - max(len(_PART), len(_NEW))
    raw = os.fsencode(name)
    while len(raw) > room:
        name = name[:-1]
        raw = os.fsencode(name)
    return f".{name}."


def _glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _closed(made: tuple[int, str]) -> str:
    os.close(made[0])
    return made[1]


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        pass


def refuse_clobber(output, inputs: Iterable[tuple[str, object]]) -> None:
    """Raise ParameterError when ``output`` is (through links or hard links) the same file as one of the
    ``(what, path)`` inputs or logs of the same command, or a folder holding one: writing it would destroy
    what the command reads or appends to."""
    out = Path(os.path.abspath(os.path.expanduser(os.fspath(output))))
    real = Path(os.path.realpath(out))
    for what, path in inputs:
        if path in (None, ""):
            continue
        source = Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
        same = real == source or _same_file(out, source)
        if same or real in source.parents:
            how = "is" if same else "holds"
            raise ParameterError(f"{output}: the output {how} {what} of this command ({path}): writing it would "
                                 "destroy it; choose another path")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


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
    errno.ENAMETOOLONG: "a file name has at most 255 bytes here: choose a shorter one",
    errno.ELOOP: "a loop of symbolic links is in the way: remove it or write elsewhere",
}


def output_error(target, exc: OSError) -> OutputError:
    """``exc``, raised while writing ``target``, as an OutputError that says what to do."""
    if isinstance(exc, OutputError):  # raised for a file inside ``target`` (a dataset folder): name target
        return exc if exc.path == str(target) else OutputError(target, exc.reason, exc.fix)
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT and not Path(target).parent.exists():
        reason = f"its folder {Path(target).parent} does not exist"
    if exc.errno == errno.ENAMETOOLONG:
        reason = f"its name is {len(os.fsencode(Path(target).name)):,} bytes long"
    return OutputError(target, reason, _FIXES.get(exc.errno, ""))


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def new_folder_mode() -> int:
    """The mode ``mkdir`` gives a new folder under this process's umask (0755 under 022)."""
    return 0o777 & ~_umask()


def write_text_atomic(target, text: str, *, user_output: bool = False) -> None:
    atomic_write(target, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), user_output=user_output)


def fsync_path(path) -> None:
    """Flush a file's (or a directory's entries') data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
