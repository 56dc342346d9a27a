"""``perfkit run [NAME...] [-p KEY VALUE]... [--out DIR] [--date YYYY-MM-DD]``: execute
investigation notebooks into dated HTML reports and rebuild the index."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from ..errors import ParameterError
from ..limits import MAX_NESTING_DEPTH
from ..report.publish.params import text_parameters
from ..report.publish.runner import run_all
from ..report.publish.selection import select_notebooks
from ..text import printable
from .parsers import add_run

__all__ = ["register", "run", "parse_value"]

_INT = re.compile(r"^[+-]?\d+$")


def register(subparsers) -> None:
    add_run(subparsers).set_defaults(func=run)


def parse_value(text: str, *, as_text: bool = False):
    """A -p value: int, float, bool, None, a JSON list or object, else the text. ``as_text`` (a parameter every
    notebook declares as text, such as ``change``): a value that starts like JSON but is not JSON is that
    text, so that ``-p change "[WIP] pin memory"`` is a change note and not a broken JSON list. Raises
    ParameterError for text that is not UTF-8, a non-finite number, invalid JSON (for another parameter)
    and JSON nested deeper than ``PERFKIT_MAX_NESTING_DEPTH``."""
    _check_utf8(text)
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null", "~"):
        return None
    if _INT.match(stripped):
        return int(stripped)
    if stripped[:1] in ("{", "["):
        _check_depth(text, stripped)
        try:
            return json.loads(stripped, parse_constant=_refuse_constant(text), parse_float=_finite_float(text))
        except RecursionError:  # a PERFKIT_MAX_NESTING_DEPTH raised past what json.loads can recurse
            raise ParameterError(f"-p value {text[:40]!r}...: JSON nested too deep for Python's parser") from None
        except ValueError as exc:
            if as_text:
                return text
            raise ParameterError(f"-p value {text!r:.120} starts like JSON but is not valid JSON ({exc}); "
                                 "quote keys and strings with double quotes: '{\"envs\": 8}'") from None
    try:
        number = float(stripped)
    except ValueError:
        return text
    if not math.isfinite(number):
        raise ParameterError(_too_large(text, stripped) if _NUMBER.match(stripped) else _not_finite(text, stripped))
    return number


_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _check_utf8(text: str) -> None:
    """Refuse a value whose bytes were not UTF-8 (Python holds them as lone surrogates, which no notebook,
    perf log or report can store)."""
    bad = next((i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff"), None)
    if bad is not None:
        byte = ord(text[bad]) - 0xDC00 if ord(text[bad]) >= 0xDC80 else None
        what = f"byte {byte:#04x}" if byte is not None else "a lone surrogate"
        raise ParameterError(f"-p value {printable(text)!r:.120}: not UTF-8 text ({what} at character {bad}); type "
                             "it in UTF-8 (check the terminal's encoding and the locale, e.g. LANG=C.UTF-8)")


def _check_depth(text: str, stripped: str) -> None:
    """Refuse JSON nested deeper than MAX_NESTING_DEPTH before parsing it (json.loads recurses per level)."""
    depth, deepest, in_string, escaped = 0, 0, False, False
    for ch in stripped:
        if in_string:
            escaped, in_string = (not escaped and ch == "\\"), in_string and (escaped or ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    if deepest > MAX_NESTING_DEPTH.value():
        raise ParameterError(f"-p value {text[:40]!r}...: " + MAX_NESTING_DEPTH.refusal(f"JSON nested {deepest:,} "
                                                                                      "levels deep"))


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
    text = text_parameters(select_notebooks(args.names or None, args.notebook_dir))
    for key, _ in args.parameters:
        _check_utf8(key)
    params = {key: parse_value(value, as_text=key in text) for key, value in args.parameters}
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
