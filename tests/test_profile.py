"""perfkit profile / perfkit.profile on the reference workloads run as plain scripts (no profiler code
in them): steps from the optimizer hook, from --step, early exits, and the notebook context manager."""
from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import perfkit
from perfkit.cli import main
from perfkit.profiling.timing import overhead_noise_pct, overhead_pct, overhead_warnings
from perfkit.report.perflog import PerfLog
from perfkit.trace import load_trace
from perfkit.trace.recorded import recorded_machine

pytestmark = pytest.mark.slow

PPO = """
import sys
from perfkit.workloads.registry import make_workload
w = make_workload("ppo", "cpu", variant="item_logging", envs=8, rollout=8, minibatch=32, epochs=1)
for _ in range(int(sys.argv[1])):
    w.step()
print("ran", sys.argv[1:])
"""
MPPI = """
from perfkit.workloads.registry import make_workload
w = make_workload("mppi", "cpu", samples=16, horizon=2, iterations=1)
for _ in range(8):
    w.step()
"""


def _profile(capsys, tmp_path, source: str, *options: str, script_args=()) -> tuple[int, dict, str]:
    script = tmp_path / "train.py"
    script.write_text(source)
    code = main(["profile", "--json", "--wait", "3", "--warmup", "1", "--active", "2", "--out", str(tmp_path / "t"),
                 *options, str(script), "--", *script_args])
    out, err = capsys.readouterr()
    return code, json.loads(out[out.index("{"):]), out[:out.index("{")] + err


def _profiler_steps(path) -> list[str]:
    with gzip.open(path, "rt") as f:
        return sorted({e["name"] for e in json.load(f)["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")})


def test_ppo_steps_come_from_the_optimizer_hook(tmp_path, capsys):
    code, r, printed = _profile(capsys, tmp_path, PPO, script_args=["4"])
    assert code == 0 and "ran ['4']" in printed  # the script's own argv and output
    assert r["step_source"] == "optimizer" and r["steps_recorded"] == 2
    assert _profiler_steps(r["trace"]) == ["ProfilerStep#4", "ProfilerStep#5"]  # wait 3 + warm-up 1, then 2
    assert r["trace"].endswith(".pt.trace.json.gz") and "/t/train-" in r["trace"]
    assert r["diagnosis"]["verdict"] and isinstance(r["overhead_pct"], float)
    machine = recorded_machine(load_trace(r["trace"], use_cache=False))  # the load as recording started
    assert machine.known and machine.cpus >= 1 and machine.torch_threads >= 1


def test_mppi_without_optimizer_uses_step_function(tmp_path, capsys):
    code, r, _ = _profile(capsys, tmp_path, MPPI, "--step", "perfkit.workloads.mppi:MPPIWorkload._step")
    assert code == 0 and r["step_source"] == "function" and r["steps_recorded"] == 2
    code, r, _ = _profile(capsys, tmp_path, MPPI)  # no optimizer, no --step: say so
    assert r["trace"] is None and "no optimizer.step() was seen" in r["warnings"][0] and "--step" in r["warnings"][0]


def test_script_that_raises_keeps_what_was_recorded(tmp_path, capsys):
    source = PPO.replace("minibatch=32", "minibatch=64").replace(  # one optimizer step per w.step()
        "    w.step()\n", "    w.step()\n    if _ == 4:\n        raise RuntimeError('boom')\n")
    code, r, printed = _profile(capsys, tmp_path, source, script_args=["9"])
    assert code == 1 and "RuntimeError: boom" in printed
    assert r["steps_recorded"] == 1 and "after 5 of 6 scheduled steps" in r["warnings"][0]
    assert _profiler_steps(r["trace"]) == ["ProfilerStep#4", "ProfilerStep#5"]  # #5: cut short by the raise


def test_script_without_torch_gets_a_clear_message(tmp_path, capsys):
    code, r, printed = _profile(capsys, tmp_path, "print(sum(range(10)))\n")
    assert code == 1 and r["trace"] is None and r["steps_recorded"] == 0  # a run that recorded no step failed
    assert "nothing was recorded" in r["warnings"][0] and "perfkit profile: nothing recorded: no optimizer" in printed
    assert "--step FUNCTION" in r["warnings"][0] and "--step plan" in r["warnings"][0]  # the form a script takes
    assert not list((tmp_path / "t").glob("*.gz"))  # the reserved trace name is released


