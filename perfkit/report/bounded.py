"""Replies that fit a budget: the text ``perfkit mcp``'s tools return and ``perfkit <command> --markdown``
prints. A :class:`Reply` is the one-line answer and blocks (:class:`Lines`, :class:`Table`), each with where
its figures come from; :func:`page` lays out as much of it as fits ``budget`` tokens (counted as
characters / 4, the estimate agents' clients use), whole rows only, and ends with ``more: "<cursor>"`` where
something is left: the same request with that cursor gives the next page. :func:`json_page` does the same
for the answer's JSON object, cutting its lists (rows in the analysis's own order) rather than the text.

A cursor names its place (block and row, or the first list row) and a digest of the answer it belongs to:
one from another tool, other parameters or a trace that changed since is refused, never read as a place
in something else.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from ..errors import ParameterError
from ..text import json_text, printable

CHARS_PER_TOKEN = 4
DEFAULT_BUDGET = 4_000
MIN_BUDGET, MAX_BUDGET = 500, 50_000
CELL_CHARS = 160  # a longer cell (a kernel's templated name) is cut, with an ellipsis: its row stays whole
_CURSOR = re.compile(r"^(m\d+\.\d+|j\d+)\.([0-9a-f]{12})$")


@dataclass(frozen=True)
class Lines:
    """A titled list of lines (facts, fixes, warnings); ``source`` says where their figures come from."""

    title: str
    lines: list
    source: str = ""


@dataclass(frozen=True)
class Table:
    """A table whose ``rows`` (tuples of cells) are ranked best first, so that a page keeps the top ones;
    ``ranked_by`` says by what, ``source`` where the figures come from (the events to check with ``sql``)."""

    title: str
    columns: tuple
    rows: list
    ranked_by: str = ""
    source: str = ""


@dataclass(frozen=True)
class Reply:
    """The one-line answer first, then its blocks."""

    answer: str
    blocks: list = field(default_factory=list)


def check_budget(budget) -> int:
    """``budget`` (tokens) as an int in [MIN_BUDGET, MAX_BUDGET]. Raises ParameterError."""
    if isinstance(budget, bool) or not isinstance(budget, int) or not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise ParameterError(f"budget={budget!r:.40}: give a whole number of tokens from {MIN_BUDGET:,} to "
                             f"{MAX_BUDGET:,} (default {DEFAULT_BUDGET:,}; a token is about 4 characters)")
    return budget


def digest(tool: str, data) -> str:
    """12 hex digits naming one answer: the tool and its whole JSON object."""
    return hashlib.blake2b(f"{tool}\n{json_text(data)}".encode(), digest_size=6).hexdigest()


def page(reply: Reply, *, tool: str, answer_digest: str, budget: int = DEFAULT_BUDGET,
         cursor: str | None = None) -> str:
    """The markdown of ``reply`` from ``cursor`` on (None: the start) that fits ``budget`` tokens, ending with
    ``more: "<cursor>"`` where rows are left. Raises ParameterError for a cursor of another answer."""
    limit = check_budget(budget) * CHARS_PER_TOKEN
    block, row = _place(cursor, "m", answer_digest, tool)
    if block > len(reply.blocks) or (block < len(reply.blocks) and row > _length(reply.blocks[block])):
        raise _stale(cursor, tool)
    first = _short(reply.answer, limit // 4) + ("" if cursor is None else " (continued)")
    reserve = len(_more_line(tool, f"m{len(reply.blocks)}.99999.{answer_digest}")) + 2
    out = [first]
    used = len(first) + 1
    while block < len(reply.blocks):
        lines, taken = _fit(reply.blocks[block], row, limit - reserve - used, empty=len(out) == 1)
        out += lines
        used += sum(len(line) + 1 for line in lines)
        if row + taken < _length(reply.blocks[block]):
            out.append(_more_line(tool, f"m{block}.{row + taken}.{answer_digest}"))
            return "\n".join(out)
        block, row = block + 1, 0
    return "\n".join(out)


def json_page(answer: str, data: dict, *, tool: str, answer_digest: str, budget: int = DEFAULT_BUDGET,
              cursor: str | None = None, sources: dict | None = None) -> str:
    """``{"answer", "sources", "data", "rows", "more"}`` as JSON text within ``budget`` tokens. ``sources`` (the
    first page only): where the figures of each table come from, as many as fit a quarter of the budget, in
    order. ``data`` is the answer's
    object whole where it fits; otherwise its pieces in order (each value that is not an object or a list, and
    each row of a list, never cut), from the cursor's piece on, as many as fit: merging the pages in order
    (objects key by key, lists appended) gives ``data`` whole. ``rows`` says, per list on the page (its keys
    joined by "."), [first, end, of]; ``more``, the cursor of the next page or null. Raises ParameterError for
    a cursor of another answer, or where one row alone is longer than the budget."""
    limit = check_budget(budget) * CHARS_PER_TOKEN
    answer = _short(answer, limit // 4)
    start = _place(cursor, "j", answer_digest, tool)[0]
    head = {"answer": answer, **({"sources": _fitting(sources, limit // 4)} if sources and not start else {})}
    whole = {**head, "data": data, "rows": {}, "more": None}
    if not start and len(json_text(whole)) <= limit:
        return json_text(whole)
    units = list(_units(data, ()))
    if start >= len(units):
        raise _stale(cursor, tool)
    empty = json_text({**head, "data": {}, "rows": {}, "more": f"j{len(units)}.{answer_digest}"})
    room, end, opened = limit - len(empty), start, ()
    while end < len(units):
        path, row = units[end]
        cost = _cost(data, path, row, opened)
        if cost > room:
            break
        room, end, opened = room - cost, end + 1, path
    while True:
        if end == start:
            raise ParameterError(f"one row of this answer is longer than budget={budget:,} tokens: raise budget "
                                 f"(at most {MAX_BUDGET:,}) or ask for format=\"markdown\"")
        text = json_text({**head, "data": _tree(data, units[start:end]),
                          "rows": _spans(data, units, start, end),
                          "more": f"j{end}.{answer_digest}" if end < len(units) else None})
        if len(text) <= limit:
            return text
        end -= 1


def _fitting(sources: dict, chars: int) -> dict:
    """The first entries of ``sources`` whose JSON fits ``chars``."""
    out = {}
    for key, value in sources.items():
        if len(json_text({**out, key: value})) > chars:
            break
        out[key] = value
    return out


def _units(data: dict, path: tuple):
    """(keys, row) of each piece of ``data`` in order: a list's rows (row: their index; an empty list is one
    piece, row None), and every other value that is not a non-empty object (row None)."""
    for key, value in data.items():
        here = path + (key,)
        if isinstance(value, list) and value:
            yield from ((here, i) for i in range(len(value)))
        elif isinstance(value, dict) and value:
            yield from _units(value, here)
        else:
            yield here, None


def _at(data: dict, path: tuple):
    for key in path:
        data = data[key]
    return data


def _cost(data: dict, path: tuple, row, opened: tuple) -> int:
    """Characters (at most) that the piece adds to a page whose last piece was at ``opened``."""
    shared = 0
    while shared < min(len(path), len(opened)) and path[shared] == opened[shared]:
        shared += 1
    keys = path[shared:] if row is None or path != opened else ()
    value = _at(data, path) if row is None else _at(data, path)[row]
    return sum(len(json_text(k)) + 3 for k in keys) + len(json_text(value)) + 1


def _tree(data: dict, units: list) -> dict:
    out = {}
    for path, row in units:
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        if row is None:
            node[path[-1]] = _at(data, path)
        else:
            node.setdefault(path[-1], []).append(_at(data, path)[row])
    return out


def _spans(data: dict, units: list, start: int, end: int) -> dict:
    """{list's keys joined by ".": [first, end, of]} of the lists whose rows are on the page."""
    spans = {}
    for path, row in units[start:end]:
        if row is not None:
            name = ".".join(map(str, path))
            spans[name] = [spans.get(name, [row])[0], row + 1, len(_at(data, path))]
    return spans


def _place(cursor, kind: str, answer_digest: str, tool: str) -> tuple[int, int]:
    if cursor is None:
        return 0, 0
    match = _CURSOR.match(cursor) if isinstance(cursor, str) else None
    if not match or match.group(1)[0] != kind or match.group(2) != answer_digest:
        raise _stale(cursor, tool)
    numbers = [int(n) for n in match.group(1)[1:].split(".")]
    return numbers[0], numbers[1] if len(numbers) > 1 else 0


def _stale(cursor, tool: str) -> ParameterError:
    return ParameterError(f"cursor={str(cursor)!r:.60} is not a place in this answer of {tool} (it came from "
                          f"another tool, other parameters or format, or the trace changed since): call {tool} "
                          f"without a cursor")


def _more_line(tool: str, cursor: str) -> str:
    return f'more: "{cursor}" (the rest: call {tool} again with cursor="{cursor}")'


def _length(block) -> int:
    return len(block.rows) if isinstance(block, Table) else len(block.lines)


def _fit(block, row: int, room: int, *, empty: bool) -> tuple[list, int]:
    """(lines, rows taken) of ``block`` from ``row`` within ``room`` characters; on an otherwise empty page
    at least one row, its cells shortened where the row alone is longer than the room."""
    head = _head(block, row)
    rows = [_row(block, r) for r in range(row, _length(block))]
    lines, used = [], sum(len(h) + 1 for h in head)
    for text in rows:
        if used + len(text) + 1 > room:
            break
        lines.append(text)
        used += len(text) + 1
    if not lines and rows and empty:
        lines = [_squeeze(block, row, room - used)]
    return (head + lines if lines else []), len(lines)


def _head(block, row: int) -> list:
    total = _length(block)
    ranked = f", by {block.ranked_by}" if getattr(block, "ranked_by", "") else ""
    shown = f" ({total:,} row{'' if total == 1 else 's'}{ranked}{', from row ' + str(row + 1) if row else ''})" \
        if isinstance(block, Table) else ""
    head = ["", f"## {_line(block.title)}{shown}"]
    if block.source:
        head.append(f"source: {_line(block.source)}")
    if isinstance(block, Table):
        head += ["| " + " | ".join(_cell(c) for c in block.columns) + " |",
                 "|" + "---|" * len(block.columns)]
    return head


def _row(block, r: int) -> str:
    if isinstance(block, Table):
        return "| " + " | ".join(_cell(c) for c in block.rows[r]) + " |"
    return "- " + _line(block.lines[r])


def _squeeze(block, r: int, room: int) -> str:
    """Row ``r`` with its cells cut to share ``room`` characters (at least 8 each): the row stays whole."""
    cells = block.rows[r] if isinstance(block, Table) else (block.lines[r],)
    each = max(8, room // max(len(cells), 1) - 3)
    cut = [_cell(c, each) for c in cells]
    return "| " + " | ".join(cut) + " |" if isinstance(block, Table) else "- " + cut[0]


def _cell(value, chars: int = CELL_CHARS) -> str:
    text = _line(value).replace("|", "\\|")
    return text if len(text) <= chars else text[:chars - 1] + "…"


def _short(text: str, chars: int) -> str:
    """``text`` on one line, cut to ``chars`` with an ellipsis (an answer quoting a long query)."""
    line = _line(text)
    return line if len(line) <= chars else line[:chars - 1] + "…"


def _line(value) -> str:
    return " ".join(printable("" if value is None else str(value)).split())
