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
    first = _line(reply.answer) + ("" if cursor is None else " (continued)")
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
              cursor: str | None = None) -> str:
    """``{"answer", "data", "rows", "more"}`` as JSON text within ``budget`` tokens: ``data`` is the answer's
    object with each of its lists (reached through objects from the top) cut to the same rows, from the
    cursor's row on (a later page holds only the lists that go on); ``rows`` says, per list (its keys joined
    by "."), [first, end, of]; ``more``, the cursor of the next page or null. Concatenating the lists of every
    page in order gives ``data`` whole. Raises ParameterError for a cursor of another answer, or where one
    row of each list does not fit the budget."""
    limit = check_budget(budget) * CHARS_PER_TOKEN
    start = _place(cursor, "j", answer_digest, tool)[0]
    lists = dict(_lists(data, ()))
    longest = max((len(v) for v in lists.values()), default=0)
    if start and start >= longest:
        raise _stale(cursor, tool)
    whole = {"answer": answer, "data": data, "rows": {}, "more": None}
    if not start and len(json_text(whole)) <= limit:
        return json_text(whole)
    low, high, best = 1, max(longest - start, 1), None
    while low <= high:  # the most rows per list that fit
        mid = (low + high) // 2
        text = _json_cut(answer, data, lists, start, mid, tool, answer_digest)
        if len(text) <= limit:
            best, low = text, mid + 1
        else:
            high = mid - 1
    if best is None:
        raise ParameterError(f"{tool}: one row of each list of this answer is longer than budget={budget:,} tokens: "
                             f"raise budget (at most {MAX_BUDGET:,}) or ask for format=\"markdown\"")
    return best


def _json_cut(answer, data, lists, start, count, tool, answer_digest) -> str:
    end = start + count
    rows = {".".join(path): [start, min(end, len(v)), len(v)] for path, v in lists.items() if len(v) > start}
    more = f"j{end}.{answer_digest}" if any(len(v) > end for v in lists.values()) else None
    return json_text({"answer": answer, "data": _sliced(data, (), lists, start, end), "rows": rows, "more": more})


def _lists(data, path):
    """(path, list) of each list in ``data`` reached through objects only."""
    for key, value in data.items():
        if isinstance(value, list):
            yield path + (key,), value
        elif isinstance(value, dict):
            yield from _lists(value, path + (key,))


def _sliced(data: dict, path, lists, start, end) -> dict:
    out = {}
    for key, value in data.items():
        here = path + (key,)
        if here in lists:
            if start == 0 or len(value) > start:
                out[key] = value[start:end]
        elif isinstance(value, dict) and any(p[:len(here)] == here for p in lists):
            inner = _sliced(value, here, lists, start, end)
            if start == 0 or inner:
                out[key] = inner
        elif start == 0:
            out[key] = value
    return out


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
    shown = f" ({total:,} rows{', by ' + block.ranked_by if getattr(block, 'ranked_by', '') else ''}" \
            f"{', from row ' + str(row + 1) if row else ''})" if isinstance(block, Table) else ""
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


def _line(value) -> str:
    return " ".join(printable("" if value is None else str(value)).split())