def test_bad_step_function_is_a_parameter_error(tmp_path, capsys):
    (tmp_path / "s.py").write_text("pass\n")
    assert main(["profile", "--step", "not a name", str(tmp_path / "s.py")]) == 2
    assert "module:function" in capsys.readouterr().err
    assert main(["profile", "--step", "nope:", str(tmp_path / "s.py")]) == 2


SCRIPT_STEPS = """
from perfkit.workloads.registry import make_workload

class Planner:
    def __init__(self):
        self.w = make_workload("mppi", "cpu", samples=16, horizon=2, iterations=1)

    def act(self):
        self.w.step()


def plan(p):
    p.act()


def main():
    p = Planner()
    for _ in range(8):
        plan(p)


main()
"""


@pytest.mark.parametrize("step", ["plan", "Planner.act"])
def test_step_function_defined_in_the_script(tmp_path, capsys, step):
    """--step names a function the script itself defines: it does not exist before the script runs."""
    code, r, _ = _profile(capsys, tmp_path, SCRIPT_STEPS, "--step", step)
    assert code == 0 and r["step_source"] == "function" and r["steps_recorded"] == 2, r
    assert _profiler_steps(r["trace"]) == ["ProfilerStep#4", "ProfilerStep#5"]
    code, r, _ = _profile(capsys, tmp_path, SCRIPT_STEPS, "--step", "never_defined")
    assert code == 1 and r["trace"] is None and "--step never_defined: the script never defined it" in r["warnings"][0]


NAMED = """
class Planner:
    def act(self):
        return 1


def plan(p):
    return p.act()


def unused():
    return 0


for _ in range(3):
    plan(Planner())
"""


@pytest.mark.parametrize("step, says", [
    ("NoSuch.method", "--step NoSuch.method: the script never defined it"),
    ("Planner.nope", "--step Planner.nope: the script never defined it"),
    ("not_there", "--step not_there: the script never defined it"),
    ("unused", "unused was never called"),
])
def test_a_step_function_that_is_never_defined_fails_the_run(tmp_path, capsys, step, says):
    code, r, printed = _profile(capsys, tmp_path, NAMED, "--step", step)
    assert code == 1 and r["steps_recorded"] == 0 and says in r["warnings"][0]
    assert f"perfkit profile: nothing recorded: {says}" in printed


@pytest.mark.parametrize("seconds", ["inf", "1e300", "604801"])
def test_a_window_longer_than_a_week_is_refused_in_one_line(tmp_path, capsys, seconds):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    assert main(["profile", "--seconds", seconds, "--out", str(tmp_path / "t"), str(script)]) == 2
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "at most a week" in err and "ran" not in out
    assert not list((tmp_path / "t").glob("*.gz"))


def test_dash_m_finds_a_module_in_the_working_folder(tmp_path, capsys, monkeypatch):
    """``python -m`` puts the working folder first on sys.path; the ``perfkit`` command's own sys.path does not
    hold it, so ``perfkit profile -m mymod`` run beside mymod.py said "not found"."""
    name = f"pk_cwd_module_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(PPO)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    code = main(["profile", "--json", "--wait", "2", "--warmup", "1", "--active", "2", "--out", "t", "-m", name,
                 "--", "4"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out[out.index("{"):])["steps_recorded"] == 2


CLOSER = """
import sys
import torch
print("argv", sys.argv[1:])
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(6):
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
sys.stdout.close()
"""


