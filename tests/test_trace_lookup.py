"""Issue 54, rule 1: a path that does not exist never becomes a shipped trace. A path with a folder in it
is only ever that path; a bare name that is no file here is looked up among the shipped traces, says which
one it read, and is refused when two shipped traces share it (``cpu/NAME`` and ``gpu/NAME``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from fuzzkit import run_main
from perfkit import workbook
from perfkit.errors import ParameterError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p for folder in ("cpu", "gpu") for p in (ROOT / "data" / "traces" / folder).glob("*.json.gz"))
NAMES = sorted({p.name for p in SHIPPED} | set(workbook.shipped_rank_sets()))
# Every way of naming a file in a folder that a mistyped or vanished folder gives.
FOLDER_SHAPES = ("/data/exp7/{}", "/{}", "missing/{}", "./{}", "missing/deeper/{}", "cpu/../{}", "~/no_such_dir/{}")


@pytest.fixture(autouse=True)
def elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFKIT_HOME", raising=False)
    return tmp_path


@pytest.mark.parametrize("shape", FOLDER_SHAPES)
@pytest.mark.parametrize("name", NAMES)
def test_a_path_with_a_folder_is_only_ever_that_path(name, shape):
    with pytest.raises(ParameterError, match="read from that folder only"):
        workbook.find_trace(shape.format(name))


@pytest.mark.parametrize("shape", FOLDER_SHAPES[:3])
def test_the_cli_refuses_a_missing_path_instead_of_answering_about_a_shipped_trace(shape):
    path = shape.format("leaky_clean.json.gz")
    for command in ("summary", "diagnose", "sync-points", "memory"):
        outcome = run_main(command, path)
        outcome.assert_refused(path, "no such file")
        assert outcome.out == ""


def test_a_bare_name_in_two_shipped_folders_is_refused_naming_both():
    both = sorted({p.name for p in SHIPPED if (p.parent.name == "cpu")} &
                  {p.name for p in SHIPPED if (p.parent.name == "gpu")})
    assert "ppo_item_logging.json.gz" in both
    for name in both:
        with pytest.raises(ParameterError, match=f"cpu/{name} and gpu/{name} both have that name"):
            workbook.find_trace(name)
    run_main("summary", "ppo_item_logging.json.gz").assert_refused("ppo_item_logging.json.gz", "name one of them")


def test_a_bare_name_in_one_shipped_folder_says_which_trace_it_read():
    only_gpu = sorted({p.name for p in SHIPPED if p.parent.name == "gpu"} - {p.name for p in SHIPPED if p.parent.name == "cpu"})
    assert only_gpu
    for name in only_gpu:
        found = workbook.find_trace(name)
        assert found == (ROOT / "data" / "traces" / "gpu" / name).resolve()
        assert workbook.shipped_note(name, found).endswith(f"reading the trace shipped with perfkit, gpu/{name}")
    outcome = run_main("summary", only_gpu[0])
    outcome.assert_clean(codes=(0,))
    assert f"perfkit: note: no file '{only_gpu[0]}' here: reading the trace shipped with perfkit, gpu/{only_gpu[0]}" \
        in outcome.err


def test_a_file_of_that_name_here_wins_and_is_read_without_a_note(elsewhere):
    mine = elsewhere / "ppo_item_logging.json.gz"
    mine.write_bytes((ROOT / "data/traces/gpu/ppo_item_logging.json.gz").read_bytes())
    assert workbook.find_trace("ppo_item_logging.json.gz") == mine
    assert workbook.shipped_note("ppo_item_logging.json.gz", mine) == ""


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_name_a_report_shows_finds_the_same_trace_again(path):
    name = workbook.relative_name(path)
    assert name == f"{path.parent.name}/{path.name}"
    assert workbook.find_trace(name) == path.resolve()
    assert workbook.shipped_note(name, path) == f"no file {name!r} here: reading the trace shipped with perfkit, {name}"
