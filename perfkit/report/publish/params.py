"""Checks of the parameters given to investigation notebooks (``perfkit run -p KEY VALUE``) against
what each notebook declares in its ``parameters`` cell, made before any kernel starts."""
from __future__ import annotations

import ast

from ...errors import ParameterError

SIMPLE_TYPES = ("int", "float", "bool", "str")


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