def test_a_script_that_closes_stdout_still_gets_the_report(tmp_path):
    """The report goes to stderr when the script closed stdout (it was a ValueError traceback); the script
    sees every ``--`` after the first; Kineto's "USDT: ... profiler_start" lines are kept off the terminal."""
    script = tmp_path / "closer.py"
    script.write_text(CLOSER)
    run = subprocess.run([sys.executable, "-m", "perfkit", "profile", "--wait", "2", "--warmup", "1", "--active", "2",
                          "--out", str(tmp_path / "t"), str(script), "--", "a", "--", "b", "--json"],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PERFKIT_HOME": str(tmp_path)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "argv ['a', '--', 'b', '--json']" in run.stdout
    assert "steps      2 recorded (steps from: optimizer)" in run.stderr and "Traceback" not in run.stderr
    assert "USDT" not in run.stderr and "profiler_start" not in run.stderr


def test_notebook_context_manager(tmp_path):
    w = perfkit.make_workload("leaky", "cpu", variant="clean")
    with perfkit.profile(steps=2, wait=2, warmup=1, out=tmp_path) as p:
        for _ in range(6):
            w.step()
    assert len(p.trace.steps) == 2 and p.diagnosis["verdict"] == "CPU-only trace"
    assert "ProfilerStep" not in repr(p) and "2 steps (optimizer)" in repr(p)


@pytest.mark.parametrize("times, expected", [
    ([9.0, 1.0, 1.0, 7.0, 1.5, 1.5], 50.0),  # first wait step (start-up) and first profiled one (its start) left out
    ([9.0, 1.0, 1.0, 7.0, 1.5, None], None),  # one timed profiled step: no median to compare
    ([9.0, 1.0, None, 7.0, 1.5, 1.5], None),  # one timed wait step after start-up: likewise
    ([9.0, 2.0], None),                       # no profiled step: not measured
])
def test_overhead_pct(times, expected):
    got = overhead_pct(times, wait=3, warmup=1, active=2)
    assert got == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize("pct, noise, says", [
    (30.0, 35.0, "not measurable"),    # within the spread of the steps without the profiler
    (30.0, 25.0, "30% slower"),        # beyond it: a cost
    (9.0, None, None),                 # under the 10% bar: nothing to say
    (11.0, None, "11% slower"),        # over it
    (-11.0, None, "could not be measured"),
])
def test_overhead_warnings_table(pct, noise, says):
    got = overhead_warnings(pct, 5, noise)
    assert (says in got[0]) if says else got == []


def test_overhead_noise_is_half_the_range_of_the_wait_steps():
    assert overhead_noise_pct([9.0, 1.0, 1.2, 0.8, 1.0], wait=5) == pytest.approx(20.0)
    assert overhead_noise_pct([9.0, 1.0], wait=5) is None


MASKED = """
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(6):
    x = torch.randn(16, 4)
    y = model(x)
    kept = y[y > 0]
    rows = (y < 0).nonzero()
    (y.square().mean() + kept.sum() * 0).backward()
    opt.step()
    opt.zero_grad()
"""


def test_scan_prints_the_scripts_findings_beside_the_diagnosis(tmp_path, capsys):
    script = tmp_path / "masked.py"
    script.write_text(MASKED)
    code = main(["profile", "--scan", "--wait", "2", "--warmup", "1", "--active", "2", "--out", str(tmp_path / "t"),
                 str(script)])
    out = capsys.readouterr().out
    assert code == 0 and "steps      2 recorded (steps from: optimizer)" in out
    diagnosis, scanned = out.split("scan of the script:")
    assert f"trace      {tmp_path / 't'}" in diagnosis and "CPU-only trace" in diagnosis  # the diagnosis first
    found = {rule: int(line) for line, rule in re.findall(r"masked\.py:(\d+): \[([\w-]+)\]", scanned)}
    assert found == {"optimizer-not-fused": 4, "bool-mask-index": 8, "nonzero-in-step": 9}


PLANNER = """
import time
from perfkit.workloads.registry import make_workload
w = make_workload("mppi", "cpu", samples=16, horizon=2, iterations=1)
end, n = time.monotonic() + 0.8, 0
while time.monotonic() < end:
    w.step()
    n += 1
print("planned", n > 0)
"""


def test_seconds_records_a_window_without_steps(tmp_path, capsys):
    code, r, printed = _profile(capsys, tmp_path, PLANNER, "--seconds", "0.2")
    assert code == 0 and "planned True" in printed  # the script ran to its end after the window
    assert r["step_source"] == "window" and r["steps_recorded"] == 0
    # the window ends when the script next runs Python: on a busy machine it may record longer, and says so
    first = r["warnings"][0]
    assert ("a 0.2 s window without steps" in first or "(asked for 0.2 s:" in first) and "--step" in first
    assert _profiler_steps(r["trace"]) == []  # no ProfilerStep# spans in a window
    with gzip.open(r["trace"], "rt") as f:
        ops = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    assert ops and r["diagnosis"]["verdict"]


def test_dash_m_runs_a_module_with_its_argv(tmp_path, capsys, monkeypatch):
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    source = PPO.replace('print("ran", sys.argv[1:])', 'print("ran", __name__, sys.argv[1:])').replace(
        "    w.step()\n", "    w.step()\n    kept = torch.arange(3.0)[torch.arange(3.0) > 0]\n")
    (package / "train.py").write_text("import torch\n" + source)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["profile", "--json", "--scan", "--wait", "2", "--warmup", "1", "--active", "2",
                 "--out", str(tmp_path / "t"), "-m", "mypkg.train", "--", "4"])
    out = capsys.readouterr().out
    r = json.loads(out[out.index("{"):])
    assert code == 0 and "ran __main__ ['4']" in out
    assert r["step_source"] == "optimizer" and r["steps_recorded"] == 2 and "/t/train-" in r["trace"]
    assert [(Path(f["file"]).relative_to(tmp_path).as_posix(), f["line"], f["rule"]) for f in r["scan"]] == [
        ("mypkg/train.py", 8, "bool-mask-index")]  # --scan finds the module's file


