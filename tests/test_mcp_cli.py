"""``perfkit <command> --markdown`` (the bounded text ``perfkit mcp`` replies with, for a pull request comment
or a chat) and ``perfkit mcp``'s own command line: a bad root or budget, and the SDK missing, are one line
each. None of this needs the mcp package."""
import subprocess
import sys

import pytest

from perfkit.cli import main
from tests.conftest import ROOT, SHARED_TRACES

TRACES = ROOT / "data" / "traces"
GPU = str(TRACES / "gpu" / "item_logging.pt.trace.json.gz")
COMMANDS = [("diagnose", [GPU]), ("whatif", [GPU]), ("sync-points", [GPU]), ("gaps", [GPU]), ("critical-path", [GPU]),
            ("hotspots", [GPU]), ("gpu-kernels", [GPU]), ("summary", [GPU]),
            ("ranks", [str(TRACES / "ranks" / "ddp4_slow_dataloader")]),
            ("trace-diff", [str(TRACES / "gpu" / "copies_pageable.pt.trace.json.gz"),
                            str(TRACES / "gpu" / "copies_pinned.pt.trace.json.gz")]),
            ("sql", ["SELECT name, count(*) AS n FROM events GROUP BY 1 ORDER BY 2 DESC, 1", GPU])]
# no shipped trace recorded memory ([memory] events): memory pages through a shared one, where present
MEMORY = SHARED_TRACES / "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz"
if MEMORY.exists():
    COMMANDS.append(("memory", [str(MEMORY)]))


@pytest.mark.parametrize("command, paths", COMMANDS)
def test_markdown_pages_fit_their_budget_and_the_cursor_gives_the_rest(capsys, command, paths):
    cursor, pages = None, []
    while True:
        assert main([command, *paths, "--markdown", "--budget", "500", *(["--cursor", cursor] if cursor else [])]) == 0
        text = capsys.readouterr().out.rstrip("\n")
        assert len(text) <= 2_000 and "\n" in text
        pages.append(text)
        cursor = text.rsplit('more: "', 1)[1].split('"')[0] if text.splitlines()[-1].startswith("more: ") else None
        if cursor is None:
            break
    answer = pages[0].splitlines()[0]
    assert all(p.splitlines()[0] == answer + " (continued)" for p in pages[1:])
    assert main([command, *paths, "--markdown"]) == 0
    whole = capsys.readouterr().out
    assert whole.startswith(answer) and len(whole) <= 16_000


def test_a_cursor_of_another_command_is_one_line(capsys):
    assert main(["gaps", GPU, "--markdown", "--budget", "500"]) == 0
    cursor = capsys.readouterr().out.rsplit('more: "', 1)[1].split('"')[0]
    assert main(["hotspots", GPU, "--markdown", "--cursor", cursor]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "call hotspots without a cursor" in err


BLOCK_MCP = """
import sys
class _NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mcp", "mcp_types"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoMcp())
from perfkit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_perfkit_mcp_without_the_sdk_names_the_extra():
    done = subprocess.run([sys.executable, "-c", BLOCK_MCP, "mcp"], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip() == ("perfkit mcp: error: this command needs the 'mcp_types' package, which is not "
                                   'installed: pip install "perfkit[mcp]"')


@pytest.mark.parametrize("argv, says", [
    (["mcp", "--root", "/no/such/folder"], "--root /no/such/folder: not a folder; give a folder that holds the traces"),
    (["mcp", "--budget", "5"], "budget=5: give a whole number of tokens from 500 to 50,000"),
])
def test_perfkit_mcp_refuses_a_bad_root_or_budget_in_one_line(capsys, argv, says):
    pytest.importorskip("mcp")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
