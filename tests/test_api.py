"""The public API resolves, and importing perfkit stays light."""
import subprocess
import sys

import perfkit


def test_every_export_resolves():
    for name in perfkit.__all__:
        assert getattr(perfkit, name) is not None, name


def test_import_is_light():
    code = "import sys, perfkit; print(','.join(m for m in ('torch', 'matplotlib', 'papermill', 'pynvml') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
