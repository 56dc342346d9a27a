"""Which notebooks a run runs: a name ("cpu_bound") or a path found in the notebook folders, a set
name ("case_studies") expanded to its notebooks, and by default every registered investigation."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ...errors import ParameterError
from ...registry import NOTEBOOK_SUFFIXES, expand_sets, notebook_names
from ...workbook import notebook_dirs


def find_notebook(name_or_path: str | os.PathLike, directory: str | os.PathLike | None = None) -> Path:
    """The notebook file for a name ("cpu_bound") or a path (.py or .ipynb); for a name, the
    first of ``directory`` (else ``workbook.notebook_dirs()``) that has ``NAME.ipynb`` or
    ``NAME.py``. ParameterError listing what is available if none."""
    text = str(name_or_path)
    if Path(text).suffix in NOTEBOOK_SUFFIXES:
        if Path(text).is_file():
            return Path(text).resolve()
        raise ParameterError(f"notebook {text!r} not found: no such file")
    dirs = [Path(directory).resolve()] if directory else notebook_dirs()
    for folder in dirs:
        for suffix in NOTEBOOK_SUFFIXES:
            if (folder / f"{text}{suffix}").is_file():
                return (folder / f"{text}{suffix}").resolve()
    found = sorted({p.stem for d in dirs if d.is_dir() for s in NOTEBOOK_SUFFIXES for p in d.glob(f"*{s}")})
    raise ParameterError(f"notebook {text!r} not found in {', '.join(str(d) for d in dirs)}; available: "
                         f"{', '.join(found) or 'none'} (set PERFKIT_NOTEBOOK_DIR to look elsewhere)")


def select_notebooks(names: Iterable[str] | None, directory) -> list[Path]:
    """The notebook files to run, each once, in order: ``names`` (set names expanded), or every
    registered investigation found when ``names`` is None. ParameterError when none is found."""
    if names is None:
        names = []
        for name in notebook_names():
            try:
                names.append(find_notebook(name, directory))
            except ParameterError:
                continue
        if not names:
            raise ParameterError(f"no investigation notebooks ({', '.join(notebook_names())}) found; "
                                 "name notebooks explicitly or set PERFKIT_NOTEBOOK_DIR")
    return list(dict.fromkeys(find_notebook(n, directory) for n in expand_sets(names)))
