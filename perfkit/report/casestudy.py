"""The closing table of a case study: each figure of the original write-up beside ours and why
they differ.

``closing_table(rows)`` turns ``WriteupFigure`` rows into the three-column table every case-study
notebook ends with. A row holds what was measured here, or says plainly that this machine
cannot measure it ("no GPU"): a NaN, None or empty value is refused, so a table never shows a
number that was not measured, and a CPU run never shows a GPU figure as its own.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import pandas as pd

from ..errors import ParameterError
from ..results import format_number

COLUMNS = ("the write-up's figure", "ours", "why it differs")
# Values that say a figure could not be measured here, instead of a number.
NOT_MEASURED_PREFIXES = ("no GPU", "not measured:")


@dataclass(frozen=True)
class WriteupFigure:
    """One figure: ``name`` (what it measures), the write-up's value as printed (``writeup``),
    ``ours`` (a number in ``unit``, or text starting "no GPU" / "not measured:" with the reason)
    and ``why`` it differs. A before/after figure ("529 -> 358 ms") gives ``before`` too; ``ci``
    is the 95% confidence interval of ``ours`` when it was measured with one."""

    name: str
    writeup: str
    ours: float | str
    unit: str = ""
    why: str = ""
    before: float | None = None
    ci: tuple[float, float] | None = None

    def ours_text(self) -> str:
        """``ours`` formatted with its unit (``results.format_number``: 4 significant digits,
        thousands separated from 10,000 on), after
        ``before ->`` and followed by its CI when given."""
        if isinstance(self.ours, str):
            return self.ours
        start = f"{format_number(self.before)} -> " if self.before is not None else ""
        ci = f" (95% CI {format_number(self.ci[0])} to {format_number(self.ci[1])})" if self.ci is not None else ""
        return f"{start}{format_number(self.ours)} {self.unit}".strip() + ci


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
    elif not _is_number(row.ours):
        raise ParameterError(f"closing_table: {row.name!r} has ours={row.ours!r}, not a measured number: "
                             "measure it, or say why not ('no GPU', 'not measured: ...')")
    extras = [v for v in (row.before, *(row.ci or ())) if v is not None]
    if isinstance(row.ours, str) and extras or not all(_is_number(v) for v in extras):
        raise ParameterError(f"closing_table: {row.name!r} has before={row.before!r}, ci={row.ci!r}: both must be "
                             "finite numbers that go with a measured `ours` (or None)")
    if not row.why.strip():
        raise ParameterError(f"closing_table: {row.name!r} needs a reason in `why` (even 'same workload, "
                             "same fix' when the figures agree)")


def measured_ci(low, high) -> tuple[float, float] | None:
    """``(low, high)`` when both are finite numbers, else None: a CI the harness could not
    establish ("not enough data") is left out of the table rather than printed as "nan"."""
    return (float(low), float(high)) if _is_number(low) and _is_number(high) else None


def gpu_only(value, has_gpu: bool, reason: str) -> float | str:
    """``value`` when the measurement had a GPU, else "no GPU: <reason>": a CPU run's stand-in
    for a GPU-only figure (GPU idle %, CPU/CUDA time) is never shown as a number."""
    return value if has_gpu else f"no GPU: {reason}"


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
