"""Starting worker processes from wherever perfkit runs, a Jupyter kernel included.

A fork server or spawn start reads ``__main__.__spec__`` to prepare each worker. A Jupyter kernel's
``__main__`` has no ``__spec__`` attribute (and ``%reset`` deletes it again), so the start fails with
AttributeError. :func:`give_main_a_spec` sets the None a script's ``__main__`` has: the worker then
imports nothing from the kernel. Harmless for a fork, which reads nothing of it. Every pool perfkit
starts calls it first (the trace loader's, the ranks engine's).
"""
from __future__ import annotations

import sys


def give_main_a_spec() -> None:
    """Give ``__main__`` the ``__spec__ = None`` of a script when it has none (module doc)."""
    main = sys.modules.get("__main__")
    if main is not None and not hasattr(main, "__spec__"):
        main.__spec__ = None
