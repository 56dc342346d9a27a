"""The case-study closing table: measured numbers or an explicit reason, never a silent gap."""
import math

import pytest

from perfkit.errors import ParameterError
from perfkit.report.casestudy import COLUMNS, WriteupFigure, closing_table


def test_rows_become_the_three_column_table():
    table = closing_table([
        WriteupFigure("CPU time / CUDA time", "17x", 23.456, "x", "tiny CPU-only planner: every op is host time"),
        WriteupFigure("GPU idle", "94%", "no GPU", "%", "this run has no GPU events"),
        WriteupFigure("aten::linear per action", "62,700", 1234567, "", "64 samples x 5 steps instead of 512 x 12"),
    ])
    assert list(table.columns) == list(COLUMNS)
    assert table.values.tolist() == [
        ["CPU time / CUDA time: 17x", "23.46 x", "tiny CPU-only planner: every op is host time"],
        ["GPU idle: 94%", "no GPU", "this run has no GPU events"],
        ["aten::linear per action: 62,700", "1,234,567", "64 samples x 5 steps instead of 512 x 12"]]


@pytest.mark.parametrize("ours", [math.nan, None, math.inf, "fast", True])
def test_a_number_that_was_not_measured_is_refused(ours):
    with pytest.raises(ParameterError, match="not a measured number|measured number, or text"):
        closing_table([WriteupFigure("speedup", "2x", ours, "x", "why")])


def test_every_row_needs_a_reason_and_to_be_a_figure():
    with pytest.raises(ParameterError, match="needs a reason"):
        closing_table([WriteupFigure("speedup", "2x", 1.5, "x", " ")])
    with pytest.raises(ParameterError, match="expected WriteupFigure rows"):
        closing_table([("speedup", "2x", 1.5)])
    assert closing_table([]).empty
