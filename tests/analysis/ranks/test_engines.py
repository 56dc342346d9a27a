"""``analysis.ranks.engines``: the local engine's process pool from a plain script."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_script_without_a_main_guard_can_compare_ranks(tmp_path):
    """A fork server re-runs a script's ``__main__`` in each worker: a script calling ``perfkit.ranks`` at top level
    (no ``if __name__ == "__main__":``) failed with multiprocessing's bootstrapping RuntimeError and
    BrokenProcessPool. A one-thread script's workers are forked and never run it again."""
    script = tmp_path / "compare_ranks.py"
    script.write_text("import perfkit\n"
                      f"r = perfkit.ranks({str(ROOT / 'data' / 'traces' / 'ranks' / 'ddp4_slow_dataloader')!r}, "
                      "workers=2)\nprint('ranks', len(r.ranks))\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "ranks 4", run.stderr[-2000:]
    assert "bootstrapping" not in run.stderr and "BrokenProcessPool" not in run.stderr
