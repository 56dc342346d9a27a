"""``perfkit.processes``: worker pools start without the caller's ``__main__``: a Jupyter kernel's (no
``__spec__``, after ``%reset`` too, as the ranks report meets in a reused kernel: test_default_reports) and a
script's without an ``if __name__ == "__main__":`` guard, which a fork server or spawn would run again in every
worker (multiprocessing's "bootstrapping phase" RuntimeError, then BrokenProcessPool)."""
import subprocess
import sys
import types
from pathlib import Path

import pytest

from perfkit.processes import main_left_out

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "data" / "traces" / "gpu" / "item_logging.pt.trace.json.gz"
RANKS = ROOT / "data" / "traces" / "ranks" / "ddp4_slow_dataloader"


def test_main_left_out_hides_and_restores_spec_and_file(monkeypatch):
    kernel_main = types.ModuleType("__main__")  # what %reset leaves: no __spec__ attribute at all
    del kernel_main.__spec__
    monkeypatch.setitem(sys.modules, "__main__", kernel_main)
    with main_left_out():
        assert kernel_main.__spec__ is None and not hasattr(kernel_main, "__file__")
    assert kernel_main.__spec__ is None  # a kernel's missing spec stays the None of a script
    script_main = types.ModuleType("__main__")
    script_main.__spec__, script_main.__file__ = spec, path = object(), "/home/me/train.py"
    monkeypatch.setitem(sys.modules, "__main__", script_main)
    with pytest.raises(KeyError):
        with main_left_out():
            assert script_main.__spec__ is None and not hasattr(script_main, "__file__")
            raise KeyError("restored on the way out")
    assert script_main.__spec__ is spec and script_main.__file__ == path


@pytest.mark.parametrize("call", [
    # small chunks, so that the small trace is decoded by the workers
    "__import__('perfkit.trace.loader.parse').trace.loader.parse.__setattr__('CHUNK_BYTES', 1 << 14) or "
    f"perfkit.load_trace({str(TRACE)!r}, workers=2, use_cache=False).events.shape[0] > 0",
    f"len(perfkit.ranks({str(RANKS)!r}, workers=2).ranks) == 4",
])
def test_a_threaded_script_without_a_main_guard_starts_workers(tmp_path, call):
    """A thread running (a monitor, a logger) makes perfkit start workers from a fork server, not by forking."""
    script = tmp_path / "analyze.py"
    script.write_text("import threading, time\nimport perfkit\n"
                      "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                      f"print('ok', {call})\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "PERFKIT_CACHE_DIR": str(tmp_path / "cache"),
                              "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0 and run.stdout.strip() == "ok True", run.stderr[-3000:]
    assert "bootstrapping" not in run.stderr and "BrokenProcessPool" not in run.stderr
