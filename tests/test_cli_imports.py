"""``perfkit --help`` starts at once: building the parser imports no pandas, scipy or numpy
(each subcommand's body module, with what it needs, is imported only when it runs)."""
from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

import perfkit.cli
import perfkit.cli.parsers

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


def test_top_level_help_imports_no_heavy_module():
    """``perfkit --help`` through ``main``, as the console script runs it, in a fresh interpreter."""
    code = _PROBE.replace("perfkit.cli.build_parser()",
                          "import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()) as out:\n"
                          "    try:\n        perfkit.cli.main(['--help'])\n    except SystemExit:\n        pass\n"
                          "assert 'PyTorch performance investigations.' in out.getvalue()")
    assert _heavy_modules_after(code) == []


@pytest.mark.parametrize("name", perfkit.cli.COMMANDS)
def test_every_command_dispatches_to_a_module_with_run(name):
    """``main`` imports ``perfkit.cli.<command with - as _>`` and calls its ``run``: each parser's
    command name leads to a body module that imports and has ``run``; ``register`` binds that ``run``."""
    parser = argparse.ArgumentParser(prog="perfkit")
    command = perfkit.cli.parsers.PARSERS[name](parser.add_subparsers(dest="command")).prog.split()[-1]
    assert command.replace("-", "_") == name
    module = importlib.import_module(f"perfkit.cli.{name}")
    assert callable(module.run)
    sub = argparse.ArgumentParser().add_subparsers(dest="command")
    module.register(sub)
    assert sub.choices[command].get_default("func") is module.run


@pytest.mark.parametrize("command, alias", [(c, a) for c, aliases in perfkit.cli.parsers.ALIASES.items() for a in aliases])
def test_an_old_command_name_runs_the_same_body(command, alias):
    """``perfkit syncs`` (an alias kept where users already type it) parses as ``perfkit sync-points`` and
    imports the same body, ``perfkit/cli/sync_points.py``."""
    parser = perfkit.cli.build_parser()
    choices = parser._subparsers._group_actions[0].choices
    assert choices[alias] is choices[command]
    assert perfkit.cli.body_name(alias) == perfkit.cli.body_name(command) == command.replace("-", "_")
    assert command.replace("-", "_") in perfkit.cli.COMMANDS and alias not in perfkit.cli.COMMANDS


def test_parsers_cover_exactly_the_commands():
    assert set(perfkit.cli.parsers.PARSERS) == set(perfkit.cli.COMMANDS)
    assert len(perfkit.cli.COMMANDS) == len(set(perfkit.cli.COMMANDS))


def test_validate_help_names_the_checks_and_presets_the_suite_runs():
    """``perfkit validate --help`` lists the checks from a light module; they are the suite's own."""
    from perfkit.validation.checks import CHECKS, PRESETS
    from perfkit.validation.names import CHECK_NAMES, PRESET_NAMES

    assert tuple(CHECKS) == CHECK_NAMES and tuple(PRESETS) == PRESET_NAMES
