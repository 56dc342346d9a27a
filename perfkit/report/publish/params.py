"""Checks of the parameters given to investigation notebooks (``perfkit run -p KEY VALUE``) against
what each notebook declares in its ``parameters`` cell, made before any kernel starts."""
from __future__ import annotations

import ast

from ...errors import ParameterError

SIMPLE_TYPES = ("int", "float", "bool", "str")


def refuse_containers_for_scalars(declared: dict, params: dict) -> None:
    """A JSON list or object given for a parameter a notebook declares as a number, bool or text
    (``-p scale '{"__class__": 1}'``) is refused before anything runs; other mismatches are warnings."""
    for path, names in declared.items():
        for key, value in params.items():
            expected = declared_type(names.get(key, {}))
            if expected in SIMPLE_TYPES and isinstance(value, (dict, list)):
                kind = "object" if isinstance(value, dict) else "list"
                raise ParameterError(f"-p {key}: {path.stem} declares {key} as {expected}, got a JSON {kind}; "
                                     f"give a value of type {expected}")


def declared_type(info: dict) -> str | None:
    """The type a parameter is declared with: its annotation (``scale: int = 2``), else the type
    of its literal default (``scale = 2``)."""
    if info.get("inferred_type_name") not in (None, "None"):
        return info["inferred_type_name"]
    try:
        return type(ast.literal_eval(info.get("default", ""))).__name__
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
