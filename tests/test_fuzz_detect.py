"""Fuzz: `perfkit detect` on scripts that leave in every way a program can (issue 16: a script that
forks printed two reports, two JSON documents for --json; os._exit(5) returned 5 with no report;
KeyboardInterrupt dropped the syncs already found; `detect train.py --epochs 1` gave no hint)."""
import pytest

from fuzzkit import ESCAPE_NAMES, TORCH_BUDGET, run_cli, run_main
from perfkit.detect.script import run_script

ONE_SYNC = "import torch\nx = torch.ones(3)\nx.sum().item()\n"  # line 3: one item() sync


def script(tmp_path, body: str, name: str = "s.py"):
    path = tmp_path / name
    path.write_text(ONE_SYNC + body)
    return path


def test_a_script_that_forks_prints_one_report(tmp_path):
    path = script(tmp_path, "import os\npid = os.fork()\nif pid:\n    os.waitpid(pid, 0)\nx.max().item()\n")
    out = run_cli("detect", "--json", path, budget=TORCH_BUDGET)
    out.assert_clean(json_out=True, codes=(0,))  # two JSON documents would not parse as one
    assert [(r["line"], r["op"], r["count"]) for r in out.json()] == [(3, "item", 1), (8, "item", 1)]


def test_os_exit_still_reports_and_exits_with_its_status(tmp_path):
    path = script(tmp_path, "import os\nos._exit(5)\nx.max().item()\n")
    out = run_cli("detect", "--json", path, budget=TORCH_BUDGET)
    out.assert_clean(json_out=True, codes=(5,))
    assert [(r["line"], r["op"]) for r in out.json()] == [(3, "item")]
    assert "os._exit with status 5" in out.err


def test_keyboard_interrupt_keeps_the_syncs_found(tmp_path):
    path = script(tmp_path, "raise KeyboardInterrupt\n")
    try:
        report = run_script(path)
    except KeyboardInterrupt:  # must not reach pytest: that would end the whole session
        pytest.fail("run_script let the script's KeyboardInterrupt through")
    assert [(e.line, e.op) for e in report.events] == [(3, "item")]
    assert report.exit_status == 130 and "interrupted" in report.error


@pytest.mark.parametrize("code, status", [("sys.exit(3)", 3), ("sys.exit('bad config')", 1), ("sys.exit(0)", 0),
                                          ("raise ValueError('x')", 1)])
def test_exit_status_is_the_scripts(tmp_path, code, status):
    path = script(tmp_path, f"import sys\n{code}\n")
    report = run_script(path)
    assert report.exit_status == status and [e.line for e in report.events] == [3]


def test_script_options_before_the_double_dash_get_a_hint(tmp_path):
    out = run_main("detect", script(tmp_path, ""), "--epochs", "1")
    assert out.rc == 2 and "Traceback" not in out.err
    assert "unrecognized arguments: --epochs 1" in out.err and "after `--`" in out.err


def test_escapes_in_script_names_do_not_reach_the_terminal(tmp_path):
    name = "".join(ESCAPE_NAMES).replace("\x00", "0").replace("/", "_") + ".py"
    path = script(tmp_path, "raise RuntimeError('boom\\x1b[31m')\n", name)
    out = run_main("detect", path)
    out.assert_clean(codes=(1,))
    assert len(out.out.splitlines()) == 4  # summary, header, one site, the mode note
    assert "\x1b" not in out.err and "RuntimeError: boom\\x1b[31m" in out.err
