"""Run-time sync detector (perfkit.detect.runtime) and the ``perfkit detect`` command."""
import argparse
import inspect
import io
import json
import logging
import re
import subprocess
import sys
import tokenize
import warnings
from pathlib import Path

import pytest
import torch

import perfkit.cli
from perfkit.cli import detect as detect_cli
from perfkit.errors import ParameterError
from perfkit.detect import runtime as rt
from perfkit.detect.runtime import SyncEvent, SyncReport, detect_syncs
from perfkit.detect.script import run_script

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
PLANTED = (FIXTURES / "sync_script_planted.py").resolve()
CLEAN = (FIXTURES / "sync_script_clean.py").resolve()
_SYNC = re.compile(r"#\s*SYNC:\s*(?P<ops>[^#]+?)(?:\s+x(?P<n>\d+))?\s*$")


def planted_expectations(path: Path = PLANTED) -> dict[tuple[int, str], int]:
    """(line, op) -> count from the ``# SYNC: op[, op] [xN]`` comments (not strings) of the fixture."""
    expected = {}
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        m = _SYNC.search(tok.string) if tok.type == tokenize.COMMENT else None
        if m:
            for op in m.group("ops").split(","):
                expected[(tok.start[0], op.strip())] = int(m.group("n") or 1)
    return expected


def by_site(report: SyncReport, path: Path) -> dict[tuple[int, str], int]:
    assert {e.file for e in report.events} <= {str(path)}, report.events
    return {(e.line, e.op): e.count for e in report.events}


def here() -> int:
    """Line number of the caller."""
    return inspect.currentframe().f_back.f_lineno


def line_of(func, text: str) -> int:
    lines, start = inspect.getsourcelines(func)
    return start + next(i for i, line in enumerate(lines) if text in line)


def mode_stack_depth() -> int:
    return torch._C._len_torch_function_stack()


# --- the fixtures: every planted sync at its exact line, nothing in the clean script ----------

def test_planted_script_every_sync_at_its_line_with_its_count():
    expected = planted_expectations()
    assert len(expected) >= 15  # the parser found the labels
    report = run_script(PLANTED, treat_cpu_as_device=True)
    assert report.error == ""
    assert by_site(report, PLANTED) == expected
    assert report.mode == "cpu-as-device"
    assert report.total == sum(expected.values())


def test_clean_script_reports_nothing():
    report = run_script(CLEAN, treat_cpu_as_device=True)
    assert report.error == ""
    assert report.events == ()
    assert report.total == 0


def test_script_arguments_reach_sys_argv_and_argv_is_restored():
    before = list(sys.argv)
    report = run_script(PLANTED, ["2"], treat_cpu_as_device=True)
    assert sys.argv == before
    sites = by_site(report, PLANTED)
    scaler_line = next(line for (line, op) in planted_expectations() if op == "GradScaler.step")
    assert sites[(scaler_line, "GradScaler.step")] == 2


def test_non_fused_scaler_step_counts_once_per_step_and_optimizer_internals_are_ignored():
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.Adam(model.parameters())  # single-tensor Adam reads `step` with .item()
    scaler = torch.amp.GradScaler("cpu")
    with detect_syncs(treat_cpu_as_device=True) as det:
        for _ in range(4):
            scaler.scale(model(torch.ones(2, 3)).sum()).backward()
            line = here() + 1
            scaler.step(opt)
            scaler.update()
    assert [e.to_dict() for e in det.report.events] == [
        {"file": __file__, "line": line, "op": "GradScaler.step", "count": 4}]


# --- detect_syncs ------------------------------------------------------------------------------

def test_records_user_line_op_and_count_sorted_by_count():
    x = torch.arange(6.0)
    with detect_syncs(treat_cpu_as_device=True) as det:
        for _ in range(3):
            line_item = here() + 1
            x.sum().item()
        line_bool = here() + 1
        if x.max() > 2:
            pass
    events = det.report.events
    assert events == (SyncEvent(__file__, line_item, "item", 3), SyncEvent(__file__, line_bool, "bool", 1))


def test_frames_in_the_standard_library_are_skipped():
    stream = io.StringIO()
    log = logging.getLogger("perfkit-test-syncs")
    log.addHandler(logging.StreamHandler(stream))
    log.propagate = False
    try:
        with detect_syncs(treat_cpu_as_device=True) as det:
            line = here() + 1
            log.warning("value %s", torch.tensor(1.5))
    finally:
        log.handlers.clear()
    assert "value tensor(1.5000)" in stream.getvalue()
    assert [(e.file, e.line, e.op) for e in det.report.events] == [(__file__, line, "repr")]


@pytest.mark.parametrize("call, op", [
    (lambda t: t.repeat_interleave(torch.tensor([1, 2, 1])), "repeat_interleave"),
    (lambda t: torch.where(t > 1), "where(cond)"),
    (lambda t: t.argwhere(), "argwhere"),
    (lambda t: int(t[0]), "int"),
    (lambda t: 2.0 in t, "in"),
    (lambda t: torch.equal(t, t), "equal"),
    (lambda t: f"{t.sum():.2f}", "format"),
])
def test_more_sync_ops(call, op):
    t = torch.tensor([1.0, 2.0, 3.0])
    with detect_syncs(treat_cpu_as_device=True) as det:
        call(t)
    assert [e.op for e in det.report.events] == [op]


