"""What ``perfkit profile`` runs, found the way ``python`` finds it: a script file, or (``-m``) a module
importable from the working directory, which ``python -m`` puts first on ``sys.path``.

Light on purpose (no torch, no pandas): ``perfkit profile`` checks its target with :func:`check_target`
before it imports anything heavy, so a mistyped name is refused at once.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys

from ..errors import ParameterError


def check_target(target, module: bool) -> None:
    """Raise ParameterError unless ``target`` is a script file or, with ``module``, a module whose top-level
    package is importable from the working directory (looked up without importing anything; a missing
    submodule is found when the module runs). The messages are those of the run itself."""
    if not module:
        if not os.path.isfile(target):
            raise ParameterError(f"script {str(target)!r} not found: pass the path of a Python file to run")
        return
    top = str(target).partition(".")[0]
    with module_path():
        try:
            found = bool(top) and importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            found = False
    if not found:
        raise _module_not_found(target)


def module_file(name) -> str:
    """The file of module ``name`` (a package's ``__init__.py``), found without running it from the current
    ``sys.path`` (inside :class:`module_path` for the working directory); its parent packages are imported
    to look. Raises ParameterError when it is not found."""
    try:
        spec = importlib.util.find_spec(str(name))
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        raise _module_not_found(name)
    return spec.origin


def _module_not_found(name) -> ParameterError:
    return ParameterError(f"module {str(name)!r} not found: pass an importable module name "
                          "(run from the folder that holds it, or install it)")


class module_path:  # noqa: N801  (a context manager used as ``with module_path():``)
    """The working directory first on ``sys.path`` inside the block, as ``python -m`` puts it, so that
    ``perfkit profile -m mymod`` finds ``mymod.py`` in the folder it is run from (the ``perfkit`` command's
    own ``sys.path`` starts with its bin folder); ``sys.path`` is put back after."""

    def __enter__(self) -> "module_path":
        self._saved = list(sys.path)
        sys.path.insert(0, os.getcwd())
        return self

    def __exit__(self, *exc) -> bool:
        sys.path[:] = self._saved
        return False


LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")


def is_launcher(script, args) -> bool:
    """Whether ``script args...`` starts a distributed launcher: ``torchrun ...`` or ``python -m torch.distributed.run``."""
    name = os.path.basename(str(script))
    args = list(map(str, args))
    return name in ("torchrun", "torchrun.exe") or (bool(_PYTHON.match(name)) and args[:1] == ["-m"]
                                                     and args[1:2] != [] and args[1] in LAUNCHER_MODULES)


def job_command(script, args, *, module: bool, ranks) -> tuple[list[str], bool] | None:
    """(command, whether its first process is a rank too) when ``perfkit profile`` runs ``script`` as a job
    whose processes record themselves: a launcher (:func:`is_launcher`), or any script with ``--ranks``
    (``ranks`` not None: its ``torch.multiprocessing.spawn`` children are ranks); None to run it in process."""
    if is_launcher(script, args):
        return [str(script), *map(str, args)], False
    if ranks is None:
        return None
    return [sys.executable, *(["-m"] if module else []), str(script), *map(str, args)], True
