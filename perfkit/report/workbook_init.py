"""``perfkit init``: a workbook in a user's project: the notebooks (as ``.ipynb``), a ``reports/``
folder and a README stub."""
from __future__ import annotations

import os
from pathlib import Path

from ..atomic import output_error, write_text_atomic
from ..errors import ParameterError
from ..registry import read_notebook, shipped_notebooks, write_ipynb_text
from ..workbook import PACKAGED_NOTEBOOKS, REPORTS


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
    ``.ipynb``, create ``folder/reports`` and a ``README.md`` stub; returns the files written. Existing files
    (a link too, even one to nothing) are kept unless ``force``; with it, a link is followed, never replaced.
    Raises ParameterError when ``folder``, ``notebooks`` or ``reports`` is a file, OutputError when a folder or
    file cannot be made (a read-only folder, no space)."""
    root = Path(folder).expanduser().resolve()
    for path in (root, root / "notebooks", root / REPORTS):
        if path.exists() and not path.is_dir():
            raise ParameterError(f"perfkit init {folder}: {path} is a file, where the workbook needs a folder; "
                                 "move it aside or give another folder")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise output_error(path, exc) from None
    written = []
    targets = {root / "README.md": README_STUB}
    for name in shipped_notebooks():
        source = PACKAGED_NOTEBOOKS / f"{name}.py"
        if source.is_file():
            targets[root / "notebooks" / f"{name}.ipynb"] = write_ipynb_text(read_notebook(source))
    for target, text in targets.items():
        if force or not os.path.lexists(target):
            write_text_atomic(target, text, user_output=True)  # the user's folder: its links are followed
            written.append(target)
    return written
