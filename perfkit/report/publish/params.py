"""Checks of the parameters given to investigation notebooks (``perfkit run -p KEY VALUE``) against
what each notebook declares in its ``parameters`` cell, made before any kernel starts."""
from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Iterable

from ...atomic import refuse_clobber
from ...errors import ParameterError
from ...registry import read_notebook
from .execute import require_papermill

SIMPLE_TYPES = ("int", "float", "bool", "str")
# Filled in by the runner for the notebooks that declare them, and only for those: the perf log
# the run appends to and the run's label ("DATE/HHMMSS/name"), in the order with_runner_parameters
# gives their values.
RUNNER_PARAMETERS = ("perf_log_path", "run_label")
# Parameters a notebook writes a file to (step_anatomy's annotated trace); each is checked before anything runs
# against the run's perf log and every path it reads (a parameter named ``*_path``, ``*_paths`` or ``*_traces``).
OUTPUT_PARAMETERS = ("annotated_path",)


def notebook_parameters(path: str | os.PathLike) -> dict:
    """The notebook's declared parameters: name -> {inferred_type_name, default, help}."""
    require_papermill()
    # papermill is heavy and optional (the workbook extra); inspect_notebook only takes .ipynb paths
    from papermill.inspection import _infer_parameters

    return {p.name: p._asdict() for p in _infer_parameters(read_notebook(path))}


def text_parameters(paths: Iterable[Path]) -> set[str]:
    """The parameters that every notebook of ``paths`` declaring them declares as text (``change = ""``)."""
    kinds: dict[str, set] = {}
    for path in paths:
        for name, info in notebook_parameters(path).items():
            kinds.setdefault(name, set()).add(declared_type(info))
    return {name for name, found in kinds.items() if found == {"str"}}


def check_parameters(name: str, declared: Iterable[str], given: Iterable[str]) -> None:
    """Raise ParameterError naming unknown parameters and the valid ones."""
    declared = list(declared)
    unknown = sorted(set(given) - set(declared))
    if unknown:
        valid = ", ".join(declared) or "none (no cell tagged 'parameters')"
        raise ParameterError(f"{name}: unknown parameter(s) {', '.join(unknown)}; valid: {valid}")


def with_runner_parameters(params: dict, declared: dict, log_path: Path, folder: Path, out: Path,
                           name: str) -> dict:
    """``params`` plus the RUNNER_PARAMETERS the notebook declares, for the run folder ``folder``
    under the reports folder ``out``."""
    run_label = f"{folder.relative_to(out).as_posix()}/{name}"
    values = dict(zip(RUNNER_PARAMETERS, (str(log_path), run_label), strict=True))
    return {**params, **{k: v for k, v in values.items() if k in declared}}


def refuse_clobbering_outputs(params: dict, log_path: Path) -> None:
    """Raise ParameterError when an ``OUTPUT_PARAMETERS`` value is the perf log or a path another parameter
    reads (``-p annotated_path reports/perf_log.csv`` replaced the log)."""
    for key in OUTPUT_PARAMETERS:
        if params.get(key):
            read = [(f"-p {k}", v) for k, value in params.items() if k != key and k.endswith(("_path", "_paths", "_traces"))
                    for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
            refuse_clobber(params[key], [("the perf log", log_path), *read])


def type_warnings(declared: dict, params: dict) -> tuple[str, ...]:
    """A warning for each value whose type differs from the declared default's (an int for a
    float is fine); the notebook still runs."""
    out = []
    for key, value in params.items():
        expected, got = declared.get(key, {}).get("inferred_type_name"), type(value).__name__
        if expected in SIMPLE_TYPES and value is not None and got != expected and (expected, got) != ("float", "int"):
            out.append(f"parameter {key}: the notebook's default is {expected}, got {got} {value!r}; check the value")
    return tuple(out)


def refuse_impossible_values(declared: dict, params: dict) -> None:
    """Refuse, before anything runs, a JSON list or object given for a parameter a notebook
    declares as a number, bool or text (``-p scale '{"__class__": 1}'``), and a negative integer
    for one whose default is a count (``top = 15``, ``-p top -5`` would cut rows off the end of a
    table); other mismatches are warnings."""
    for path, names in declared.items():
        for key, value in params.items():
            info = names.get(key, {})
            expected = declared_type(info)
            if expected in SIMPLE_TYPES and isinstance(value, (dict, list)):
                kind = "object" if isinstance(value, dict) else "list"
                raise ParameterError(f"-p {key}: {path.stem} declares {key} as {expected}, got a JSON {kind}; "
                                     f"give a value of type {expected}")
            if expected == "int" and _is_int(value) and value < 0 and _count_default(info):
                raise ParameterError(f"-p {key} {value}: {path.stem} declares {key} = {info['default']}, a count; "
                                     "give a whole number >= 0")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count_default(info: dict) -> bool:
    try:
        default = ast.literal_eval(info.get("default", ""))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return _is_int(default) and default >= 0


def declared_type(info: dict) -> str | None:
    """The type a parameter is declared with: its annotation (``scale: int = 2``), else the type
    of its literal default (``scale = 2``)."""
    if info.get("inferred_type_name") not in (None, "None"):
        return info["inferred_type_name"]
    try:
        return type(ast.literal_eval(info.get("default", ""))).__name__
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
