"""The closing table of a case study: each figure of the original write-up beside ours and why
they differ.

``closing_table(rows)`` turns ``WriteupFigure`` rows into the three-column table every case-study
notebook ends with. A row holds what was measured here, or says plainly that this machine
cannot measure it ("no GPU"): a NaN, None or empty value is refused, so a table never shows a
number that was not measured, and a CPU run never shows a GPU figure as its own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ..errors import ParameterError

COLUMNS = ("the write-up's figure", "ours", "why it differs")
# Values that say a figure could not be measured here, instead of a number.
NOT_MEASURED_PREFIXES = ("no GPU", "not measured:")


@dataclass(frozen=True)
class WriteupFigure:
    """One figure: ``name`` (what it measures), the write-up's value as printed (``writeup``),
    ``ours`` (a number in ``unit``, or text starting "no GPU" / "not measured:" with the reason)
    and ``why`` it differs."""

    name: str
    writeup: str
    ours: float | str
    unit: str = ""
    why: str = ""

    def ours_text(self) -> str:
        """``ours`` formatted with its unit (4 significant digits, thousands separated)."""
        if isinstance(self.ours, str):
            return self.ours
        return f"{self.ours:,.4g} {self.unit}".strip()


def closing_table(rows) -> pd.DataFrame:
    """Columns ``COLUMNS``: "<name>: <write-up value>", our value with its unit, the reason.

    Raises ParameterError for a row whose ``ours`` is NaN, None, infinite or text that does not
    say why it is missing, and for a row without a reason: a difference is always explained.
    """
    rows = list(rows)
    for row in rows:
        _check(row)
    return pd.DataFrame([(f"{r.name}: {r.writeup}", r.ours_text(), r.why) for r in rows], columns=list(COLUMNS))


def _check(row) -> None:
    if not isinstance(row, WriteupFigure):
        raise ParameterError(f"closing_table: expected WriteupFigure rows, got {type(row).__name__}")
    if isinstance(row.ours, str):
        if not row.ours.startswith(NOT_MEASURED_PREFIXES):
            raise ParameterError(f"closing_table: {row.name!r} has ours={row.ours!r}: pass the measured number, "
                                 "or text starting 'no GPU' / 'not measured:' with the reason")
    elif row.ours is None or isinstance(row.ours, bool) or not math.isfinite(float(row.ours)):
        raise ParameterError(f"closing_table: {row.name!r} has ours={row.ours!r}, not a measured number: "
                             "measure it, or say why not ('no GPU', 'not measured: ...')")
    if not row.why.strip():
        raise ParameterError(f"closing_table: {row.name!r} needs a reason in `why` (even 'same workload, "
                             "same fix' when the figures agree)")