def test_report_writes_a_dated_report_set_and_perf_log_rows(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PERFKIT_HOME", str(tmp_path / "home"))
    script = tmp_path / "train.py"
    script.write_text(PPO)
    code = main(["profile", "--report", "--wait", "2", "--warmup", "1", "--active", "2", str(script), "--", "4"])
    out = capsys.readouterr().out
    assert code == 0 and "report     step_anatomy: ok" in out and "report     cpu_bound: ok" in out
    traces = list((tmp_path / "home" / "traces").glob("train-*.pt.trace.json.gz"))
    assert len(traces) == 1  # the workbook's traces/, with --out left out
    pages = sorted(p.name for p in (tmp_path / "home" / "reports").glob("????-??-??/??????/*.html"))
    assert pages == ["cpu_bound.html", "step_anatomy.html"]
    log = PerfLog(tmp_path / "home" / "reports" / "perf_log.csv").read()
    assert set(log["investigation"]) == {"step_anatomy", "cpu_bound"} and log["value"].notna().all()
    assert log["subject"].str.contains(traces[0].name, regex=False).all()


def test_overhead_warnings_say_what_the_figure_means():
    assert overhead_warnings(None, 5) == [] and overhead_warnings(4.0, 5) == []
    assert "made steps 32% slower" in overhead_warnings(32.0, 5)[0]
    noise = overhead_warnings(-85.0, 5)[0]
    assert "could not be measured (-85%" in noise and "over 4 of them" in noise and "--wait" in noise


class _Event:
    """A CUDA event's stand-in: ``elapsed_time`` in milliseconds from its own clock reading."""

    def __init__(self, ms: float):
        self.ms = ms

    def elapsed_time(self, other) -> float:
        return other.ms - self.ms


def test_steps_are_timed_on_the_gpu_clock_when_every_compared_step_has_an_event(monkeypatch, tmp_path):
    import torch

    from perfkit.profiling.recorder import Recorder
    from perfkit.profiling.session import step_clock

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    r = Recorder(tmp_path / "t.pt.trace.json.gz", wait=3, warmup=1, active=2)
    r.step_times_s = [0.5, 0.002, 0.002, 0.009, 0.004, 0.004]  # the host ran ahead of a GPU-bound step
    r._marks = [_Event(ms) for ms in (100.0, 110.0, 120.0, 140.0, 150.0, 160.0)]
    times, clock = step_clock(r)
    assert clock == "GPU" and times[1:] == pytest.approx([0.010, 0.010, 0.020, 0.010, 0.010])
    assert overhead_pct(times, 3, 1, 2) == pytest.approx(0.0)  # on the host clock it would read +100%
    r._marks[2] = None  # CUDA first used after that boundary: the comparison falls back to the host
    assert step_clock(r)[1] == "host"
    r._marks = [None] * 6  # a CPU-only script
    assert step_clock(r) == (r.step_times_s, "host")
