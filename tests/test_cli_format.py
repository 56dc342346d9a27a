"""Small things a newcomer trips over (issue 23, item 9): diff's numbers and headers, its warnings
once for A and B, names cut with an ellipsis, export's message naming the CLI flag, no empty
reports/.staging left behind."""
from __future__ import annotations

import os

import pytest

from perfkit.cli import main
from perfkit.cli.diff import _merged_warnings, _num, format_diff
from perfkit.report.publish.staging import STAGING, remove_stale_staging
from perfkit.text import clip


@pytest.mark.parametrize("value, text", [(12230.4, "12,230"), (100298.0, "100,298"), (4625, "4,625"),
                                         (55.29, "55.29"), (0.0, "0"), (0.1234, "0.1234"), (None, "-"),
                                         (float("nan"), "-"), (3.2e-06, "3.20e-06")])
def test_diff_numbers_have_no_exponent_above_one(value, text):
    assert _num(value) == text


def test_diff_warnings_of_both_traces_are_said_once():
    merged = _merged_warnings(["A: no GPU events", "A: only in A", "B: no GPU events", "steps differ"])
    assert merged == ["A and B: no GPU events", "A: only in A", "steps differ"]


def test_diff_table_header_lines_up_with_its_rows():
    row = {"name": "aten::" + "x" * 80, "per_step_us_a": 12109.0, "per_step_us_b": 21551.0, "status": "common"}
    d = {"a": "a", "b": "b", "step_change": {"ratio": 1.0, "low": 0.9, "high": 1.1, "verdict": "no detectable change",
                                             "reason": "r"}, "metrics": [], "waits": [], "ops": [row], "kernels": [],
         "annotations": [], "new_kernels": [], "vanished_kernels": [], "findings": [], "warnings": []}
    lines = format_diff(d).splitlines()
    header, first = lines[lines.index("ops by change in time per step (us):") + 1:][:2]
    assert header.index("status") == first.index("common")
    assert header.index("B") + 1 == first.index("21,551") + len("21,551")
    assert "\u2026" in first and len(first.split("  ")[1]) == 60


def test_clip():
    assert clip("abc", 3) == "abc" and clip("abcdef", 4) == "abc\u2026"


def test_export_on_an_existing_folder_names_the_cli_flag(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    assert main(["export", "--parquet", str(tmp_path / "out"), "leaky_clean.json.gz"]) == 2
    err = capsys.readouterr().err
    assert "pass --overwrite to replace it" in err and "overwrite=True" not in err


def test_no_empty_staging_folder_is_left(tmp_path):
    dead = tmp_path / STAGING / "999999999"
    dead.mkdir(parents=True)
    remove_stale_staging(tmp_path)
    assert not (tmp_path / STAGING).exists()
    (tmp_path / STAGING / str(os.getpid())).mkdir(parents=True)  # a live run's staging stays
    remove_stale_staging(tmp_path)
    assert (tmp_path / STAGING / str(os.getpid())).is_dir()