@pytest.mark.parametrize("call", [
    lambda t: t.repeat_interleave(torch.tensor([1, 2, 1]), output_size=4),
    lambda t: t.repeat_interleave(2),
    lambda t: torch.where(t > 1, t, 0.0),
    lambda t: t[torch.tensor([0, 2])],
    lambda t: t.masked_fill(t > 1, 0.0),
    lambda t: t.to(torch.float64),
    lambda t: t.to("cpu", non_blocking=True),
    lambda t: t.nonzero_static(size=2),
])
def test_non_syncing_ops_are_not_flagged(call):
    t = torch.tensor([1.0, 2.0, 3.0])
    with detect_syncs(treat_cpu_as_device=True) as det:
        call(t)
    assert det.report.events == ()


def test_without_cpu_as_device_on_a_cpu_machine_reports_no_gpu():
    if torch.cuda.is_available():
        pytest.skip("tests the no-GPU path")
    with detect_syncs(treat_cpu_as_device=False) as det:
        torch.ones(2).sum().item()
    report = det.report
    assert report.events == () and report.mode == "no-device"
    assert report.warnings and report.warnings[0].startswith("no GPU")
    assert detect_syncs().report.mode == "cpu-as-device"  # the default without a GPU


def test_nested_and_reentrant_detectors_count_each_call_once():
    x = torch.ones(3)
    outer, inner = detect_syncs(treat_cpu_as_device=True), detect_syncs(treat_cpu_as_device=True)
    with outer:
        x.sum().item()
        with inner, inner:
            x.sum().item()
            assert mode_stack_depth() == 1
    assert outer.report.total == 2 and inner.report.total == 1
    assert mode_stack_depth() == 0


def test_mode_is_removed_even_when_the_block_raises():
    before = mode_stack_depth()
    det = detect_syncs(treat_cpu_as_device=True)
    with pytest.raises(ZeroDivisionError):
        with det:
            torch.ones(1).item()
            1 / 0
    assert mode_stack_depth() == before
    torch.ones(1).item()  # outside: not recorded
    assert det.report.total == 1


def test_counts_accumulate_over_blocks_and_per_step_divides():
    det = detect_syncs(treat_cpu_as_device=True)
    for _ in range(4):
        with det:
            torch.ones(1).item()
            torch.ones(1).tolist()
    frame = det.report.per_step(4)
    assert list(frame.columns) == ["file", "line", "op", "count", "per_step"]
    assert frame["count"].tolist() == [4, 4] and frame["per_step"].tolist() == [1.0, 1.0]
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ParameterError):
            det.report.per_step(bad)


def test_bad_treat_cpu_as_device_is_a_parameter_error():
    with pytest.raises(ParameterError, match="treat_cpu_as_device"):
        detect_syncs(treat_cpu_as_device="yes")


# --- CUDA sync debug mode, with a fake torch.cuda API -----------------------------------------

class FakeSyncDebug:
    """Stands in for torch.cuda.{get,set}_sync_debug_mode; fails on any value but the expected ones."""

    def __init__(self):
        self.calls = []

    def get(self):
        self.calls.append(("get",))
        return 0

    def set(self, mode):
        assert mode in ("warn", 0), mode
        self.calls.append(("set", mode))


def noisy_known(t):
    """A torch-function-aware op that emits the sync-debug warning (like .item() on CUDA)."""
    if torch.overrides.has_torch_function_unary(t):
        return torch.overrides.handle_torch_function(noisy_known, (t,), t)
    warnings.warn(rt.SYNC_DEBUG_MESSAGE)
    return t


def noisy_unknown(t):
    if torch.overrides.has_torch_function_unary(t):
        return torch.overrides.handle_torch_function(noisy_unknown, (t,), t)
    warnings.warn(rt.SYNC_DEBUG_MESSAGE)
    return t


def test_sync_debug_warnings_become_events_once_and_mode_is_restored(monkeypatch):
    fake = FakeSyncDebug()
    monkeypatch.setattr(rt, "_sync_debug_api", lambda: (fake.get, fake.set))
    table = dict(rt.sync_classifiers())
    table[noisy_known] = lambda args, kwargs: ("noisy", None, False)
    monkeypatch.setattr(rt, "sync_classifiers", lambda: table)
    show_before = warnings.showwarning
    t = torch.ones(2)
    with pytest.warns(UserWarning, match="unrelated"):
        with detect_syncs(treat_cpu_as_device=False) as det:
            noisy_known(t)
            noisy_unknown(t)
            line_plain = here() + 1
            warnings.warn(rt.SYNC_DEBUG_MESSAGE)
            warnings.warn("unrelated")  # passed through to the previous handler
    assert fake.calls == [("get",), ("set", "warn"), ("set", 0)]
    assert warnings.showwarning is show_before
    # the noisy ops are user code (this file): the innermost line of theirs that ran is the site
    got = {(e.line, e.op, e.count) for e in det.report.events}
    assert got == {(line_of(noisy_known, "handle_torch_function"), "noisy", 1),
                   (line_of(noisy_unknown, "warnings.warn"), "sync-debug:noisy_unknown", 1),
                   (line_plain, "sync-debug:unknown", 1)}
    assert det.report.sync_debug is True


