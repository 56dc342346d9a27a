"""Starting worker processes from wherever perfkit runs: a Jupyter kernel, a script, ``python -m``.

A fork server or spawn start prepares each worker from ``__main__``: by its ``__spec__`` name
(``python -m module``) or its ``__file__`` (a script), which the worker (and the fork server itself)
imports and so runs again. A script that loads a trace at top level, without an
``if __name__ == "__main__":`` guard, then starts workers from inside its own start-up and fails with
multiprocessing's "bootstrapping phase" RuntimeError and a BrokenProcessPool; a guarded one reads the
script's imports again in every worker. perfkit's workers run perfkit's own functions only, so
:func:`main_left_out` hides both while workers start: they start from nothing of ``__main__``. A Jupyter
kernel's ``__main__`` has no ``__spec__`` attribute (``%reset`` deletes it again), where a start fails with
AttributeError: it is given the None of a script. Harmless for a fork, which reads none of it. Every pool
perfkit starts does so inside :func:`main_left_out` (the trace loader's, the ranks engine's).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

_MISSING = object()


def spawn_all_at_once(pool) -> None:
    """Make a ``ProcessPoolExecutor`` start all its workers at its first submit, as it does for fork (Python 3.11
    starts fork-server and spawn workers one submit at a time, later ones outside :func:`main_left_out`). The flag is
    the executor's own; an executor without it (Python 3.10) starts all at once already."""
    if hasattr(pool, "_safe_to_dynamically_spawn_children"):
        pool._safe_to_dynamically_spawn_children = False


@contextmanager
def main_left_out():
    """While inside, ``__main__`` has ``__spec__ = None`` and no ``__file__`` (module doc); both as they were
    after (a kernel's missing ``__spec__`` is left as None)."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    spec, path = getattr(main, "__spec__", None), getattr(main, "__file__", _MISSING)
    main.__spec__ = None
    if path is not _MISSING:
        del main.__file__
    try:
        yield
    finally:
        main.__spec__ = spec
        if path is not _MISSING:
            main.__file__ = path
