"""Eager vs ``torch.compile`` on one model: compile cost, steady-state A/B, breaks, recompiles.

``compile_ab(model, example_inputs)`` times the eager and compiled first calls, runs an
interleaved steady-state A/B through ``perfkit.bench.compare`` (A = eager, B = compiled),
feeds ``shape_variants`` to count recompiles, and reads dynamo's own diagnostics:
graph breaks from ``torch._dynamo.graph_break_reasons`` (the list ``torch._dynamo.explain``
reads, taken from the real compile instead of a second trace) with explanations from
``torch._dynamo.utils.counters``, recompiles from compile ids reported through dynamo's
compile-start callbacks, and their reasons from ``torch._dynamo.guard_failures``.
Dynamo is reset before and after, so other compiled functions in the process lose their caches.
The result type and its findings are in ``compile_ab_result``, the reading of dynamo's diagnostics
in ``dynamo_watch``.
"""
from __future__ import annotations

import time
from typing import Sequence

from ..errors import ParameterError
from .compare import ABResult, compare
from .compile_ab_result import CompileABResult, with_findings
from .dynamo_watch import DynamoWatch, user_code
from ..stats import check_knobs
from .timing import Clock, check_counts, resolve_timing_device, time_call

# torch is heavy and optional: the functions below import it when a compile A/B runs.


def compile_ab(model, example_inputs, *, mode: str = "default", backend: str = "inductor",
               steps: int | None = None, device: str = "auto", dynamic: bool | None = None,
               shape_variants: Sequence | None = None, train: bool = False, warmup: int = 3,
               min_time_s: float = 1.0, planned_steps: int = 10_000, confidence: float = 0.95,
               min_effect: float = 0.02, seed: int = 0, clock: Clock | None = None) -> CompileABResult:
    """Compare ``model(*example_inputs)`` eager vs ``torch.compile(model, backend, mode, dynamic)``.

    ``model`` and tensor inputs are moved to ``device``. One step is a forward under
    ``torch.no_grad()``, or with ``train=True`` forward + ``sum().backward()`` of the outputs.
    ``steps`` fixes the steady-state A/B rounds (None: fill ``min_time_s``). Each entry of
    ``shape_variants`` (a tensor or tuple of inputs) is run once through the compiled model
    afterwards, so changing shapes show up as recompiles. ``planned_steps`` is the run length
    used to judge the break-even point. Raises ParameterError for bad arguments and
    MissingDependencyError without torch.
    """
    import torch

    dev = resolve_timing_device(device)
    inputs = _to_device(_as_tuple(example_inputs), dev)
    variants = [_to_device(_as_tuple(v), dev) for v in (shape_variants or ())]
    _check(model, backend, mode, planned_steps, steps)
    check_knobs(confidence, min_effect)
    check_counts(repeats=steps, warmup=warmup, inner=1, min_time_s=min_time_s)
    clk, model = clock or time.perf_counter, model.to(dev)
    eager = _stepper(model, train)
    eager_first = time_call(lambda: eager(inputs), device=dev, clock=clk)
    with DynamoWatch() as watch:
        compiled = _stepper(torch.compile(model, backend=backend, dynamic=dynamic,
                                          mode=mode if backend == "inductor" else None), train)
        compiled_first = time_call(lambda: compiled(inputs), device=dev, clock=clk)
        timing = compare(lambda: eager(inputs), lambda: compiled(inputs), repeats=steps, warmup=warmup,
                         min_time_s=min_time_s, device=dev, labels=("eager", "compiled"), clock=clock,
                         confidence=confidence, min_effect=min_effect, seed=seed)
        variant_s = tuple(time_call(lambda v=v: compiled(v), device=dev, clock=clk) for v in variants)
        breaks, recompiles = watch.graph_breaks(), watch.recompiles(user_code(model))
    result = CompileABResult(timing, eager_first, compiled_first, breaks, recompiles, variant_s, backend,
                             mode, dev, planned_steps, warnings=_warnings(timing, backend, mode, recompiles),
                             environment=timing.environment)
    return with_findings(result)


def _check(model, backend: str, mode: str, planned_steps: int, steps: int | None) -> None:
    import torch

    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise ParameterError(f"steps={steps!r}: pass a positive int (A/B rounds), or None to fill min_time_s")
    if not isinstance(model, torch.nn.Module):
        raise ParameterError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if backend not in torch._dynamo.list_backends(exclude_tags=()):
        raise ParameterError(f"backend={backend!r}: not a dynamo backend; use one of "
                             f"{', '.join(torch._dynamo.list_backends())}")
    if mode not in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        raise ParameterError(f"mode={mode!r}: use 'default', 'reduce-overhead', 'max-autotune' "
                             "or 'max-autotune-no-cudagraphs'")
    if planned_steps < 1:
        raise ParameterError(f"planned_steps={planned_steps}: must be >= 1 (the steps of a real run)")


def _as_tuple(inputs) -> tuple:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _to_device(inputs: tuple, device: str) -> tuple:
    import torch

    return tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)


def _stepper(fn, train: bool):
    """A one-argument step: forward (no grad) or forward + backward of the summed outputs."""
    import torch

    def infer(inputs):
        with torch.no_grad():
            return fn(*inputs)

    def train_step(inputs):
        out = fn(*inputs)
        loss = sum(t.float().sum() for t in _tensors(out))
        loss.backward()
        return loss

    return train_step if train else infer


def _tensors(out) -> list:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _tensors(item)]
    return []


def _warnings(timing: ABResult, backend: str, mode: str, recompiles) -> tuple[str, ...]:
    import torch._dynamo

    out = list(timing.warnings)
    if backend != "inductor" and mode != "default":
        out.append(f"mode={mode!r} only applies to backend='inductor'; it was ignored for backend={backend!r}")
    if backend in ("eager", "aot_eager"):
        out.append(f"backend={backend!r} does no code generation: use it to find breaks and "
                   "recompiles, not to judge compile speedups")
    limit = torch._dynamo.config.recompile_limit
    per_frame: dict[str, int] = {}
    for r in recompiles:
        per_frame[r.function] = per_frame.get(r.function, 0) + 1
    for where, n in per_frame.items():
        if n + 1 >= limit:
            out.append(f"{where} compiled {n + 1} times, the recompile_limit ({limit}): dynamo falls "
                       "back to eager for new shapes there")
    return tuple(out)
