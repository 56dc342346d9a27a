"""Issue 54, rule 5: no traceback whatever standard output is. A full disk (``> /dev/full``) or a closed
descriptor (``>&-``) is one line on stderr and exit 1 for every command; a reader that leaves (``| head``)
is a quiet exit 141 in every output format; a name the terminal's encoding cannot show is escaped; a
working directory deleted under the shell is one line saying what to do.

Each case runs ``perfkit.cli.main`` in one subprocess per stdout kind (descriptor 1 pointed at /dev/full,
or closed), so that a failure is the one a real shell would see."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SHARED_TRACES
from fuzzkit import ROOT, Budget, event, run_cli, run_python, write_trace

BUDGET = Budget(mem_mb=8192, cpu_s=300, wall_s=300.0)

TRACE = ROOT / "data" / "traces" / "cpu" / "ppo_item_logging.json.gz"
# Every command whose answer is printed, in each of its output formats.
COMMANDS = [
    ["summary", TRACE], ["summary", "--json", TRACE], ["diagnose", TRACE], ["diagnose", "--json", TRACE],
    ["sync-points", TRACE], ["sync-points", "--json", TRACE], ["hotspots", TRACE], ["gaps", "--json", TRACE],
    ["critical-path", TRACE], ["gpu-kernels", "--json", TRACE],
    ["sql", "SELECT name, count(*) FROM events GROUP BY 1", TRACE],
    ["sql", "--csv", "SELECT name, count(*) FROM events GROUP BY 1", TRACE],
    ["sql", "--json", "SELECT name, count(*) FROM events GROUP BY 1", TRACE],
    ["log", "--path", "{log}"], ["log", "--json", "--path", "{log}"], ["scan", ROOT / "perfkit" / "cli"],
    ["scan", "--json", ROOT / "perfkit" / "cli"], ["init", "{tmp}/wb"], ["trace-diff", TRACE, TRACE],
]
MEMORY = SHARED_TRACES / "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz"
if MEMORY.exists():  # no shipped trace recorded memory, which perfkit memory needs
    COMMANDS.append(["memory", MEMORY])

DRIVER = r"""
import json, os, sys
from perfkit.cli import main
kind, cases = sys.argv[1], json.loads(sys.argv[2])
results = []
for argv in cases:
    if kind == "full":
        fd = os.open("/dev/full", os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)
    else:
        sys.stdout = None
        try:
            os.close(1)
        except OSError:
            pass
    err = os.path.join(sys.argv[3], "err.txt")
    with open(err, "w") as sys.stderr:
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    sys.stderr = sys.__stderr__
    results.append({"argv": argv, "rc": rc, "err": open(err).read()})
with open(os.path.join(sys.argv[3], "results.json"), "w") as fh:
    json.dump(results, fh)
"""


@pytest.fixture(scope="module")
def perf_log(tmp_path_factory):
    from perfkit.report.perflog import PerfLog

    path = tmp_path_factory.mktemp("log") / "perf_log.csv"
    PerfLog(path).append(investigation="cpu_bound", metric="median_step_ms", value=1.5, unit="ms")
    return path


@pytest.mark.parametrize("kind", ["full", "closed"])
def test_every_command_says_in_one_line_that_stdout_cannot_be_written(kind, tmp_path, perf_log):
    cases = [[str(a).format(log=perf_log, tmp=tmp_path) for a in argv] for argv in COMMANDS]
    run = run_python(DRIVER, kind, json.dumps(cases), tmp_path, budget=BUDGET)
    assert run.rc == 0, run.why()
    results = json.loads((tmp_path / "results.json").read_text())
    why = "No space left on device" if kind == "full" else "the descriptor is closed"
    for result in results:
        command = result["argv"][0]
        lines = result["err"].strip().splitlines()
        assert result["rc"] == 1, result
        assert "Traceback" not in result["err"], result
        assert lines[-1] == f"perfkit {command}: error: cannot write to standard output: {why}" or \
            lines[-1].startswith(f"perfkit {command}: error: cannot write to standard output: {why}"), result
        assert len([line for line in lines if "error:" in line]) == 1, result


def _reader_leaves(args) -> int:
    """Exit status of ``perfkit ARGS`` whose reader reads one line and closes the pipe."""
    proc = subprocess.Popen([sys.executable, "-m", "perfkit", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    status = proc.wait(timeout=120)
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()
    return status


@pytest.mark.parametrize("fmt", [[], ["--csv"], ["--json"]])
def test_a_reader_that_leaves_gets_the_same_quiet_141_in_every_sql_format(fmt):
    assert _reader_leaves(["sql", *fmt, "SELECT * FROM events", TRACE]) == 141


def test_names_an_ascii_terminal_cannot_show_are_escaped(tmp_path):
    path = write_trace(tmp_path / "trace_日本.json", [
        event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500),
        *(event(name=f"aten::k\u00e9rnel_\u65e5_{i}", ts=1_100 + i * 5, dur=3) for i in range(5))])
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": ""}
    for args in (["summary", path], ["summary", "--json", path], ["hotspots", path], ["diagnose", path],
                 ["sql", "SELECT name FROM events", path], ["sql", "--csv", "SELECT name FROM events", path],
                 ["sql", "SELECT path FROM ranks", path], ["export", "--parquet", tmp_path / "d\u00e9", path]):
        run = run_cli(*args, env=env, cwd=tmp_path)
        run.assert_clean(codes=(0,))
        assert run.stdout.isascii(), run.why()
    assert "k\\xe9rnel_\\u65e5_0" in run_cli("sql", "SELECT name FROM events", path, env=env, cwd=tmp_path).out


def test_a_deleted_working_directory_is_one_line_saying_what_to_do(tmp_path):
    code = ("import os, sys; os.mkdir(sys.argv[1]); os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
            "from perfkit.cli import main; sys.exit(main(sys.argv[2:]))")
    for args in (["summary", TRACE], ["run", "cpu_bound"], ["log"]):
        run = run_python(code, tmp_path / "gone", *args)
        run.assert_clean(codes=(2,))
        assert run.err.strip().endswith("cd to an existing folder and run the command again"), run.why()


def test_a_write_past_the_file_size_limit_leaves_no_half_written_file(tmp_path):
    out = tmp_path / "annotated.json"
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000)); "
            "from perfkit.cli import main; sys.exit(main(sys.argv[1:]))")
    run = run_python(code, "annotate", TRACE, "--no-cache", "-o", out)
    run.assert_clean(codes=(2,))
    assert "File too large" in run.err and "ulimit -f" in run.err, run.why()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
