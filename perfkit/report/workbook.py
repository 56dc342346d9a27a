"""Where the workbook lives: one folder holding ``notebooks/`` and ``reports/``.

Every path default of the runner, the CLI and the notebooks comes from here, so ``perfkit run``,
papermill in any working directory and JupyterLab (whose kernel starts in ``notebooks/``) write to
the same ``reports/`` and perf log:

* ``workbook_root()``: ``$PERFKIT_HOME`` when set; else the nearest of the working directory and
  its parents that holds a ``notebooks/`` folder with a perfkit notebook in it (a clone of perfkit,
  or a folder made by ``perfkit init``); else the working directory itself (an installed perfkit
  run from any folder writes ``./reports``).
* ``reports_dir()`` and ``perf_log_path()``: ``<root>/reports`` and ``<root>/reports/perf_log.csv``.
* ``notebook_dirs()``: the workbook's ``notebooks/`` first, then the notebooks shipped inside the
  package (``perfkit/_workbook/notebooks``, package data), so an installed perfkit runs the
  whole workbook from an empty folder.
* ``SHIPPED_TRACES``: the small reference traces shipped with the package (``data/traces/cpu``);
  ``SHIPPED_RANK_SETS``: multi-rank examples, one folder of per-rank traces each (``data/traces/ranks``).
* ``init_workbook(folder)``: ``perfkit init``: copies the notebooks (as ``.ipynb``), a
  ``reports/`` folder and a README stub into a user's project.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import ParameterError
from .registry import NOTEBOOK_SUFFIXES, notebook_names, shipped_notebooks

PACKAGED = Path(__file__).resolve().parents[1] / "_workbook"
# In a clone these are symbolic links to the repository's notebooks/ and data/traces/; a wheel
# holds copies (pyproject.toml package-data).
PACKAGED_NOTEBOOKS = PACKAGED / "notebooks"
SHIPPED_TRACES = PACKAGED / "traces" / "cpu"
SHIPPED_RANK_SETS = PACKAGED / "traces" / "ranks"
HOME_VARIABLE = "PERFKIT_HOME"
REPORTS = "reports"
PERF_LOG = "perf_log.csv"


def workbook_root(start: str | os.PathLike | None = None) -> Path:
    """The workbook folder (see the module docstring); ``start`` defaults to the working
    directory. Raises ParameterError when ``$PERFKIT_HOME`` names something that is not a folder."""
    home = os.environ.get(HOME_VARIABLE, "").strip()
    if home:
        path = Path(home).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise ParameterError(f"{HOME_VARIABLE}={home}: not a folder; point it at your workbook folder "
                                 "(the one holding notebooks/ and reports/) or unset it")
        return path
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_workbook(folder):
            return folder
    return here


def is_workbook(folder: Path) -> bool:
    """True when ``folder/notebooks`` holds a notebook named like a registered investigation."""
    notebooks = folder / "notebooks"
    if not notebooks.is_dir():
        return False
    return any((notebooks / f"{name}{suffix}").is_file() for name in notebook_names() for suffix in NOTEBOOK_SUFFIXES)


def reports_dir(start: str | os.PathLike | None = None) -> Path:
    """``<workbook root>/reports``."""
    return workbook_root(start) / REPORTS


def perf_log_path(given: str | os.PathLike | None = None) -> Path:
    """``given`` as an absolute path when set (an explicit path wins), else the workbook's
    ``reports/perf_log.csv``."""
    if given not in (None, ""):
        return Path(given).expanduser().resolve()
    return reports_dir() / PERF_LOG


def notebook_dirs(start: str | os.PathLike | None = None) -> list[Path]:
    """Folders searched for a notebook by name: ``$PERFKIT_NOTEBOOK_DIR`` alone when set, else the
    workbook's ``notebooks/`` (when it exists) and then the packaged notebooks."""
    override = os.environ.get("PERFKIT_NOTEBOOK_DIR")
    if override:
        return [Path(override).expanduser().resolve()]
    own = workbook_root(start) / "notebooks"
    dirs = [own] if own.is_dir() else []
    return dirs + [PACKAGED_NOTEBOOKS.resolve()] if PACKAGED_NOTEBOOKS.resolve() not in dirs else dirs


def shipped_traces() -> list[str]:
    """File names of the reference traces shipped with perfkit (``data/traces/cpu``)."""
    return sorted(p.name for p in SHIPPED_TRACES.glob("*.json.gz"))


def shipped_rank_sets() -> list[str]:
    """Folder names of the multi-rank examples shipped with perfkit (``data/traces/ranks``)."""
    return sorted(p.name for p in SHIPPED_RANK_SETS.glob("*") if p.is_dir())


def relative_name(path: str | os.PathLike) -> str:
    """``path`` as a report may show it: relative to the workbook root or to the shipped traces
    when under them, else its file name alone (a shared report must not carry local paths)."""
    path = Path(path).resolve()
    if path.parent in (SHIPPED_TRACES.resolve(), SHIPPED_RANK_SETS.resolve()):
        return path.name  # shipped traces are found by name, clone or installed
    root = workbook_root()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


README_STUB = """# perfkit workbook

Made by `perfkit init`. Open the notebooks in `notebooks/` with JupyterLab, set the parameters
cell, and run them; or run them all into dated HTML reports:

    perfkit run                      # every investigation -> reports/<date>/<time>/*.html
    perfkit run cpu_bound -p trace_path my_trace.json.gz
    perfkit run case_studies         # the five worked case studies (case_*.ipynb)
    perfkit log                      # the performance log, regressions flagged

Reports and the performance log (`reports/perf_log.csv`) land in this folder whatever the working
directory, as long as you work inside it (or set PERFKIT_HOME to it).
"""


def init_workbook(folder: str | os.PathLike, *, force: bool = False) -> list[Path]:
    """Copy every packaged notebook (investigations and case studies) into ``folder/notebooks`` as
    ``.ipynb``, create ``folder/reports`` and a ``README.md`` stub; returns the files written. Existing files are
    kept unless ``force``. Raises ParameterError when ``folder`` is a file."""
    from ..atomic import write_text_atomic
    from .registry import read_notebook, write_ipynb_text

    root = Path(folder).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ParameterError(f"perfkit init {folder}: a file is in the way; give a folder")
    (root / "notebooks").mkdir(parents=True, exist_ok=True)
    (root / REPORTS).mkdir(exist_ok=True)
    written = []
    targets = {root / "README.md": README_STUB}
    for name in shipped_notebooks():
        source = PACKAGED_NOTEBOOKS / f"{name}.py"
        if source.is_file():
            targets[root / "notebooks" / f"{name}.ipynb"] = write_ipynb_text(read_notebook(source))
    for target, text in targets.items():
        if force or not target.exists():
            write_text_atomic(target, text)
            written.append(target)
    return written
