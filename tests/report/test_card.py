"""The verdict card's numbers and the index's one line per report (``card_summary``, issue 37)."""
import math

import pytest

from perfkit.report.card import Number, VerdictCard, card_summary, plain_line


@pytest.mark.parametrize("value, text", [(1.0, "leak found: yes"), (0.0, "leak found: no"),
                                         (math.nan, "leak found: n/a")])
def test_a_flag_reads_yes_or_no_not_one_flag(value, text):
    assert Number("leak found", value, "flag", "no baseline", math.nan).text() == f"{text} (first run)"
    assert Number("leak found", value, "flag", "no baseline", math.nan).short_text() == text


@pytest.mark.parametrize("verdict, delta, text", [
    ("no baseline", math.nan, "median step: 12.5 ms"), ("unchanged", 0.0, "median step: 12.5 ms"),
    ("within noise", 3.0, "median step: 12.5 ms"),
    ("regressed", 25.0, "median step: 12.5 ms (+25.0% vs previous run: REGRESSED)"),
    ("improved", -20.0, "median step: 12.5 ms (-20.0% vs previous run: improved)")])
def test_the_index_number_says_its_change_only_when_it_matters(verdict, delta, text):
    assert Number("median step", 12.5, "ms", verdict, delta).short_text() == text


@pytest.mark.parametrize("verdict, delta, text", [
    ("no baseline", math.nan, "median step: 12.5 ms (first run)"),
    ("unchanged", 0.0, "median step: 12.5 ms (same figures as the previous run)"),
    ("within noise", 3.0, "median step: 12.5 ms (+3.0% vs previous run: within noise)"),
    ("not enough data", math.nan, "median step: 12.5 ms (not enough data)"),
    ("regressed", 25.0, "median step: 12.5 ms (+25.0% vs previous run: REGRESSED)")])
def test_the_card_number_says_what_its_change_means(verdict, delta, text):
    assert Number("median step", 12.5, "ms", verdict, delta).text() == text


def test_card_summary_names_the_trace_verdict_and_one_number():
    numbers = (Number("median step", 15.53, "ms", "no baseline", math.nan),
               Number("host-to-device copy time per step", 10.76, "ms", "no baseline", math.nan))
    card = VerdictCard("htod", "3 HtoD copies from `pageable` memory", numbers, "Pin the host memory",
                       "trace gpu/copies_pageable.pt.trace.json.gz", "NVIDIA H200", "high").to_json()
    assert card_summary(card) == ("gpu/copies_pageable.pt.trace.json.gz", "3 HtoD copies from pageable memory",
                                  "median step: 15.53 ms", "")
    no_numbers = VerdictCard("memory_leak", "leak", (), "", "live leaky", "cpu").to_json()
    assert card_summary(no_numbers) == ("live leaky", "leak", "", "")
    assert card_summary({}) == ("", "", "", "")
    said = VerdictCard("cpu_bound", "sync-bound", numbers, "Keep the loss on the GPU.", "trace t.json.gz", "H200",
                       prediction="Predicted: median step 10.52 -> 7.12 ms (1.48x) with the syncs removed").to_json()
    assert card_summary(said).prediction == "Predicted: median step 10.52 -> 7.12 ms (1.48x) with the syncs removed"


def test_the_card_quotes_the_prediction_once():
    card = VerdictCard("cpu_bound", "sync-bound", (), "Keep the loss on the GPU.", "trace t.json.gz", "H200",
                       prediction="Predicted: median step 10.52 -> 7.12 ms (1.48x) with the syncs removed")
    assert card.line().endswith("Fix: Keep the loss on the GPU. Predicted: median step 10.52 -> 7.12 ms (1.48x) with the "
                                "syncs removed.")
    assert card._repr_html_().count("10.52 -&gt; 7.12 ms") == 1
    quoted = VerdictCard("cpu_bound", "sync-bound", (), "Keep it on the GPU. Predicted: median step 10.52 -> 7.12 ms.", "t",
                         "H200", prediction="Predicted: median step 10.52 -> 7.12 ms")
    assert quoted.line().count("Predicted") == 1 and quoted._repr_html_().count("Predicted") == 1


def test_plain_line_is_one_line_without_code_marks():
    assert plain_line("ValueError: `trace_path`\n  is   missing") == "ValueError: trace_path is missing"
