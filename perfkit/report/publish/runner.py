"""Run investigation notebooks with papermill into dated, shareable reports.

``run_all()`` runs every registered investigation (``perfkit.registry``) as one run:
``reports/<date>/<HHMMSS>/<name>.ipynb`` (executed, code kept), ``.html`` (the shareable report:
no code cells, no local paths) and ``.run.json`` (status, failing cell, duration, the verdict
card), then rebuilds ``reports/index.html``. Each run gets its own time folder, so runs on one
day never overwrite each other; its id ("DATE/HHMMSS") prefixes the perf-log rows it writes.

Before anything runs, the parameters are checked against each notebook's ``parameters`` cell
(papermill only warns), the output folder and the perf log are checked to be writable and
readable: a bad ``--out`` or a corrupt log fails in a second, not after the notebooks ran. The
kernel starts in the caller's working directory, so a relative ``trace_path`` means what it
means in the caller's shell. papermill writes into a staging folder (``<out>/.staging/.run.*.part``,
held under the run's lock, removed after the run, and on the next run when a killed run left it behind);
the reports are moved into place atomically.

The pieces live beside this module: choosing notebooks (``selection``), checking parameters
(``params``), the staging folder (``staging``), running papermill (``execute``), the progress
line (``progress``) and the run record (``records``).
"""
from __future__ import annotations

import os
import re
from datetime import date as _date
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable

from ...atomic import output_error
from ...errors import ParameterError
from ..perflog import PerfLog
from ...workbook import reports_dir
from .execute import execute_notebook
from .index import build_index
from .kernel import kernel_warnings
from .params import (check_parameters, notebook_parameters, refuse_clobbering_outputs, refuse_impossible_values,
                     type_warnings, with_runner_parameters)
from .progress import Progress
from .records import NotebookRun
from .selection import select_notebooks
from .staging import remove_stale_staging, run_staging

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def prepare_out_dir(out_dir: str | os.PathLike | None) -> Path:
    """The reports folder, created, as an absolute path: ``out_dir`` or the workbook's
    ``reports/``. ParameterError when it is "", a file, or not writable (checked before any
    notebook runs)."""
    if out_dir is not None and str(out_dir).strip() == "":
        raise ParameterError("--out '': give a reports folder (default: the workbook's reports/)")
    out = Path(out_dir).expanduser().resolve() if out_dir is not None else reports_dir()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParameterError(f"--out {out}: cannot create the reports folder ({exc.strerror}); "
                             "give a folder you can write") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ParameterError(f"--out {out}: the reports folder is not writable; give a folder you can write")
    return out


def new_run_folder(out: Path, day: str, when: datetime | None = None) -> Path:
    """``out/DAY/HHMMSS`` (``-2``, ``-3``... when that second is taken), created."""
    stamp = (when or datetime.now()).strftime("%H%M%S")
    for n in range(1, 1000):
        folder = out / day / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
        except OSError as exc:
            raise output_error(folder, exc) from exc
    raise ParameterError(f"{out / day}: no free run folder for {stamp}")


def run_notebook(name_or_path: str | os.PathLike, parameters: dict | None = None,
                 out_dir: str | os.PathLike | None = None, date: str | _date | None = None,
                 kernel_name: str | None = None, progress: bool = True, *,
                 notebook_dir: str | os.PathLike | None = None) -> NotebookRun:
    """Run one notebook as a run of its own: ``run_all([name], ...)[0]`` (see ``run_all``)."""
    return run_all([name_or_path], parameters, out_dir, date, kernel_name, progress,
                   notebook_dir=notebook_dir, index=False)[0]


def run_all(names: Iterable[str] | None = None, parameters: dict | None = None,
            out_dir: str | os.PathLike | None = None, date: str | _date | None = None,
            kernel_name: str | None = None, progress: bool = True, *,
            notebook_dir: str | os.PathLike | None = None, index: bool = True,
            on_done: Callable[[NotebookRun], None] | None = None) -> list[NotebookRun]:
    """Run several notebooks (default: every registered investigation found; a set name such as
    "case_studies" stands for its notebooks, ``registry.NOTEBOOK_SETS``) as one run into
    ``out_dir/DATE/HHMMSS/`` (``out_dir`` default: the workbook's ``reports/``), keep going past
    failures, then rebuild ``out_dir/index.html`` (unless ``index=False``).

    Each notebook gets the subset of ``parameters`` it declares (``change`` among them), plus
    ``perf_log_path`` (default ``out_dir/perf_log.csv``) and ``run_label`` ("DATE/HHMMSS/name") when
    it declares them (``params.RUNNER_PARAMETERS``). Raises ParameterError (nothing runs) for an unknown notebook, a parameter no
    notebook declares, a malformed date or an unusable ``out_dir``; PerfLogError for a perf log
    that cannot be read or appended.
    """
    paths = select_notebooks(names, notebook_dir)
    declared = {p: notebook_parameters(p) for p in paths}
    params = dict(parameters or {})
    check_parameters(", ".join(p.stem for p in paths), list(dict.fromkeys(n for d in declared.values() for n in d)),
                     params)
    refuse_impossible_values(declared, params)
    day = _iso_day(date)
    out = prepare_out_dir(out_dir)
    log_path = Path(params.get("perf_log_path") or out / "perf_log.csv").expanduser().resolve()
    refuse_clobbering_outputs(params, log_path)
    PerfLog(log_path).check()
    remove_stale_staging(out)
    folder = new_run_folder(out, day)
    runs = []
    with Progress(len(paths), progress) as bar, run_staging(out) as stage:
        for path in paths:
            own = {k: v for k, v in params.items() if k in declared[path]}
            own = with_runner_parameters(own, declared[path], log_path, folder, out, path.stem)
            bar.start(path.stem)
            warnings = type_warnings(declared[path], own) + tuple(kernel_warnings(kernel_name))
            runs.append(execute_notebook(path, folder, own, kernel_name, warnings, stage))
            bar.done(runs[-1])
            if on_done is not None:
                on_done(runs[-1])
    if index:
        build_index(out, perf_log=log_path)
    return runs


# -- internals -------------------------------------------------------------------------------

def _iso_day(value: str | _date | None) -> str:
    text = value if isinstance(value, str) else (value or _date.today()).strftime("%Y-%m-%d")
    try:
        if _DATE.match(text) and _date.fromisoformat(text):
            return text
    except ValueError:
        pass
    raise ParameterError(f"date={value!r}: use YYYY-MM-DD (reports go to <out>/YYYY-MM-DD/HHMMSS/)")
