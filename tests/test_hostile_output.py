"""Fuzz, round 2: the output side (issue 24: `perfkit run`, `hotspots --collapsed`, `annotate -o`
and `export --parquet` gave tracebacks on a full file system, a read-only mount, a missing folder or
an existing file; `-p` values inf, 1e999, a 30-digit int and a JSON object for a number).

A real full or read-only file system is a small tmpfs (root only; skipped elsewhere); the same
errors are also raised by a monkeypatched write, which runs everywhere."""
import errno
from pathlib import Path

import pytest

from fuzzkit import event, fill, run_main, small_tmpfs, write_trace
from perfkit.cli.run import parse_value
from perfkit.errors import OutputError, ParameterError

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
WRITERS = {  # command line writing to OUT
    "hotspots": lambda trace, out: ("hotspots", trace, "--no-cache", "--collapsed", out),
    "annotate": lambda trace, out: ("annotate", trace, "--no-cache", "-o", out),
    "export": lambda trace, out: ("export", trace, "--no-cache", "--workers", "1", "--parquet", out),
}


@pytest.fixture
def trace(tmp_path):
    return write_trace(tmp_path / "t.json", [event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500),
                                             *(event(name=f"op{i}", ts=1_100 + i, dur=3) for i in range(300))])


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_missing_folder_is_one_line(trace, tmp_path, command):
    out = tmp_path / "no" / "such" / "out.txt"
    if command == "export":  # export creates its parents; a file in the way of one is the failure
        (tmp_path / "no").write_text("a file")
    run_main(*WRITERS[command](trace, out)).assert_refused(out, "cannot write it")


@pytest.mark.parametrize("command", ["hotspots", "annotate"])
def test_existing_file_is_replaced_whole(trace, tmp_path, command):
    out = tmp_path / "out.json"
    out.write_text("old")
    run_main(*WRITERS[command](trace, out)).assert_clean(codes=(0,))
    assert out.read_text() != "old" and not list(tmp_path.glob(".out.json.*"))


def test_existing_export_folder_is_refused(trace, tmp_path):
    out = tmp_path / "dataset"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    run_main(*WRITERS["export"](trace, out)).assert_refused(out, "already exists")
    assert (out / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("command", sorted(WRITERS))
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT])
def test_write_failures_are_one_line(trace, tmp_path, monkeypatch, command, code):
    import perfkit.atomic

    def broken(path):
        raise OSError(code, "simulated")

    monkeypatch.setattr(perfkit.atomic, "fsync_path", broken)
    out = tmp_path / "out.json"
    run_main(*WRITERS[command](trace, out)).assert_refused(out, "cannot write it")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_full_file_system(trace, tmp_path, command):
    with small_tmpfs(tmp_path / "full", size_kb=64) as full:
        fill(full)
        out = full / "out.json"
        run_main(*WRITERS[command](trace, out)).assert_refused(out, "No space left on device")


@pytest.mark.parametrize("command", sorted(WRITERS))
def test_read_only_mount(trace, tmp_path, command):
    with small_tmpfs(tmp_path / "ro", read_only=True) as ro:
        out = ro / "out.json"
        run_main(*WRITERS[command](trace, out)).assert_refused(out, "Read-only file system")


def test_perf_log_append_on_a_full_disk_keeps_the_rows_already_there(tmp_path):
    from perfkit.report.perflog import PerfLog, PerfLogError

    with small_tmpfs(tmp_path / "full", size_kb=64) as full:
        log = PerfLog(full / "perf_log.csv")
        log.append(investigation="i", metric="step_ms", value=1.0)
        fill(full)
        with pytest.raises(PerfLogError, match="were not added.*left as it was"):
            log.append_many([{"investigation": "i", "metric": f"m{k}", "value": 2.0, "change": "x" * 500}
                             for k in range(50)])
        assert len(log.read()) == 1


def test_run_into_a_full_file_system(tmp_path):
    with small_tmpfs(tmp_path / "full", size_kb=256) as full:
        (full / "perf_log.csv").write_text("")
        fill(full)
        out = run_main("run", "tiny_ok", "--out", full, "--notebook-dir", FIXTURES, "--no-progress")
        out.assert_clean(codes=(2,))
        [line] = out.err.strip().splitlines()
        assert str(full) in line and "No space left on device" in line, out.why()


@pytest.mark.parametrize("value, message", [
    ("1e999", "too large for a float"), ("-1e999", "too large"), ("inf", "not a finite number"),
    ("NaN", "not a finite number"), ("[1, 1e999]", "too large"), ('{"a": Infinity}', "not a finite number"),
])
def test_non_finite_parameters_are_refused(value, message):
    with pytest.raises(ParameterError, match=message):
        parse_value(value)


@pytest.mark.parametrize("value, parsed", [("123456789012345678901234567890", 123456789012345678901234567890),
                                           ('{"__class__": 1}', {"__class__": 1}), ("-0.5", -0.5)])
def test_odd_but_finite_parameters_are_kept(value, parsed):
    assert parse_value(value) == parsed


@pytest.mark.parametrize("value", ['{"__class__": 1}', "[1, 2]", "1e999"])
def test_run_refuses_before_starting_a_kernel(tmp_path, value):
    out = run_main("run", "tiny_ok", "-p", "scale", value, "--out", tmp_path, "--notebook-dir", FIXTURES,
                   "--no-progress")
    out.assert_clean(codes=(2,))
    assert "-p" in out.err and "scale" in out.err or "1e999" in out.err
    assert not list(tmp_path.glob("*/*/tiny_ok.ipynb"))


def test_output_error_is_a_perfkit_error_and_an_os_error():
    exc = OutputError("/x/out.json", "No space left on device", "free some space")
    assert isinstance(exc, OSError) and str(exc) == "/x/out.json: cannot write it: No space left on device; free some space"
