"""A missing optional package is one line naming the perfkit extra that installs it, in the CLI
and in a notebook's first cell; ``perfkit[workbook]`` brings everything the workbook runs."""
from __future__ import annotations

import pickle
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from perfkit.errors import MissingDependencyError, missing_dependency
from perfkit.report.publish.execute import cell_error

ROOT = Path(__file__).resolve().parents[1]
# Runs perfkit with `import torch` failing as it does where torch is not installed.
BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoTorch())
"""


def _without_torch(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH + code], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_cli_detect_without_torch_is_one_line_naming_the_extra(tmp_path):
    (tmp_path / "train.py").write_text("import torch\nprint(torch.ones(3).sum().item())\n")
    out = _without_torch("from perfkit.cli import main\nsys.exit(main(['detect', 'train.py']))", tmp_path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "perfkit detect: error: this command needs the 'torch' package, which is not installed: "
        'pip install "perfkit[workbook]"']


def test_live_mode_first_cell_without_torch_names_the_extra(tmp_path):
    code = ("from perfkit import workbook\nfrom perfkit.report import memory_leak\nfor m in (workbook, memory_leak):\n"
            "    try:\n        m.check_mode('live')\n    except Exception as e:\n        print(type(e).__name__, e)\n"
            "print(workbook.check_mode('trace'))")
    lines = _without_torch(code, tmp_path).stdout.splitlines()
    assert len(lines) == 3 and lines[2] == "trace"
    for line in lines[:2]:
        assert line.startswith("MissingDependencyError mode='live'") and 'pip install "perfkit[workbook]"' in line


def test_validate_without_torch_names_the_extra(tmp_path):
    code = "import perfkit\ntry:\n    perfkit.validate('cpu', only=['leak_slope'])\nexcept Exception as e:\n    print(e)"
    assert _without_torch(code, tmp_path).stdout.strip() == (
        "device='cpu' needs the 'torch' package, which is not installed: pip install \"perfkit[workbook]\"")


def test_notebook_cell_error_names_the_extra():
    assert cell_error("ModuleNotFoundError", "No module named 'torch'") == (
        "MissingDependencyError: this notebook needs the 'torch' package, which is not installed: "
        'pip install "perfkit[workbook]"')
    # a module perfkit does not know stays the cell's own error
    assert cell_error("ModuleNotFoundError", "No module named 'mylib'") == "ModuleNotFoundError: No module named 'mylib'"
    assert cell_error("ValueError", "bad") == "ValueError: bad"


@pytest.mark.parametrize("module, extra", [("torch", "workbook"), ("duckdb", "sql"), ("distributed", "dask"),
                                           ("pynvml", "workbook")])
def test_missing_dependency_names_its_extra(module, extra):
    err = missing_dependency(ModuleNotFoundError(f"No module named {module!r}", name=module), "x")
    assert isinstance(err, MissingDependencyError) and f'pip install "perfkit[{extra}]"' in str(err)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_a_required_or_unknown_module_is_not_turned_into_a_hint():
    assert missing_dependency(ModuleNotFoundError("No module named 'pandas'", name="pandas"), "x") is None
    assert missing_dependency(ImportError("cannot import name 'x'"), "x") is None


def test_workbook_extra_brings_the_whole_workbook():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["workbook"]
    names = {r.split("=")[0].split(">")[0].strip() for r in extra}
    assert {"torch", "jupyterlab", "ipywidgets", "nvidia-ml-py", "papermill", "jupytext", "matplotlib"} <= names
    pinned = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
              if line.startswith("torch==")]
    assert pinned and pinned[0] in extra  # the same pin as requirements.txt, never an open range
