"""``perfkit profile`` never loses or misreads a run in silence (issue 38.3): hostile scripts (a fork, an exec,
their own profiler, a redirected stdout, a --step that cannot be a step, an --out folder the script breaks,
a full disk, a script that deletes itself, a SIGALRM handler of its own). Each script is a few steps of a
2-layer MLP on one CPU thread; the CLI runs in a subprocess so the script sees a real stdout, exec and fork."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from perfkit.profiling.output import write_trace
from perfkit.profiling.stepfn import ScriptStep, not_a_step
from perfkit.profiling.watch import window_timer

MLP = """
import os, sys, signal, threading
import torch
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def train(n=1):
    for _ in range(n):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()
"""
SCHEDULE = ("--wait", "1", "--warmup", "1", "--active", "2")


def _run(tmp_path, body: str, *options: str, script_args=(), name="train.py", out=None, text=True):
    script = tmp_path / name
    script.write_text(MLP + textwrap.dedent(body))
    out = str(tmp_path / "t") if out is None else out
    return subprocess.run([sys.executable, "-m", "perfkit", "profile", *SCHEDULE, "--out", out, *options, str(script),
                           "--", *script_args], capture_output=True, text=text, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PERFKIT_HOME": str(tmp_path)})


def _traces(folder) -> list[Path]:
    return sorted(Path(folder).glob("*.pt.trace.json.gz"))


# -- the process perfkit started is the one reported ------------------------------------------------------


def test_a_forked_child_neither_writes_nor_hides_in_the_parents_trace(tmp_path):
    run = _run(tmp_path, """
        pid = os.fork()
        if pid == 0:
            train(8)
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "nothing recorded: the script forked 1 process(es): perfkit records only the process it started" in run.stderr
    assert _traces(tmp_path / "t") == []  # the child's steps did not write into the parent's trace name


def test_exec_writes_the_trace_recorded_until_then_and_says_so(tmp_path):
    run = _run(tmp_path, """
        train(5)
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-c", "print('new program')"])
    """)
    assert "new program" in run.stdout
    [trace] = _traces(tmp_path / "t")
    assert trace.stat().st_size > 0
    assert (f"perfkit profile: the script is replacing itself with {sys.executable!r} (os.exec*) after 5 step(s): "
            f"perfkit cannot report on the new program; the trace recorded until then is {trace}") in run.stderr


def test_a_script_with_its_own_profiler_is_told_perfkit_cannot_record_under_it(tmp_path):
    run = _run(tmp_path, """
        with torch.profiler.profile() as p:
            train(8)
        print("own profiler events", len(p.events()) > 0)
    """)
    assert run.returncode == 1 and "own profiler events True" in run.stdout  # the script's profiler works
    assert ("perfkit profile: the script runs its own profiler (torch.profiler.profile): perfkit cannot record "
            "under it; diagnose the script's own trace with `perfkit diagnose TRACE`") in run.stderr


def test_a_profiler_the_script_starts_after_perfkits_recording_is_no_conflict(tmp_path):
    run = _run(tmp_path, """
        train(8)
        with torch.profiler.profile() as p:
            train(1)
    """)
    assert run.returncode == 0 and "own profiler" not in run.stderr, run.stderr[-2000:]
    assert "steps      2 recorded (steps from: optimizer)" in run.stdout


# -- the script's output is its own, perfkit's report goes where perfkit started ------------------------


def test_the_report_goes_to_the_real_stdout_when_the_script_redirects_sys_stdout(tmp_path):
    run = _run(tmp_path, """
        sys.stdout = open(os.path.join(os.path.dirname(__file__), "own.log"), "w")
        train(8)
        print("to the log")
        sys.stdout.flush()
    """)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "own.log").read_text() == "to the log\n"
    assert "steps      2 recorded (steps from: optimizer)" in run.stdout


def test_the_report_goes_to_the_real_stdout_when_the_script_moves_descriptor_1(tmp_path):
    run = _run(tmp_path, """
        log = open(os.path.join(os.path.dirname(__file__), "fd.log"), "w")
        os.dup2(log.fileno(), 1)
        train(8)
        print("to the log", flush=True)
    """)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "fd.log").read_text() == "to the log\n"
    assert "steps      2 recorded (steps from: optimizer)" in run.stdout


