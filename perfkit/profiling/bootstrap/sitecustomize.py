"""Put first on ``PYTHONPATH`` by ``perfkit profile`` for a job's processes: Python imports this module at start-up,
before the script, so each rank is recorded from its first line (:func:`perfkit.profiling.child.start`). Then the
``sitecustomize`` this one shadows, if any, is imported, as it would have been. Never raises into the job."""
import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
try:
    from perfkit.profiling.child import start as _start

    _start()
except Exception as _exc:  # noqa: BLE001 (a job whose Python has no perfkit runs unrecorded)
    print(f"perfkit profile: this process is not recorded ({type(_exc).__name__}: {_exc})", file=sys.stderr)

_saved = sys.modules.pop("sitecustomize", None)
_path = list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
try:
    importlib.import_module("sitecustomize")
except ImportError:
    pass
finally:
    sys.path[:] = _path
    sys.modules.setdefault("sitecustomize", _saved)
