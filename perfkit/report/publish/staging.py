"""The staging folder papermill writes into: one per running ``perfkit run``, ``<out>/.staging/.run.XXXXXXXX.part``,
held under an exclusive ``flock`` of the run that made it (:func:`perfkit.atomic.staged`) and removed after the
run. A staging folder whose lock no live process holds (a run killed with SIGKILL) is removed by the next run.
Ownership is proven by the lock, never guessed from a process id: two runs in different PID namespaces (two
containers sharing one workbook) each took the other's ``.staging/<pid>`` for a dead run's and removed it."""
from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Iterator

from ...atomic import output_error, remove_abandoned, staged

STAGING = ".staging"
_RUN = "run"


@contextlib.contextmanager
def run_staging(out: Path) -> Iterator[Path]:
    """This run's staging folder under the reports folder ``out``, created and locked for the block, removed
    after it (with ``.staging`` when nothing else is left in it). Raises OutputError when it cannot be made."""
    root = out / STAGING
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(root, exc) from exc
    try:
        with staged(root / _RUN, folder=True) as folder:
            yield folder
    finally:
        remove_if_empty(root)


def clear(folder: Path) -> None:
    """Empty ``folder`` (one notebook's staging files, before the next notebook of the run)."""
    for item in folder.iterdir():
        if item.is_dir() and not item.is_symlink():
            shutil.rmtree(item, ignore_errors=True)
        else:
            item.unlink(missing_ok=True)


def remove_stale_staging(out: Path) -> None:
    """Remove the staging folders of runs that died (their lock is free); live runs' stay."""
    remove_abandoned(out / STAGING, f".{_RUN}.")
    remove_if_empty(out / STAGING)


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` when nothing is left in it (another run's staging keeps it)."""
    try:
        folder.rmdir()
    except OSError:  # absent, or not empty
        pass