def test_the_scripts_own_output_passes_through_unchanged(tmp_path):
    run = _run(tmp_path, """
        train(8)
        print("a\\tb\\rc\\x1b[31mred\\x1b[0m")
    """, name="odd\x1bname.py", text=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert b"a\tb\rc\x1b[31mred\x1b[0m\n" in run.stdout  # not a\\tb\\rc\\x1b[31m...
    assert run.stdout.count(b"\x1b") == 2 and b"/odd_name-" in run.stdout  # the trace's name has no escape


# -- --step: recorded, or why it cannot be a step --------------------------------------------------------

STEPS = """
class Planner:
    @property
    def value(self):
        train()
        return 1

    def act(self):
        train()

def plan():
    train()

def batches():
    train()
    yield 1

mode = sys.argv[1]
for _ in range(8):
    if mode == "prop":
        Planner().value
    elif mode == "thread":
        t = threading.Thread(target=plan)
        t.start()
        t.join()
    elif mode == "gen":
        list(batches())
    else:
        print("step", flush=True)
"""


def test_a_property_is_recorded_through_its_getter(tmp_path):
    run = _run(tmp_path, STEPS, "--json", "--step", "Planner.value", script_args=["prop"])
    assert run.returncode == 0, run.stderr[-2000:]
    r = json.loads(run.stdout)
    assert r["step_source"] == "function" and r["steps_recorded"] == 2


@pytest.mark.parametrize("step, mode, says", [
    ("print", "print", "--step print is a builtin, not a Python function"),
    ("plan", "thread", "only from 7 other threads (none from the thread that started the script, which perfkit steps the profiler on"),
    ("batches", "gen", "--step batches is a generator function: a call only creates the generator and its body "
                       "runs on iteration"),
    ("NoSuch.method", "print", "--step NoSuch.method: the script never defined it; it defines: train, Planner, plan, "
                                "batches"),
    ("Planner.nope", "print", "--step Planner.nope: the script never defined it; Planner has: value, act"),
])
def test_a_step_that_cannot_be_counted_fails_naming_why(tmp_path, step, mode, says):
    run = _run(tmp_path, STEPS, "--step", step, script_args=[mode])
    assert run.returncode == 1 and "Traceback" not in run.stderr and "Segmentation" not in run.stderr
    assert run.stderr.startswith(f"perfkit profile: nothing recorded: --step {step}") and says in run.stderr


def test_a_script_that_removes_perfkits_hook_is_told_so(tmp_path):
    run = _run(tmp_path, "sys.setprofile(None)\n" + STEPS, "--step", "plan", script_args=["plain"])
    assert run.returncode == 1
    assert "--step plan: the script removed perfkit's hook (sys.setprofile) before it defined plan" in run.stderr


def test_a_step_that_is_not_a_function_is_named():
    def gen():
        yield 1

    assert "generator function" in not_a_step("gen", gen)
    assert "not a function (int)" in not_a_step("n", 3)
    assert not_a_step("p", property(lambda self: 1)) == ""


def test_a_script_step_that_never_runs_says_the_script_ran_none_of_its_code(tmp_path):
    watch = ScriptStep("plan", str(tmp_path / "never.py"), lambda: None, lambda: None)
    watch.undo()
    assert watch.problem() == "--step plan: the script never defined it; the script ran none of its code"


# -- the trace is written where asked, and a failed write is perfkit's ---------------------------------


def test_a_relative_out_is_kept_after_the_script_changes_directory(tmp_path):
    run = _run(tmp_path, """
        import tempfile
        os.chdir(tempfile.mkdtemp())
        train(8)
    """, out="rel")
    assert run.returncode == 0, run.stderr[-2000:]
    assert len(_traces(tmp_path / "rel")) == 1


def test_an_out_folder_the_script_deletes_is_made_again(tmp_path):
    run = _run(tmp_path, f"""
        import shutil
        shutil.rmtree({str(tmp_path / "t")!r})
        train(8)
    """)
    assert run.returncode == 0 and "failed" not in run.stderr, run.stderr[-2000:]
    assert len(_traces(tmp_path / "t")) == 1


def test_an_out_under_a_file_is_one_line(tmp_path):
    (tmp_path / "a_file").write_text("")
    run = _run(tmp_path, "train(8)\n", out=str(tmp_path / "a_file" / "sub"))
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert "a_file/sub" in run.stderr and "Not a directory" in run.stderr


class _Prof:
    """Stands in for torch's profiler: ``export`` writes through it."""


def _export_failing(fail_for, code: int):
    def export(prof, path):
        path = Path(path)
        if fail_for(path):
            partial = path.parent / f".{path.name}.abc.json"
            partial.write_text("half")  # what a failed export leaves behind
            raise OSError(code, os.strerror(code))
        path.write_bytes(b"trace")
        return path

    return export


def test_a_read_only_out_folder_falls_back_to_a_temp_file_and_says_where(tmp_path):
    target = tmp_path / "ro" / "train.pt.trace.json.gz"
    written, note = write_trace(_Prof(), target, export=_export_failing(lambda p: p.parent.name == "ro", errno.EROFS))
    assert written is not None and written.read_bytes() == b"trace" and written.parent != target.parent
    assert note.startswith(f"could not write the trace to {target} (Read-only file system): it was written to {written}")
    assert not list(target.parent.glob(".*"))  # the partial file is removed
    written.unlink()


def test_a_full_disk_removes_the_partial_file_and_says_no_space_left(tmp_path):
    target = tmp_path / "train.pt.trace.json.gz"
    target.write_bytes(b"")  # the reservation trace_path made
    written, note = write_trace(_Prof(), target, export=_export_failing(lambda p: True, errno.ENOSPC))
    assert written is None
    assert note.startswith(f"could not write the trace to {target}: no space left on device")
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # only the empty reservation, released later


def _train_under(monkeypatch, out, fail_for, code: int):
    """perfkit.profile (the recorder perfkit profile uses) over 4 SGD steps, its writes failing for ``fail_for``."""
    import torch

    import perfkit
    import perfkit.profiling.recorder as recorder
    from perfkit.workloads.record import export_gzipped_trace

    def export(prof, path):
        if fail_for(Path(path)):
            raise OSError(code, os.strerror(code))
        return export_gzipped_trace(prof, path)

    monkeypatch.setattr(recorder, "write_trace", lambda prof, path: write_trace(prof, path, export=export))
    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with perfkit.profile(steps=2, wait=1, warmup=1, out=out) as p:
        for _ in range(4):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    return p.result


def test_a_recording_its_folder_refuses_is_kept_in_a_temp_file_and_its_reservation_released(tmp_path, monkeypatch):
    result = _train_under(monkeypatch, tmp_path / "ro", lambda p: p.parent.name == "ro", errno.EACCES)
    assert result.trace is not None and result.trace.parent != tmp_path / "ro" and result.steps_recorded == 2
    assert any(w.startswith(f"could not write the trace to {tmp_path / 'ro'}") for w in result.warnings)
    assert list((tmp_path / "ro").iterdir()) == [] and not result.problem
    result.trace.unlink()


def test_a_full_disk_fails_the_recording_not_the_script(tmp_path, monkeypatch):
    result = _train_under(monkeypatch, tmp_path, lambda p: True, errno.ENOSPC)
    assert result.trace is None and result.error == ""  # the script's opt.step() saw no error
    assert result.problem.startswith("could not write the trace to") and "no space left on device" in result.problem
    assert list(tmp_path.iterdir()) == []


# -- what the run found is kept ---------------------------------------------------------------------------


def test_scan_of_a_script_that_deleted_itself_keeps_the_diagnosis(tmp_path):
    run = _run(tmp_path, """
        os.remove(__file__)
        train(8)
    """, "--scan")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "steps      2 recorded" in run.stdout and "verdict" in run.stdout
    assert "warning: --scan could not read the script after it ran" in run.stdout


# -- --seconds ends whatever the script does with signals --------------------------------------------------


def test_seconds_window_ends_though_the_script_takes_sigalrm(tmp_path):
    run = _run(tmp_path, """
        signal.signal(signal.SIGALRM, lambda *a: None)
        signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
        for _ in range(100000):
            train()
            if not torch.autograd._profiler_enabled():  # perfkit's window has ended
                break
        signal.setitimer(signal.ITIMER_REAL, 0)  # Python's exit puts SIGALRM's default (exit) back
        print("window ended", flush=True)
    """, "--seconds", "0.5")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "window ended" in run.stdout and len(_traces(tmp_path / "t")) == 1


def test_window_timer_calls_stop_on_the_main_thread():
    import threading

    seen = []
    undo = window_timer(0.01, lambda: seen.append(threading.current_thread() is threading.main_thread()))
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        sum(range(1000))  # bytecode: the interpreter runs pending calls between instructions
    undo()
    assert seen == [True]
