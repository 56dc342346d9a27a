"""What ``perfkit sql`` prints: a result frame (:func:`perfkit.analysis.sql.sql`) as an aligned table, CSV or
JSON lines, one row at a time, every value exact in each.

The frame holds each DuckDB type as ``sql`` fetched it: integers (nullable), floats, text, booleans, Python ints
(HUGEINT), ``Decimal`` (DECIMAL), lists and dicts of those, and DuckDB's own text for the rest (BLOB, BIT,
INTERVAL, UNION, dates and times). Here a NULL is ``NULL`` in the table, an empty cell in CSV and ``null`` in
JSON; a float is its shortest exact decimal (``repr``: 2**53 + 1 never becomes 9.007199e+15), NaN and infinities
``NaN``/``inf``/``-inf`` (``null`` in JSON, which has no such number); a nested value is its strict JSON text in
the table and CSV and the structure itself in JSON. CSV cells and headers that a spreadsheet would run as a
formula get a ``'`` in front (:func:`perfkit.text.csv_cell`).
"""
from __future__ import annotations

import csv
import decimal
import io
import math
from typing import Iterator

import pandas as pd

from ...analysis.sql import column_values, json_lines, result_rows
from ...text import csv_cell, json_text, printable

FORMATS = ("table", "csv", "json")


def result_lines(frame: pd.DataFrame, fmt: str = "table") -> Iterator[str]:
    """The lines (each ending in a newline) of ``frame`` in ``fmt``: "table", "csv" or "json"."""
    if fmt == "csv":
        return _csv_lines(frame)
    if fmt == "json":
        return json_lines(frame)
    return _table_lines(frame)


def _text(value) -> str:
    """A non-NULL value as the table and CSV show it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else repr(value)
    if isinstance(value, (list, dict, tuple)):
        return json_text(value)
    return str(value)


def _csv_lines(frame: pd.DataFrame) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")

    def line(cells) -> str:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(cells)
        return buffer.getvalue()

    yield line([csv_cell(str(name)) for name in frame.columns])
    for row in result_rows(frame):
        yield line(["" if v is None else csv_cell(v) if isinstance(v, str) else _text(v) for v in row])


def _table_lines(frame: pd.DataFrame) -> Iterator[str]:
    if not len(frame):
        yield "(no rows)\n"
        return
    header = [printable(str(name)) for name in frame.columns]
    columns = [column_values(frame.iloc[:, i]) for i in range(frame.shape[1])]
    cells = [["NULL" if v is None else printable(_text(v)) for v in values] for values in columns]
    right = [all(v is None or (isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool))
                 for v in values) for values in columns]
    widths = [max(len(h), *(len(c) for c in column)) for h, column in zip(header, cells)]

    def line(texts) -> str:
        return " ".join(t.rjust(w) if r else t.ljust(w) for t, w, r in zip(texts, widths, right)).rstrip() + "\n"

    yield line(header)
    for row in zip(*cells):
        yield line(row)
