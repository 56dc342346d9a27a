"""Hostile and broken inputs on the report side (issue 16): the perf log, `perfkit run --out`,
interrupted runs, `-p` values. Each must end in one clear PerfkitError line naming the file, with
nothing already written changed, never a traceback. Self-contained (seeded generators)."""
from __future__ import annotations

import contextlib
import io
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import perfkit.cli
from perfkit.errors import ParameterError, PerfkitError
from perfkit.report.perflog import PerfLog, PerfLogError
from perfkit.report.publish import runner, staging

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"


def _cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = perfkit.cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def _log(tmp_path) -> PerfLog:
    log = PerfLog(tmp_path / "perf_log.csv")
    log.append(investigation="a", metric="m", value=1.0, unit="ms", run_id="r1")
    return log


@pytest.mark.parametrize("seed", range(6))
def test_non_utf8_bytes_in_the_log_are_refused_and_the_file_kept(tmp_path, seed):
    log = _log(tmp_path)
    rng = random.Random(seed)
    data = bytearray(log.path.read_bytes())
    pos = rng.randrange(len(data))
    data[pos:pos] = bytes([rng.choice([0x80, 0xC3, 0xFF, 0xFE, 0xED])]) * rng.randint(1, 3)
    log.path.write_bytes(bytes(data))
    before = log.path.read_bytes()
    for action in (log.read, lambda: log.append(investigation="a", metric="m", value=2.0)):
        with pytest.raises(PerfLogError, match=r"perf_log\.csv:\d+: not UTF-8 text"):
            action()
    assert log.path.read_bytes() == before
    rc, out, err = _cli(["log", "--path", str(log.path)])
    assert rc == 2 and out == "" and err.count("\n") == 1 and "not UTF-8" in err


def test_a_log_path_that_is_a_folder_is_refused(tmp_path):
    folder = tmp_path / "perf_log.csv"
    folder.mkdir()
    (folder / "keep").write_text("x")
    for action in (PerfLog(folder).read, lambda: PerfLog(folder).append(investigation="a", metric="m", value=1.0)):
        with pytest.raises(PerfLogError, match="is a folder, not a perf log file"):
            action()
    assert [p.name for p in folder.iterdir()] == ["keep"]


def test_a_log_under_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(PerfLogError, match="cannot write the perf log here"):
        PerfLog(tmp_path / "file" / "perf_log.csv").append(investigation="a", metric="m", value=1.0)


@pytest.mark.parametrize("make, match", [
    (lambda p: (p.write_text("x"), p)[1], "cannot create the reports folder"),
    (lambda p: None, r"--out '': give a reports folder"),
])
def test_run_out_that_cannot_hold_reports_fails_before_running(tmp_path, monkeypatch, make, match):
    called = []
    monkeypatch.setattr(runner, "execute_notebook", lambda *a, **k: called.append(a))
    target = make(tmp_path / "out")
    rc, out, err = _cli(["run", "tiny_ok", "--out", "" if target is None else str(target),
                         "--notebook-dir", str(FIXTURES), "--no-progress"])
    assert rc == 2 and out == "" and err.count("\n") == 1 and re.search(match, err), err
    assert called == []  # nothing ran


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write a read-only folder")
def test_run_out_read_only_fails_before_running(tmp_path):
    out = tmp_path / "ro"
    out.mkdir(mode=0o500)
    with pytest.raises(ParameterError, match="not writable"):
        runner.prepare_out_dir(out)


def test_run_out_read_only_is_checked_with_access(tmp_path, monkeypatch):
    monkeypatch.setattr(runner.os, "access", lambda path, mode: False)
    with pytest.raises(ParameterError, match="not writable"):
        runner.prepare_out_dir(tmp_path)


def test_a_corrupt_perf_log_fails_the_run_before_any_notebook(tmp_path, monkeypatch):
    called = []
    monkeypatch.setattr(runner, "execute_notebook", lambda *a, **k: called.append(a))
    (tmp_path / "perf_log.csv").write_bytes(b"format_version,date\n\xff\n")
    rc, out, err = _cli(["run", "tiny_ok", "--out", str(tmp_path), "--notebook-dir", str(FIXTURES), "--no-progress"])
    assert rc == 2 and "not UTF-8" in err and called == []
    assert (tmp_path / "perf_log.csv").read_bytes() == b"format_version,date\n\xff\n"


_HOLD_STAGING = ("import sys, time; from pathlib import Path; from perfkit.report.publish.staging import run_staging\n"
                 "with run_staging(Path(sys.argv[1])) as stage:\n"
                 "    (stage / 'tiny_ok.ipynb').write_text('{'); print(stage, flush=True); time.sleep(120)")


def _holder(out, *prefix):
    """A process holding a run's staging folder under ``out`` (its lock), and that folder."""
    child = subprocess.Popen([*prefix, sys.executable, "-c", _HOLD_STAGING, str(out)], stdout=subprocess.PIPE, text=True)
    return child, Path(child.stdout.readline().strip())


def test_staging_left_by_a_killed_run_is_removed_by_the_next(tmp_path):
    """SIGKILL leaves papermill's output in <out>/.staging, never in a report folder; the next run removes the
    staging folders whose lock no live process holds, and only those."""
    child, stale = _holder(tmp_path)
    live_child, live = _holder(tmp_path)
    child.send_signal(signal.SIGKILL)
    child.wait()
    try:
        staging.remove_stale_staging(tmp_path)
        assert not stale.exists() and (live / "tiny_ok.ipynb").exists()
    finally:
        live_child.kill()
        live_child.wait()
    staging.remove_stale_staging(tmp_path)
    assert not (tmp_path / staging.STAGING).exists()  # nothing left, not even the empty .staging


def test_a_run_in_another_pid_namespace_keeps_its_staging(tmp_path):
    """Two containers sharing one workbook: each sees the other's process ids as dead (or as its own); the lock
    is what proves a staging folder is in use."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode:
        pytest.skip("cannot make a PID namespace here (unshare needs root)")
    child, theirs = _holder(tmp_path, "unshare", "--pid", "--fork", "--mount-proc")
    try:
        staging.remove_stale_staging(tmp_path)
        with staging.run_staging(tmp_path) as mine:
            assert mine != theirs and (theirs / "tiny_ok.ipynb").exists()
        assert (theirs / "tiny_ok.ipynb").exists()
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("text, value", [('{"envs": 8}', {"envs": 8}), ('{"a": {"b": [1, 2]}}', {"a": {"b": [1, 2]}}),
                                         ("[1, 2.5]", [1, 2.5])])
def test_p_passes_dicts_and_lists(text, value):
    from perfkit.cli.run import parse_value

    assert parse_value(text) == value


@pytest.mark.parametrize("seed", range(4))
def test_hostile_text_in_log_rows_stays_one_printable_line(tmp_path, seed):
    rng = random.Random(seed)
    nasty = "".join(rng.choice(["\x1b[2J", "\x1b]0;pwned\x07", "\n", "\r", "|", "<script>", "\x00", "ok"])
                    for _ in range(12))
    log = PerfLog(tmp_path / "perf_log.csv")
    log.append(investigation=nasty, metric=nasty, value=1.0, change=nasty, unit=nasty, run_id="r")
    text = log.to_markdown()
    assert "\x1b" not in text and "\x00" not in text and "\x07" not in text
    assert len(text.strip().split("\n")) == 3
    assert isinstance(log.read(), object) and len(log.read()) == 1