# --- run_script errors ------------------------------------------------------------------------

def test_missing_script_is_a_parameter_error(tmp_path):
    with pytest.raises(ParameterError, match="not found"):
        run_script(tmp_path / "nope.py")


def test_failing_script_keeps_events_and_reports_the_error(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("import torch\nx = torch.ones(2)\nx.sum().item()\nraise ValueError('bad batch')\n")
    report = run_script(script, treat_cpu_as_device=True)
    assert [(e.line, e.op) for e in report.events] == [(3, "item")]
    assert report.error == f"ValueError: bad batch at {script.resolve()}:4"
    assert mode_stack_depth() == 0


@pytest.mark.parametrize("code, error", [(0, ""), (None, ""), (3, "script exited with status 3")])
def test_system_exit(tmp_path, code, error):
    script = tmp_path / "exits.py"
    script.write_text(f"import sys\nsys.exit({code!r})\n")
    assert run_script(script).error == error


# --- report rendering -------------------------------------------------------------------------

def test_report_frame_records_repr_and_escaped_html():
    report = SyncReport((SyncEvent("<b>.py", 3, "item", 5), SyncEvent("a.py", 1, "bool", 2)), "cuda", error="<oops>")
    assert report.to_records()[0] == {"file": "<b>.py", "line": 3, "op": "item", "count": 5}
    assert list(report.to_frame().columns) == ["file", "line", "op", "count"]
    assert repr(report) == "SyncReport(2 sites, 7 syncs, mode='cuda')"
    html = report._repr_html_()
    assert "&lt;b&gt;.py" in html and "&lt;oops&gt;" in html and "<b>.py" not in html


# --- the CLI ----------------------------------------------------------------------------------

def parse(argv):
    parser = argparse.ArgumentParser(prog="perfkit")
    detect_cli.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_json_lists_every_planted_sync(capsys):
    rc = detect_cli.run(parse(["detect", "--cpu-as-device", str(PLANTED), "--json"]))
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert all(set(row) == {"file", "line", "op", "count"} for row in out)
    assert {(r["line"], r["op"]): r["count"] for r in out} == planted_expectations()
    assert [r["count"] for r in out] == sorted((r["count"] for r in out), reverse=True)


def test_cli_table_and_script_options_after_double_dash(capsys):
    rc = detect_cli.run(parse(["detect", "--cpu-as-device", str(PLANTED), "--", "1"]))
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0].startswith("16 syncs at 16 sites")
    assert re.search(r"\s1\s+GradScaler\.step\s+\S+sync_script_planted\.py:\d+", out)


def test_cli_failing_script_prints_events_then_exits_1(tmp_path, capsys):
    script = tmp_path / "fails.py"
    script.write_text("import torch\ntorch.ones(1).item()\nraise RuntimeError('step 7 diverged')\n")
    rc = detect_cli.run(parse(["detect", "--json", "--cpu-as-device", str(script)]))
    captured = capsys.readouterr()
    assert rc == 1
    assert json.loads(captured.out) == [{"file": str(script.resolve()), "line": 2, "op": "item", "count": 1}]
    assert "RuntimeError: step 7 diverged" in captured.err


def test_cli_missing_script(tmp_path):
    with pytest.raises(ParameterError):
        detect_cli.run(parse(["detect", str(tmp_path / "missing.py")]))


def test_python_dash_m_perfkit_detect(tmp_path):
    if "detect" not in perfkit.cli.COMMANDS:
        pytest.skip("`detect` is not wired into perfkit.cli.COMMANDS yet")
    proc = subprocess.run([sys.executable, "-m", "perfkit", "detect", "--json", str(CLEAN)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    missing = subprocess.run([sys.executable, "-m", "perfkit", "detect", str(tmp_path / "x.py")],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_cuda_mode_says_when_the_tensors_stayed_on_the_cpu(monkeypatch):
    """On the H100 a CPU-only script gave "0 syncs (mode: cuda)" and nothing else: now it says why."""
    with detect_syncs(treat_cpu_as_device=False) as det:
        torch.ones(2).sum().item()
        torch.ones(3).nonzero()
    monkeypatch.setattr(rt, "_cuda_available", lambda: True)  # as on a GPU machine
    report = det.report
    assert report.mode == "cuda" and report.events == ()
    assert report.warnings[0].startswith("2 calls that would wait for the GPU on a device tensor")
    assert "which do not wait, and are not counted; no call synced" in report.warnings[0]
    assert "its tensors stayed on the CPU" in report.warnings[0] and "--cpu-as-device" in report.warnings[0]
