"""What the ``perfkit`` command does with its file arguments before any heavy import: a file that exists
nowhere is refused at once (``perfkit profile nosuch.py`` took 5.9 s to say so, importing torch first), the
README's ``perfkit memory traces/x-*.pt.trace.json.gz`` reads the newest of several traces, and a command
given more arguments than it takes shows its own usage."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from perfkit.cli import _parse, build_parser, main

from tracebuilder import TraceBuilder

HEAVY = ("torch", "pandas", "numpy", "scipy")


@pytest.mark.parametrize("argv, says", [
    (["diagnose", "nosuch.json.gz"], "perfkit diagnose: error: nosuch.json.gz: no such file or directory"),
    (["memory", "nosuch.json.gz"], "perfkit memory: error: nosuch.json.gz: no such file or directory"),
    (["syncs", "nosuch.json.gz"], "perfkit syncs: error: nosuch.json.gz: no such file or directory"),
    (["profile", "nosuch.py"], "perfkit profile: error: script 'nosuch.py' not found"),
    (["profile", "-m", "nosuch_module_xyz"], "perfkit profile: error: module 'nosuch_module_xyz' not found"),
])
def test_a_missing_file_is_refused_before_torch_or_pandas_is_imported(tmp_path, argv, says):
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "perfkit", *argv], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PERFKIT_HOME": str(tmp_path)})
    imported = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    said = [line for line in run.stderr.splitlines() if not line.startswith("import time:")]
    assert run.returncode == 2 and said[0].startswith(says), run.stderr[-2000:]
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
    assert not list(tmp_path.rglob("*.pt.trace.json.gz"))  # no trace name reserved for a run that never started


def test_a_trace_found_only_by_the_workbook_lookup_still_reaches_it(tmp_path, monkeypatch):
    """The quick check refuses only what exists nowhere: a name under the workbook root is left to the lookup."""
    from perfkit.cli.paths import surely_missing

    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "run.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert not surely_missing("traces/run.json")  # from a folder above the working directory
    assert surely_missing("traces/other.json") and surely_missing("")
    assert not surely_missing("README.md")  # a name among the package's files (the shipped traces)


def _trace(path, step_us: float):
    b = TraceBuilder()
    b.step(0, 0, step_us)
    b.cpu_op("aten::add", 10, step_us / 2)
    return b.write(path)


def test_memory_of_several_traces_reads_the_newest(tmp_path, capsys):
    old, new = _trace(tmp_path / "run-1.json", 1000), _trace(tmp_path / "run-2.json", 2000)
    os.utime(old, (1_000_000, 1_000_000))
    os.utime(new, (2_000_000, 2_000_000))
    assert main(["memory", "--json", str(new), str(old)]) == 2  # neither holds [memory] events: an error
    err = capsys.readouterr().err
    assert f"perfkit memory: 2 traces given; reading the newest, {new}" in err
    assert f"{new}: holds no [memory] events" in err and "perfkit profile --memory" in err


@pytest.mark.parametrize("argv, usage", [
    (["syncs", "a.json", "b.json"], "usage: perfkit sync-points"),  # an old name runs, and is told, the new one
    (["critical-path", "a.json", "b.json"], "usage: perfkit critical-path"),
])
def test_extra_arguments_show_the_commands_own_usage(capsys, argv, usage):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(usage) and "{profile,diagnose" not in err
    assert "unrecognized arguments: b.json" in err and "ls -t PATTERN | head -1" in err


@pytest.mark.parametrize("argv, script_args", [
    (["profile", "s.py", "--", "a", "--", "b", "--json"], ["a", "--", "b", "--json"]),  # only the first separates
    (["profile", "--json", "s.py", "--", "--epochs", "1"], ["--epochs", "1"]),
    (["profile", "s.py", "--", "--", "x"], ["--", "x"]),
    (["detect", "s.py", "--", "a", "--", "b"], ["a", "--", "b"]),
])
def test_only_the_first_double_dash_separates(argv, script_args):
    args = _parse(build_parser(), argv)
    assert args.script == "s.py" and args.script_args == script_args
