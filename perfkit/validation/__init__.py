"""Does perfkit report what this machine does? ``validate(device)`` runs the reference workloads,
each pathology and its fix, through the harnesses (``perfkit.bench``), detectors
(``perfkit.detect``) and analyses they exercise, and checks each figure against what the workload
must show. ``checks`` holds one function per check, ``suite`` runs them into a ``ValidationReport``.
"""
from __future__ import annotations

import importlib

__all__ = ["ValidationReport", "validate"]


def __getattr__(name: str):
    # Lazy: ``suite`` imports pandas and every harness and workload it checks, while ``perfkit --help``
    # imports ``validation.names`` (and so this package) for the check names only.
    if name not in __all__:
        raise AttributeError(f"module 'perfkit.validation' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.suite"), name)
