"""``perfkit run [NAME...] [-p KEY VALUE]... [--out DIR] [--date YYYY-MM-DD]``: execute
investigation notebooks into dated HTML reports and rebuild the index."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ..errors import ParameterError
from ..report.publish.runner import run_all
from .parsers import add_run

__all__ = ["register", "run", "parse_value"]

_INT = re.compile(r"^[+-]?\d+$")


def register(subparsers) -> None:
    add_run(subparsers).set_defaults(func=run)


def parse_value(text: str):
    """A -p value: int, float, bool, None, a JSON list or object, else the text."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null", "~"):
        return None
    if _INT.match(stripped):
        return int(stripped)
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped, parse_constant=_refuse_constant(text), parse_float=_finite_float(text))
        except ValueError as exc:
            raise ParameterError(f"-p value {text!r} starts like JSON but is not valid JSON ({exc}); "
                                 "quote keys and strings with double quotes: '{\"envs\": 8}'") from None
    try:
        number = float(stripped)
    except ValueError:
        return text
    if not math.isfinite(number):
        raise ParameterError(_too_large(text, stripped) if _NUMBER.match(stripped) else _not_finite(text, stripped))
    return number


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _too_large(text: str, token: str) -> str:
    return f"-p value {text!r}: {token} is too large for a float (it would be inf); give a number below 1.8e308"


def _not_finite(text: str, token: str) -> str:
    return (f"-p value {text!r}: {token} is not a finite number; notebook parameters are finite numbers, text, "
            "True/False, None, or JSON lists and objects of them")


def _finite_float(text: str):
    """``parse_float`` of json.loads: a float token, refused when it overflows to inf."""
    def parse(token: str) -> float:
        number = float(token)
        if not math.isfinite(number):
            raise ParameterError(_too_large(text, token))
        return number
    return parse


def _refuse_constant(text: str):
    """``parse_constant`` of json.loads: NaN, Infinity and -Infinity are refused."""
    def refuse(token: str):
        raise ParameterError(_not_finite(text, token))
    return refuse


def run(args) -> int:
    params = {key: parse_value(value) for key, value in args.parameters}
    runs = run_all(args.names or None, params, out_dir=args.out, date=args.date, kernel_name=args.kernel,
                   progress=not args.no_progress, notebook_dir=args.notebook_dir)
    for r in runs:
        print(f"{'ok' if r.ok else 'FAILED':<7} {r.name:<20} {r.duration_s:7.1f} s  {r.html_path or '-'}")
        if not r.ok:
            cell = f"cell {r.failed_cell_index}: " if r.failed_cell_index is not None else ""
            print(f"{'':<8}{cell}{r.error}")
        for w in r.warnings:
            print(f"{'':<8}warning: {w}")
    failed = sum(not r.ok for r in runs)
    print(f"{len(runs) - failed} ok, {failed} failed; index: {Path(runs[0].out_dir) / 'index.html'}")
    return 1 if failed else 0
