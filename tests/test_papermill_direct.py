"""README's "papermill directly" block runs as written, from a `perfkit init` folder (the .ipynb
notebooks) and from a folder laid out like a clone (the jupytext .py notebooks), and the run lands
in reports/index.html."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfkit.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _readme_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("### papermill directly", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def _run_block(lines: list[str], cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PERFKIT_HOME", None)
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]


def _assert_indexed(folder: Path) -> None:
    pages = list((folder / "reports").glob("*/*/sync_points.html"))
    assert len(pages) == 1
    index = (folder / "reports" / "index.html").read_text()
    assert re.search(r'href="[^"]*/sync_points\.html"', index)
    assert "no verdict recorded" not in index  # the card the notebook displayed (issue 53)
    assert "sync_points" in (folder / "reports" / "perf_log.csv").read_text()


@pytest.mark.parametrize("layout", ["init", "clone"])
def test_readme_papermill_block_runs_as_written(tmp_path, layout, capsys):
    lines = _readme_block()
    assert len(lines) == 5 and lines[1].startswith("papermill notebooks/") and lines[2].startswith("jupytext ")
    folder = tmp_path / "wb"
    if layout == "init":
        assert main(["init", str(folder)]) == 0
        chosen = [lines[0], lines[1], *lines[3:]]
    else:  # what a clone holds: notebooks/*.py
        shutil.copytree(ROOT / "notebooks", folder / "notebooks", ignore=shutil.ignore_patterns("*.ipynb"))
        chosen = [lines[0], *lines[2:]]
    _run_block([line.split("  #")[0] for line in chosen], folder)
    _assert_indexed(folder)
