"""Shared result building blocks (``perfkit.results``): numbers as people read them, findings."""
import math

import pytest

from perfkit.results import Finding, evidence_text, findings_frame, format_number, format_signed


@pytest.mark.parametrize("x, text", [(5.45e-07, "0.000000545"), (1.82e-06, "0.00000182"), (0.00174, "0.00174"),
                                     (-3.2e-05, "-0.000032"), (1e-13, "0"), (12345.6, "12,346"), (2510.4, "2,510"),
                                     (0.5, "0.5"), (math.nan, ""), (math.inf, "inf")])
def test_format_number_never_writes_an_exponent(x, text):
    assert format_number(x) == text


@pytest.mark.parametrize("x, text", [(2510.4, "2,510"), (2.1712, "2.17"), (0.000123456, "0.000123"), (13.353, "13.4")])
def test_format_number_to_three_digits_is_g_without_the_exponent(x, text):
    assert format_number(x, 3) == text


@pytest.mark.parametrize("x, digits, text", [(2510.4, 3, "+2,510"), (2510.4, None, "+2,510"), (-0.5, None, "-0.5"),
                                             (16.24, 3, "+16.2"), (0.0, 3, "0"), (math.nan, 3, "")])
def test_format_signed(x, digits, text):
    assert format_signed(x, digits) == text


def test_a_finding_without_a_fix_never_prints_none():
    finding = Finding("low", "something", {}, None)
    assert finding.fix == ""
    assert findings_frame([finding])["fix"].tolist() == [""]


def test_evidence_keyed_by_a_unit_alone_still_has_a_name():
    assert evidence_text({"bytes": 201326592, "us": 1500.0, "all_steps_wall_us": 47490.0}) == \
        "size: 201.3 MB; time: 1.5 ms; all steps wall: 47.49 ms"


def test_html_table_headers_break_at_underscores_and_cells_stay_as_they_are():
    """A wide table wraps its headers at word parts (``median_<wbr>step``), never inside a value."""
    import pandas as pd

    from perfkit.results import html_table

    html = html_table(pd.DataFrame({"median_step_ms": [1.5], "file": ["rank_0.json"]}))
    assert "<th>median_<wbr>step_<wbr>ms</th>" in html and "<td>rank_0.json</td>" in html


def test_html_table_says_n_a_for_a_missing_value():
    import math

    import pandas as pd

    from perfkit.results import html_table

    html = html_table(pd.DataFrame({"before": [0.0], "after": [0.0], "change_pct": [math.nan]}))
    assert "<td>n/a</td>" in html and "NaN" not in html


@pytest.mark.parametrize("x, digits, text", [
    (-0.0, None, "0"), (0.0, None, "0"), (-1e-13, None, "0"),    # a negative zero is no change: never "-0"
    (-0.00004, 1, "-0.00004"),                                   # a tiny negative that is not zero stays
    (-0.004, None, "-0.004"), (-0.0, 3, "0"), (-1e-15, 3, "0"),
])
def test_format_number_never_writes_negative_zero(x, digits, text):
    assert format_number(x, digits) == text


@pytest.mark.parametrize("cell, breaks", [
    ("rank0.pt.trace.json.gz", False),                           # a file name stays whole (it wrapped mid-word)
    ("htod_pinned_vs_pageable", False),
    ("a" * 32, False),                                            # LONG_TOKEN characters: still one word
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long)", True),  # longer: at its separators
])
def test_html_table_breaks_only_long_tokens_and_only_at_separators(cell, breaks):
    """With ``overflow-wrap: break-word`` (not ``anywhere``) a cell breaks between words and at these
    ``<wbr>`` only: a word shorter than ``LONG_TOKEN`` is never split, a longer one only after ``_ . / , : (``."""
    import pandas as pd

    from perfkit.results import html_table

    html = html_table(pd.DataFrame({"file": [cell]}))
    td = html.split("<td>")[1].split("</td>")[0]
    assert ("<wbr>" in td) is breaks and td.replace("<wbr>", "") == cell
    assert all(part[-1] in "_./,:(" for part in td.split("<wbr>")[:-1])


@pytest.mark.parametrize("empty, text", [(None, "(no rows)"), ("No graph break: one graph", "No graph break: one graph")])
def test_an_empty_table_is_a_sentence_not_a_header_over_nothing(empty, text):
    import pandas as pd

    from perfkit.results import html_table

    frame = pd.DataFrame({"kind": [], "reason": []})
    html = html_table(frame) if empty is None else html_table(frame, empty=empty)
    assert "<table" not in html and text in html


def test_html_table_keeps_an_arrow_whole():
    """"a -> b" broke after the hyphen at 1280 px (compile_ab's diff table): the arrow is one unbreakable span."""
    import pandas as pd

    from perfkit.results import html_table

    html = html_table(pd.DataFrame({"change": ["1.4 ms -> 45 us"]}))
    assert "1.4 ms <span style='white-space:nowrap'>-&gt;</span> 45 us" in html
