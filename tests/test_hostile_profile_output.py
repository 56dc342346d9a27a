"""Issue 54 on ``perfkit profile`` (rules 7 and the still-open list): its report never glued to the script's
unfinished last line; a ``--seconds`` window reported as long as it recorded; the script's ``sys.argv[0]``,
``__file__``, ``__spec__`` and ``__loader__`` what ``python script.py`` gives; an ``--out`` link followed or a
link loop refused (it spun at 100% CPU); ``optimizer.step()`` from threads said as such."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_hostile_profile import MLP, SCHEDULE, _run

ENDINGS = {  # the script's last output, without a newline
    "print end=''": 'print("progress 99%", end="")',
    "write": 'sys.stdout.write("x" * 100_000)',
    "20 MB line": 'sys.stdout.write("y" * 20_000_000)',
    "json then unfinished": 'print(\'{"loss": 1}\'); sys.stdout.write("epoch 3/3")',
    "carriage return": 'sys.stdout.write("bar\\r")',
}


@pytest.mark.parametrize("json_out", [False, True])
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_the_report_starts_on_its_own_line_after_an_unfinished_one(tmp_path, ending, json_out):
    run = _run(tmp_path, f"train(8)\n{ENDINGS[ending]}\n", *(("--json",) if json_out else ()))
    assert run.returncode == 0, run.stderr[-2000:]
    script_part, report = run.stdout.rsplit("\n{\n" if json_out else "\ntrace      ", 1)
    assert not script_part.endswith("\n\n")  # one line break added, not a blank line after a finished line
    if json_out:
        assert json.loads("{\n" + report)["steps_recorded"] == 2
    else:
        assert report.startswith(str(tmp_path / "t"))


def test_a_finished_last_line_gets_no_extra_blank_line(tmp_path):
    run = _run(tmp_path, 'train(8)\nprint("done")\n')
    assert "done\ntrace      " in run.stdout


@pytest.mark.parametrize("seconds, sleep", [("0.5", 3), ("1", 4)])
def test_a_window_that_ran_long_in_c_code_is_reported_as_long_as_it_was(tmp_path, seconds, sleep):
    run = _run(tmp_path, f"train(2)\nimport time\ntime.sleep({sleep})\n", "--seconds", seconds, "--json")
    warning = next(w for w in json.loads(run.stdout)["warnings"] if "window without steps" in w)
    recorded = float(warning.split(" s (asked")[0].removeprefix("a "))
    assert recorded >= sleep and f"asked for {seconds} s" in warning, warning


def test_a_window_that_ended_on_time_says_its_length(tmp_path):
    run = _run(tmp_path, "import time\nfor _ in range(40):\n    train(1)\n    time.sleep(0.05)\n", "--seconds", "0.5",
               "--json")
    window = next(w for w in json.loads(run.stdout)["warnings"] if "window without steps" in w)
    assert window.startswith("a 0.5 s window without steps") or "(asked for 0.5 s:" in window  # late on a busy machine


SHOW = """
import json, sys, __main__
print("SEEN " + json.dumps({"argv0": sys.argv[0], "file": __file__, "spec": repr(__spec__), "name": __name__,
      "package": __package__, "loader": type(__loader__).__name__, "cached": __cached__, "path0": sys.path[0],
      "main": sys.modules["__main__"].__dict__ is globals()}))
