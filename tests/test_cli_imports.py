"""``perfkit --help`` starts at once: building the parser imports no pandas, scipy or numpy
(each subcommand imports what it needs when it runs)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pandas", "scipy", "numpy", "pyarrow", "torch", "jinja2", "matplotlib", "papermill")

_PROBE = """
import json, sys
import perfkit.cli
perfkit.cli.build_parser()
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[1])))))
"""


def _heavy_modules_after(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, json.dumps(HEAVY)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_build_parser_imports_no_heavy_module():
    assert _heavy_modules_after(_PROBE) == []


@pytest.mark.parametrize("command", ["summary", "run", "validate", "log", "detect", "scan"])
def test_subcommand_help_imports_no_heavy_module(command):
    code = _PROBE.replace("perfkit.cli.build_parser()",
                          f"import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n"
                          f"    try:\n        perfkit.cli.main([{command!r}, '--help'])\n"
                          f"    except SystemExit:\n        pass")
    assert _heavy_modules_after(code) == []


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a probe that does import pandas reports it."""
    assert "pandas" in _heavy_modules_after(_PROBE.replace("perfkit.cli.build_parser()", "import pandas"))
