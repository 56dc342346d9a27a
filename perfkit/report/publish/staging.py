"""The staging folder papermill writes into (``<out>/.staging/<pid>``): one per running process,
removed after its run, and on the next run when a killed run left it behind."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

STAGING = ".staging"


def process_staging(out: Path) -> Path:
    """This process's staging folder under the reports folder ``out`` (not created)."""
    return out / STAGING / str(os.getpid())


def remove_stale_staging(out: Path) -> None:
    """Staging folders of runs whose process is gone (killed, e.g. SIGKILL) are removed."""
    staging = out / STAGING
    for folder in staging.glob("*") if staging.is_dir() else ():
        if folder.name.isdigit() and not _alive(int(folder.name)):
            shutil.rmtree(folder, ignore_errors=True)
    remove_if_empty(staging)


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` when nothing is left in it (another run's staging keeps it)."""
    try:
        folder.rmdir()
    except OSError:  # absent, or not empty
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
