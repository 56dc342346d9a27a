"""The folders ``perfkit mcp`` reads traces from (``--root DIR``, default the working directory): a path an
agent gives is taken from the first root it exists under (or as given, when absolute), with ``..`` and every
symbolic link resolved, and refused unless the file, and each trace file of a folder, lies inside a root."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ParameterError, TraceError
from ..trace.loader.load import resolve_paths


class Roots:
    """The real paths of the folders a server may read under."""

    def __init__(self, folders):
        self.folders = []
        for folder in folders or [os.getcwd()]:
            real = Path(os.path.realpath(os.path.expanduser(str(folder))))
            if not real.is_dir():
                raise ParameterError(f"--root {folder}: not a folder; give a folder that holds the traces")
            self.folders.append(real)

    def __repr__(self) -> str:
        return f"Roots({', '.join(map(str, self.folders))})"

    def inside(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in self.folders)

    def resolve(self, path) -> tuple[Path, list[Path]]:
        """(the real path, its trace files' real paths) of ``path`` (a file or a folder of per-rank traces).
        Raises ParameterError for a path outside the roots (through ``..`` or a link too) or found nowhere."""
        if not isinstance(path, str) or not path.strip() or "\0" in path:
            raise ParameterError(f"path={str(path)!r:.80}: give a trace file or folder as text, relative to "
                                 f"{self.folders[0]}")
        given = Path(os.path.expanduser(path))
        candidates = [given] if given.is_absolute() else [root / given for root in self.folders]
        real = next((r for r in map(_real, candidates) if r is not None and _exists(r)), None)
        if real is None:
            outside = [r for r in map(_real, candidates) if r is not None and not self.inside(r)]
            raise self._outside(path) if outside else ParameterError(
                f"{_shown(path)}: no such file or folder under {self._names()}; list the folder or give another path")
        if not self.inside(real):
            raise self._outside(path)
        try:
            listed = resolve_paths(real)
        except TraceError as exc:
            raise ParameterError(str(exc)) from None
        files = [Path(os.path.realpath(f)) for f in listed]
        escaped = [(given, file) for given, file in zip(listed, files) if not self.inside(file)]
        if escaped:
            raise self._outside(f"{_shown(path)} (its file {escaped[0][0].name} links to {escaped[0][1]})")
        return real, files

    def _outside(self, what: str) -> ParameterError:
        return ParameterError(f"{_shown(what, 400)}: outside the folders this server reads ({self._names()}); give a "
                              f"path under one of them, or start the server with --root DIR for another")

    def _names(self) -> str:
        return ", ".join(map(str, self.folders))


def _shown(path: str, most: int = 200) -> str:
    """``path`` as an error message quotes it: cut to ``most`` characters, so that what to do still fits."""
    return path if len(path) <= most else path[:most - 1] + "…"


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name longer than the file system takes
        return False


def _real(path: Path) -> Path | None:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):  # a name too long, a loop of links
        return None
