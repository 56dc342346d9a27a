"""Small things a newcomer trips over (issue 23, item 9; diff's numbers, headers and warnings are in
tests/report/test_terminal.py): names cut with an ellipsis, export's message naming the CLI flag, no empty
reports/.staging left behind."""
from __future__ import annotations

from perfkit.cli import main
from perfkit.report.publish.staging import STAGING, remove_stale_staging, run_staging
from perfkit.text import clip


def test_clip():
    assert clip("abc", 3) == "abc" and clip("abcdef", 4) == "abc\u2026"


def test_export_on_an_existing_folder_names_the_cli_flag(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("x")
    assert main(["export", "--parquet", str(tmp_path / "out"), "cpu/leaky_clean.json.gz"]) == 2
    err = capsys.readouterr().err
    assert "pass --overwrite to replace it" in err and "overwrite=True" not in err


def test_no_empty_staging_folder_is_left(tmp_path):
    with run_staging(tmp_path) as stage:
        (stage / "x.ipynb").write_text("{")
        remove_stale_staging(tmp_path)  # a live run's staging stays
        assert (stage / "x.ipynb").is_file()
    assert not (tmp_path / STAGING).exists()
