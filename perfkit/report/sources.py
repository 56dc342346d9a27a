"""Where an investigation's data comes from: a trace file or a live run of a reference workload.

Notebooks stay thin (STYLE 11): the choice between a trace file and a live run and the workload
setup live here, where tests reach them. The notebooks call these as ``headline.*``.

* ``find_trace(path)``: a trace path as given, relative to the repository, or a file name in
  ``data/traces/cpu``; ``shipped_traces()`` lists those.
* ``load_or_record(mode, trace_path, workload=..., ...)``: the ``Trace`` of a file
  (``mode="trace"``) or of a freshly recorded live run of a reference workload (``mode="live"``).
* ``live_workload``, ``detect_workload_syncs`` and ``mlp_problem``: the live runs and the small
  model of the harness notebooks.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ParameterError

ROOT = Path(__file__).resolve().parents[2]  # the repository root (also used by runner and widgets)
CPU_TRACES = ROOT / "data" / "traces" / "cpu"
MODES = ("trace", "live")


def check_mode(mode: str) -> str:
    """``mode`` if it is "trace" or "live"; ParameterError otherwise."""
    if mode not in MODES:
        raise ParameterError(f"mode={mode!r}: use 'trace' (analyze trace_path) or 'live' (run a reference workload)")
    return mode


def shipped_traces() -> list[str]:
    """File names of the traces shipped in ``data/traces/cpu``."""
    return sorted(p.name for p in CPU_TRACES.glob("*.json.gz"))


def find_trace(path: str | os.PathLike) -> Path:
    """Resolve ``path``: as given (absolute or from the working directory), else from the
    repository root, else as a file name in ``data/traces/cpu``. Raises ParameterError naming
    the shipped traces when none exists."""
    given = Path(path).expanduser()
    for candidate in (given, ROOT / given, CPU_TRACES / given.name):
        if str(path) and candidate.is_file():
            return candidate.resolve()
    raise ParameterError(f"trace_path={str(path)!r}: no such file (looked in {Path.cwd()}, {ROOT} and "
                         f"{CPU_TRACES}); shipped traces: {', '.join(shipped_traces()) or 'none'}")


def load_or_record(mode: str, trace_path: str | os.PathLike = "", *, workload: str = "ppo",
                   variant: str | None = None, device: str = "auto", steps: int = 3, warmup: int = 1,
                   overrides: dict | None = None):
    """The ``Trace`` this investigation reads.

    ``mode="trace"``: ``load_trace(find_trace(trace_path))``. ``mode="live"``: build
    ``make_workload(workload, device, variant=variant, **overrides)``, record ``steps`` profiled
    steps after ``warmup`` with ``record_trace`` into a temporary file and load it (the Trace
    keeps its data in memory; the file is removed). Raises ParameterError for a bad mode,
    path, workload, variant or override.
    """
    from ..trace import load_trace

    if check_mode(mode) == "trace":
        return load_trace(find_trace(trace_path))
    from ..workloads.record import record_trace
    from ..workloads.registry import make_workload

    with tempfile.TemporaryDirectory(prefix="perfkit-live-") as tmp:
        with make_workload(workload, device, variant=variant, **dict(overrides or {})) as w:
            path = record_trace(w, Path(tmp) / f"{workload}_{variant or 'default'}.json.gz",
                                steps=steps, warmup=warmup)
        return load_trace(path)


@dataclass(frozen=True)
class MLPProblem:
    """A small policy-style MLP regression (``features`` -> ``hidden`` x ``layers`` ->
    ``outputs``) for the A/B harnesses: ``make_model()``, ``make_batch(step)`` (seeded by
    step), ``loss_fn`` (MSE) and ``example_inputs`` for ``compile_ab``."""

    batch: int = 64
    features: int = 32
    hidden: int = 128
    layers: int = 2
    outputs: int = 4
    seed: int = 0

    def make_model(self):
        import torch

        torch.manual_seed(self.seed)
        dims = [self.features] + [self.hidden] * self.layers
        blocks = [m for a, b in zip(dims, dims[1:]) for m in (torch.nn.Linear(a, b), torch.nn.Tanh())]
        return torch.nn.Sequential(*blocks, torch.nn.Linear(dims[-1], self.outputs))

    def make_batch(self, step: int) -> tuple:
        import torch

        g = torch.Generator().manual_seed(self.seed * 100_003 + step)
        inputs = torch.randn(self.batch, self.features, generator=g)
        return (inputs,), torch.randn(self.batch, self.outputs, generator=g)

    @property
    def loss_fn(self):
        import torch

        return torch.nn.functional.mse_loss

    @property
    def example_inputs(self) -> tuple:
        return self.make_batch(0)[0]


def mlp_problem(batch: int = 64, features: int = 32, hidden: int = 128, layers: int = 2, outputs: int = 4,
                seed: int = 0) -> MLPProblem:
    """An ``MLPProblem``; raises ParameterError for non-positive sizes."""
    sizes = dict(batch=batch, features=features, hidden=hidden, layers=layers, outputs=outputs)
    bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise ParameterError(f"mlp_problem: sizes must be integers >= 1, got {bad}")
    return MLPProblem(seed=int(seed), **sizes)


def live_workload(workload: str, variant: str | None = None, device: str = "auto", overrides: dict | None = None):
    """``make_workload`` with a dict of overrides (the notebooks' ``overrides`` parameter)."""
    from ..workloads.registry import make_workload

    return make_workload(workload, device, variant=variant, **dict(overrides or {}))


def detect_workload_syncs(workload: str, variant: str | None = None, *, device: str = "auto", steps: int = 2,
                          overrides: dict | None = None):
    """Run one warm-up step of the workload, then ``steps`` steps under ``detect_syncs()``;
    returns the ``SyncReport`` (syncing calls by source line; ``per_step(steps)`` normalizes)."""
    from ..detect.runtime import detect_syncs

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ParameterError(f"detect_steps={steps!r}: must be an integer >= 1")
    with live_workload(workload, variant, device, overrides) as w:
        w.step()
        with detect_syncs() as detector:
            for _ in range(steps):
                w.step()
    return detector.report