"""


def _seen(stdout: str) -> dict:
    return json.loads(next(line for line in stdout.splitlines() if line.startswith("SEEN "))[5:])


@pytest.mark.parametrize("command", [("profile", "--seconds", "0.2"), ("detect",)])
@pytest.mark.parametrize("given", ["sub/show.py", "./sub/show.py", "{abs}/sub/show.py", "sub/../sub/show.py"])
def test_the_script_sees_what_python_script_py_gives_it(tmp_path, command, given):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "show.py").write_text(SHOW)
    given = given.format(abs=tmp_path)
    python = subprocess.run([sys.executable, given, "a"], capture_output=True, text=True, cwd=tmp_path)
    perfkit = subprocess.run([sys.executable, "-m", "perfkit", *command, "--", given, "a"] if command[0] == "detect"
                             else [sys.executable, "-m", "perfkit", *command, "--out", str(tmp_path / "t"), given, "a"],
                             capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert _seen(perfkit.stdout) == _seen(python.stdout), perfkit.stderr[-2000:]


def test_an_out_link_to_a_folder_not_made_yet_is_followed(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "made" / "later")
    run = _run(tmp_path, "train(8)\n", out=str(tmp_path / "link"))
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "link").is_symlink() and len(list((tmp_path / "made" / "later").glob("*.pt.trace.json.gz"))) == 1


@pytest.mark.parametrize("shape", ["loop", "self", "file"])
def test_an_out_that_cannot_be_a_folder_is_refused_before_the_script_runs(tmp_path, shape):
    out = tmp_path / "out"
    if shape == "loop":
        (tmp_path / "other").symlink_to(out)
        out.symlink_to(tmp_path / "other")
    elif shape == "self":
        out.symlink_to(out)
    else:
        (tmp_path / "target.txt").write_text("x")
        out.symlink_to(tmp_path / "target.txt")
    run = _run(tmp_path, 'print("RAN")\ntrain(8)\n', out=str(out))
    assert run.returncode == 2 and "RAN" not in run.stdout and "Traceback" not in run.stderr
    assert ("loop of symbolic links" if shape != "file" else "is a file") in run.stderr


def test_optimizer_step_only_from_a_thread_is_said_as_such(tmp_path):
    run = _run(tmp_path, "t = threading.Thread(target=train, args=(8,))\nt.start()\nt.join()\n")
    assert run.returncode == 1
    assert "optimizer.step() was called 8 time(s), only from another thread" in run.stderr
    assert "no optimizer.step() was seen" not in run.stderr + run.stdout


def test_sixteen_threads_stepping_beside_the_main_one(tmp_path):
    run = _run(tmp_path, textwrap.dedent("""
        def worker():
            own = torch.nn.Linear(8, 1)
            o = torch.optim.SGD(own.parameters(), lr=0.1)
            for _ in range(5):
                own(torch.randn(4, 8)).sum().backward(); o.step(); o.zero_grad()
        threads = [threading.Thread(target=worker) for _ in range(16)]
        [t.start() for t in threads]
        train(8)
        [t.join() for t in threads]
    """), "--json")
    result = json.loads(run.stdout)
    assert run.returncode == 0 and result["steps_recorded"] == 2, run.stderr[-2000:]
    assert any("also called 80 time(s) from 16 other thread(s)" in w for w in result["warnings"]), result["warnings"]


class _CutProfiler:
    """A profiler whose JSON writer stops early, as Kineto's does in silence past ``ulimit -f``."""

    def __init__(self, text: bytes):
        self.text = text

    def export_chrome_trace(self, path):
        Path(path).write_bytes(self.text)


@pytest.mark.parametrize("text", [b"", b'{"traceEvents": [{"ph": "X"', b'{"traceEvents": [', b"\0" * 100])
def test_a_trace_the_profiler_wrote_cut_off_is_never_kept(tmp_path, text):
    from perfkit.profiling.output import write_trace

    written, note = write_trace(_CutProfiler(text), tmp_path / "run.pt.trace.json.gz")
    assert written is None and "came out cut off" in note and list(tmp_path.iterdir()) == []


def test_a_whole_trace_is_kept(tmp_path):
    from perfkit.profiling.output import write_trace

    written, note = write_trace(_CutProfiler(b'{"traceEvents": []}\n'), tmp_path / "run.pt.trace.json.gz")
    assert written == tmp_path / "run.pt.trace.json.gz" and note == ""


def test_profile_past_the_file_size_limit_leaves_no_half_written_trace(tmp_path):
    import resource

    script = tmp_path / "train.py"
    script.write_text(MLP + "model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(30)])\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                      "for _ in range(8):\n    model(torch.randn(4, 8)).sum().backward(); opt.step()\n")
    run = subprocess.run([sys.executable, "-m", "perfkit", "profile", *SCHEDULE, "--out", str(tmp_path / "t"), str(script)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000)))
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert "came out cut off" in run.stderr and list((tmp_path / "t").iterdir()) == []
