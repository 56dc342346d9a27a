"""`pytest -m quick` (README) is a first check that touches every layer: each layer's test files are in
conftest.QUICK, exist, and the mark selects tests from every one of them."""
import subprocess
import sys

from conftest import QUICK, ROOT

LAYERS = ("trace", "analysis", "bench", "report", "cli", "profiling", "notebooks", "layout")


def test_every_layer_has_quick_test_files_that_exist():
    assert tuple(QUICK) == LAYERS
    assert [f for files in QUICK.values() for f in files if not (ROOT / f).is_file()] == []


def test_the_quick_mark_selects_tests_from_every_layers_files():
    files = [f for fs in QUICK.values() for f in fs]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-m", "quick",
                          "-p", "no:cacheprovider", *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    selected = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    assert {layer: [f for f in fs if f not in selected] for layer, fs in QUICK.items()} == dict.fromkeys(QUICK, [])
