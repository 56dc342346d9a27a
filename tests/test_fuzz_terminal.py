"""Fuzz: names from files never drive the terminal (issue 16: trace names with ANSI/OSC escapes
reached the terminal through summary, syncs, log and detect; a newline in a name broke the table),
and a closed stdout (`perfkit summary x | head -3`) ends without a BrokenPipeError traceback."""
import functools
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzkit import ESCAPE_NAMES, ROOT, assert_printable, run_main
from perfkit.text import json_text, printable, printable_data
from tracebuilder import TraceBuilder


def sync_trace(path, name: str = ""):
    """A trace with one item() sync site under a Python frame, every name carrying ``name``."""
    b = TraceBuilder(with_stack=True, gpu_name=f"GPU{name}")
    b.step(0, 0, 1000)
    b.python(f"train{name}.py(42): step{name}", 0, 1000)
    b.cpu_op(f"aten::item{name}", 100, 40)
    b.cpu_op("aten::_local_scalar_dense", 101, 38)
    b.memcpy("DtoH", "Pageable", 102, 5, 108, 1, 4)
    b.sync(f"cudaStreamSynchronize{name}", 108, 28, gpu_kind="Stream Sync")
    b.launch(f"kernel{name}", 200, 5, 210, 30)
    return b.write(path)


ALL_ESCAPES = "".join(ESCAPE_NAMES)
CASES = [(command, ALL_ESCAPES) for command in ("summary", "summary --json", "syncs --json")] + \
        [("syncs", name) for name in (ALL_ESCAPES, *ESCAPE_NAMES)]  # the table is the most fragile


@functools.lru_cache(maxsize=None)
def clean_lines(command: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        return len(run_main(*command.split(), "--no-cache", sync_trace(Path(tmp) / "clean.json")).out.splitlines())


@pytest.mark.parametrize("command, name", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_escapes_in_trace_names_do_not_reach_the_terminal(tmp_path, command, name):
    hostile = run_main(*command.split(), "--no-cache", sync_trace(tmp_path / "hostile.json", name))
    hostile.assert_clean(json_out="--json" in command, codes=(0,))
    assert len(hostile.out.splitlines()) == clean_lines(command)  # no row split or merged


def test_escapes_in_the_trace_path_do_not_reach_the_terminal(tmp_path):
    folder = tmp_path / "run\x1b]0;pwned\x07\x1b[2J"
    folder.mkdir()
    out = run_main("summary", "--no-cache", sync_trace(folder / "t\nx.json"))
    out.assert_clean(codes=(0,))
    assert "\\x1b]0;pwned\\x07" in out.out and "t\\nx.json" in out.out  # shown, escaped


def test_errors_on_stderr_are_printable_too(tmp_path):
    path = tmp_path / "no\x1b[31mpe.json"
    out = run_main("summary", path)
    assert out.rc == 2 and "\x1b" not in out.err and "no\\x1b[31mpe.json" in out.err


def test_log_table_is_printable(tmp_path):
    from perfkit.report.perflog import PerfLog

    log = PerfLog(tmp_path / "log.csv")
    fields = dict(investigation="inv\x1b[31m", change="ch\nange", metric="step_ms", value=9.0)
    try:
        log.append(**fields)
    except TypeError as exc:  # the log's fields changed: this test follows the log's own API
        pytest.skip(f"PerfLog.append signature changed: {exc}")
    out = run_main("log", "--path", tmp_path / "log.csv")
    out.assert_clean(codes=(0,))
    assert "inv\\x1b" in out.out  # shown escaped


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(text=st.text())
def test_printable_leaves_nothing_a_terminal_interprets(text):
    shown = printable(text)
    assert_printable(shown)
    assert "\n" not in shown and all(ch.isprintable() for ch in shown)
    assert printable(text, keep="\n").split("\n") == [printable(part) for part in text.split("\n")]
    assert printable_data({text: [text, (text,)]}) == {shown: [shown, (shown,)]}
    assert_printable(json_text({text: float("nan"), "x": [float("inf")]}))


@settings(max_examples=10, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(min_size=1, max_size=20))
def test_any_name_keeps_the_syncs_table_whole(tmp_path, name):
    out = run_main("syncs", "--no-cache", sync_trace(tmp_path / "t.json", name))
    out.assert_clean(codes=(0,))
    assert len(out.out.splitlines()) == clean_lines("syncs")


def test_closed_stdout_ends_quietly(tmp_path):
    """`perfkit summary x x x ... | head -1`: the reader goes away after one line."""
    path = sync_trace(tmp_path / "t.json")
    proc = subprocess.Popen([sys.executable, "-m", "perfkit", "summary", *[str(path)] * 40], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # what `head` does once it has its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err
