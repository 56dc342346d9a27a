"""Reference workloads by name, imported only when asked for.

``WORKLOADS`` maps a name to the module that implements it (each module has ``Config``,
``make()`` and ``variants()``, see :mod:`perfkit.workloads.base`). Nothing here imports torch
until a workload is built.
"""
from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ..errors import ParameterError, PerfkitError

WORKLOADS = {
    "mppi": "perfkit.workloads.mppi",
    "ppo": "perfkit.workloads.ppo",
    "replay": "perfkit.workloads.replay",
    "leaky": "perfkit.workloads.leaky",
}


def workload_module(name: str) -> ModuleType:
    """Import and return the module of workload ``name``.

    Raises ParameterError for an unknown name (listing the valid ones) and PerfkitError when
    a listed module is not installed in this checkout.
    """
    if not isinstance(name, str) or name not in WORKLOADS:  # a JSON list from -p is unhashable
        raise ParameterError(f"unknown workload {name!r}: valid workloads are {', '.join(WORKLOADS)}")
    module_name = WORKLOADS[name]
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise PerfkitError(
            f"workload {name!r} is listed but {module_name} is missing from this checkout: "
            f"update perfkit or use one of {', '.join(available_workloads())}"
        ) from exc


def available_workloads() -> tuple[str, ...]:
    """Names in ``WORKLOADS`` whose module can be found (without importing it)."""
    return tuple(name for name, module in WORKLOADS.items() if importlib.util.find_spec(module) is not None)


def workload_variants(name: str) -> dict:
    """The named configs (each pathology and its fix) of workload ``name``."""
    return workload_module(name).variants()


def make_workload(name: str, device: str = "auto", *, variant: str | None = None, **overrides):
    """Build workload ``name`` on ``device`` from its default config, or from ``variant``'s,
    with ``overrides`` replacing config fields.

    Raises ParameterError for an unknown name, variant or config field (the message lists the
    valid ones).
    """
    module = workload_module(name)
    config = None
    if variant is not None:
        named = module.variants()
        if not isinstance(variant, str) or variant not in named:  # a JSON list from -p is unhashable
            raise ParameterError(
                f"unknown variant {variant!r} of workload {name!r}: valid variants are {', '.join(named)}"
            )
        config = named[variant]
    return module.make(config, device=device, **overrides)
