"""The interface every reference workload follows, and the record of a run.

A workload module defines a frozen ``Config`` dataclass (sizes and pathology switches, tiny
defaults), ``make(config=None, device="auto", **overrides) -> Workload`` and ``variants()``,
a dict of named configs (each pathology and its fix). A ``Workload`` has ``name``, ``config``,
``device`` (resolved with :func:`perfkit.device.resolve_device`), ``notes`` (switches that
could not apply here, e.g. pinned memory without CUDA), ``step()``, ``run(steps)`` and
``close()``. ``step()`` returns metrics as Python floats only where the config asks for
per-step logging (reading a value back to Python is a host-device sync: that is what some
pathologies plant); otherwise it returns ``{}`` and queues work without waiting for it.

torch is imported inside functions so ``import perfkit.workloads`` stays light.
"""
from __future__ import annotations

import abc
import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import pandas as pd

from ..device import resolve_device, synchronize
from ..errors import ParameterError, PerfkitError
from ..results import html_section, html_table, html_text, html_warnings

RUN_FORMAT_VERSION = 1


def build_config(config_cls: type, config: Any = None, overrides: dict | None = None) -> Any:
    """Return ``config`` (or ``config_cls()``) with ``overrides`` applied.

    Raises ParameterError when ``config`` is not a ``config_cls`` or an override names a
    field the config does not have (the message lists the valid fields).
    """
    base = config_cls() if config is None else config
    if not isinstance(base, config_cls):
        raise ParameterError(
            f"config={type(base).__name__}: expected {config_cls.__module__}.{config_cls.__name__} "
            "(build one with its Config(...) or pass fields as keyword overrides)"
        )
    overrides = dict(overrides or {})
    valid = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise ParameterError(
            f"unknown config field(s) {', '.join(unknown)} for {config_cls.__module__}.Config: "
            f"valid fields are {', '.join(valid)}"
        )
    return dataclasses.replace(base, **overrides) if overrides else base


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
    """Raise ParameterError unless ``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ParameterError(f"{name}={value!r}: use one of {', '.join(map(repr, choices))}")


MAX_INT = 2**31 - 1  # no size or count a workload takes is larger (torch sizes past it never fit in memory)


def check_int(name: str, value: Any, low: int = 1, high: int = MAX_INT) -> None:
    """Raise ParameterError unless ``value`` is an int in ``[low, high]`` (``high``: by default the
    largest size or count a workload takes, ``MAX_INT``)."""
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise ParameterError(f"{name}={value!r:.60}: must be an integer >= {low} and <= {high:,}")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ParameterError(f"{name}={value!r}: must be True or False")


def seeded_init(seed: int, build: Callable[[], Any]) -> Any:
    """Call ``build()`` with torch's global CPU RNG seeded, restoring the RNG afterwards,
    so module weights are deterministic without touching the caller's random state."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


class Workload(abc.ABC):
    """One reference workload instance: a model, its data and its optimizer on ``device``."""

    name: str = "workload"

    def __init__(self, config: Any, device: str = "auto"):
        self.config = config
        self.device = resolve_device(device)
        self.notes: list[str] = []
        self._closed = False

    def step(self) -> dict:
        """Run one training/planning step; returns per-step metrics (floats) or ``{}``."""
        if self._closed:
            raise PerfkitError(f"{self.name} workload is closed: build a new one with make()")
        return self._step()

    @abc.abstractmethod
    def _step(self) -> dict:
        """The workload's step; queued work need not be finished when it returns."""

    def run(self, steps: int, clock: Callable[[], float] = time.perf_counter) -> "WorkloadRun":
        """Run ``steps`` steps, synchronizing around each so ``step_s`` is wall time (s)."""
        check_int("steps", steps)
        times, metrics = [], []
        for _ in range(steps):
            synchronize(self.device)
            start = clock()
            metrics.append(self.step())
            synchronize(self.device)
            times.append(clock() - start)
        return WorkloadRun(
            workload=self.name, device=self.device, config=dataclasses.asdict(self.config),
            step_s=tuple(times), metrics=tuple(metrics), notes=tuple(self.notes),
            warnings=_run_warnings(steps),
        )

    def close(self) -> None:
        """Drop models, buffers and optimizer state; later ``step()`` calls raise."""
        self._closed = True
        self._release()

    def _release(self) -> None:
        for key in list(vars(self)):
            if key.startswith("_") and key != "_closed":
                setattr(self, key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<{type(self).__name__} {self.name} on {self.device}{state}>"


def _run_warnings(steps: int) -> tuple:
    if steps >= 3:
        return ()
    return (
        f"only {steps} step(s): the first step includes warm-up (allocations, lazy init), "
        "so the median is not a steady-state time; run at least 3 steps",
    )


@dataclass(frozen=True)
class WorkloadRun:
    """Wall time of each step (seconds, synchronized) and the metrics each step returned."""

    workload: str
    device: str
    config: dict
    step_s: tuple
    metrics: tuple
    notes: tuple = ()
    warnings: tuple = field(default=())
    format_version: int = RUN_FORMAT_VERSION

    @property
    def steps(self) -> int:
        return len(self.step_s)

    @property
    def total_s(self) -> float:
        return float(sum(self.step_s))

    @property
    def median_step_ms(self) -> float:
        """Median step time in milliseconds (the first step includes warm-up)."""
        return statistics.median(self.step_s) * 1e3 if self.step_s else float("nan")

    def to_frame(self) -> pd.DataFrame:
        """One row per step: ``step``, ``step_ms`` and any metric the step returned."""
        rows = [
            {"step": i, "step_ms": s * 1e3, **m}
            for i, (s, m) in enumerate(zip(self.step_s, self.metrics))
        ]
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return (
            f"WorkloadRun({self.workload} on {self.device}: {self.steps} steps, "
            f"median {self.median_step_ms:.3g} ms)"
        )

    def _repr_html_(self) -> str:
        notes = "".join(f"<p>{html_text(n)}</p>" for n in self.notes)
        title = f"{self.workload} on {self.device}: {self.steps} steps, median {self.median_step_ms:.3g} ms"
        return html_section(title, notes, html_table(self.to_frame()), html_warnings(self.warnings))
