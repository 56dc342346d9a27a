"""Eager vs ``torch.compile`` on one model: compile cost, steady-state A/B, breaks, recompiles.

``compile_ab(model, example_inputs)`` times the eager and compiled first calls, runs an
interleaved steady-state A/B through ``perfkit.bench.compare`` (A = eager, B = compiled),
feeds ``shape_variants`` to count recompiles, and reads dynamo's own diagnostics:
graph breaks from ``torch._dynamo.graph_break_reasons`` (the list ``torch._dynamo.explain``
reads, taken from the real compile instead of a second trace) with explanations from
``torch._dynamo.utils.counters``, recompiles from compile ids reported through dynamo's
compile-start callbacks, and their reasons from ``torch._dynamo.guard_failures``.
Dynamo is reset before and after, so other compiled functions in the process lose their caches.
"""
from __future__ import annotations

import inspect
import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import pandas as pd

from ..errors import ParameterError
from ..results import Finding, findings_frame, html_section, html_table, html_warnings, rank_findings
from ..stats import check_knobs
from .compare import ABResult, compare
from .timing import Clock, check_counts, resolve_timing_device, time_call

_COMPILE_ID = re.compile(r"^\[?(\d+)/(\d+)")
# Dynamo's guard failure text: "0/1: flag == False      # if flag:  # x.py:8 in forward (HINT: ...)",
# then "User stack trace:" and the frames of the line that installed the guard.
_GUARD_COMMENT = re.compile(r"\s{2,}#\s")
_USER_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
_HINT = re.compile(r"\(HINT: (?P<hint>.*)\)\s*$")
_SHAPE_GUARDS = ("size mismatch", "stride mismatch", "dimensionality", "ndim", "rank mismatch")
_DEBUG_CONTEXT = "Developer debug context: attempted to jump with "


@dataclass(frozen=True)
class GraphBreak:
    """One place where dynamo split the graph: ``location`` is "file:line" in user code."""

    reason: str
    location: str
    code: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Recompile:
    """One recompilation: dynamo's ``compile_id`` ("frame/n"), the function, the failed guard
    (``reason``), and where that guard came from: ``location`` ("file:line" of the user code that
    read the value, "" when dynamo gives none, as for input shapes), its ``code`` and dynamo's
    ``hint``."""

    compile_id: str
    function: str
    reason: str
    location: str = ""
    code: str = ""
    hint: str = ""

    @property
    def on_shape(self) -> bool:
        """True when an input's shape/stride changed, False when a Python value did."""
        return any(k in self.reason for k in _SHAPE_GUARDS)


@dataclass(frozen=True)
class CompileABResult:
    """Eager (A) vs compiled (B). Times in seconds; ``timing`` holds every steady-state sample."""

    timing: ABResult
    eager_first_call_s: float
    compiled_first_call_s: float
    graph_breaks: tuple[GraphBreak, ...]
    recompiles: tuple[Recompile, ...]
    variant_call_s: tuple[float, ...] = ()
    backend: str = "inductor"
    mode: str = "default"
    device: str = "cpu"
    planned_steps: int = 10_000
    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()
    environment: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """The steady-state verdict: "faster" means compiled is faster than eager."""
        return self.timing.verdict

    @property
    def speedup(self) -> float:
        return self.timing.speedup

    @property
    def compile_time_s(self) -> float:
        """First compiled call minus a steady-state compiled call (seconds, >= 0)."""
        return max(0.0, self.compiled_first_call_s - self.timing.median_b)

    @property
    def saving_per_step_s(self) -> float:
        return self.timing.median_a - self.timing.median_b

    @property
    def break_even_steps(self) -> float:
        """Steps until compile time is repaid: compile_time / per-step saving, rounded up.
        ``math.inf`` unless the A/B verdict is "faster" (no established saving)."""
        if self.verdict != "faster" or self.saving_per_step_s <= 0:
            return math.inf
        return float(math.ceil(self.compile_time_s / self.saving_per_step_s))

    @property
    def graph_break_count(self) -> int:
        return len(self.graph_breaks)

    @property
    def recompile_count(self) -> int:
        return len(self.recompiles)

    def to_frame(self) -> pd.DataFrame:
        """One row per graph break or recompile: ``kind``, ``reason``, ``location``, ``detail``."""
        rows = [("graph_break", b.reason, b.location, b.detail) for b in self.graph_breaks]
        rows += [("recompile", r.reason, r.location or r.function, r.compile_id) for r in self.recompiles]
        return pd.DataFrame(rows, columns=["kind", "reason", "location", "detail"])

    def summary(self) -> dict:
        return {"backend": self.backend, "mode": self.mode, "device": self.device,
                "eager_median_s": self.timing.median_a, "compiled_median_s": self.timing.median_b,
                "speedup": self.speedup, "ci_low": self.timing.speedup_ci[0],
                "ci_high": self.timing.speedup_ci[1], "verdict": self.verdict,
                "compile_time_s": self.compile_time_s, "eager_first_call_s": self.eager_first_call_s,
                "compiled_first_call_s": self.compiled_first_call_s,
                "break_even_steps": self.break_even_steps, "graph_breaks": self.graph_break_count,
                "recompiles": self.recompile_count}

    def __repr__(self) -> str:
        return (f"CompileABResult({self.backend}: speedup={self.speedup:.3g}x {self.verdict}, "
                f"compile={self.compile_time_s:.3g}s, break_even={self.break_even_steps:.4g} steps, "
                f"breaks={self.graph_break_count}, recompiles={self.recompile_count})")

    def _repr_html_(self) -> str:
        parts = [html_table(pd.DataFrame([self.summary()])), html_table(findings_frame(self.findings))]
        if len(self.to_frame()):
            parts.append(html_table(self.to_frame()))
        return html_section(f"torch.compile A/B ({self.backend})", *parts, html_warnings(self.warnings))


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
    with _DynamoWatch() as watch:
        compiled = _stepper(torch.compile(model, backend=backend, dynamic=dynamic,
                                          mode=mode if backend == "inductor" else None), train)
        compiled_first = time_call(lambda: compiled(inputs), device=dev, clock=clk)
        timing = compare(lambda: eager(inputs), lambda: compiled(inputs), repeats=steps, warmup=warmup,
                         min_time_s=min_time_s, device=dev, labels=("eager", "compiled"), clock=clock,
                         confidence=confidence, min_effect=min_effect, seed=seed)
        variant_s = tuple(time_call(lambda v=v: compiled(v), device=dev, clock=clk) for v in variants)
        breaks, recompiles = watch.graph_breaks(), watch.recompiles(_user_code(model))
    result = CompileABResult(timing, eager_first, compiled_first, breaks, recompiles, variant_s, backend,
                             mode, dev, planned_steps, warnings=_warnings(timing, backend, mode, recompiles),
                             environment=timing.environment)
    return _with_findings(result)


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


class _DynamoWatch:
    """Resets dynamo, records compile ids while active, reads dynamo's diagnostics, resets again."""

    def __enter__(self):
        import torch._dynamo
        from torch._dynamo.callback import callback_handler
        from torch._dynamo.utils import counters

        torch._dynamo.reset()  # also clears callback_handler, so register afterwards
        counters.clear()
        self.compile_ids: list[str] = []
        callback_handler.register_start_callback(self._on_compile)
        return self

    def _on_compile(self, args) -> None:
        # Lazy backward compiles reuse the forward's id; only dynamo frame compiles count.
        if args.callback_trigger.name == "DYNAMO" and str(args.compile_id) not in self.compile_ids:
            self.compile_ids.append(str(args.compile_id))

    def __exit__(self, *exc) -> bool:
        import torch._dynamo

        torch._dynamo.reset()
        return False

    def graph_breaks(self) -> tuple[GraphBreak, ...]:
        import torch._dynamo
        from torch._dynamo.utils import counters

        known = list(counters["unimplemented"]) + list(counters["graph_break"])
        seen: dict[tuple[str, str], GraphBreak] = {}
        for item in torch._dynamo.graph_break_reasons:
            brk = _graph_break(item, known)
            # A recompiled frame reports its breaks again: keep one per (reason, site).
            seen.setdefault((brk.reason, brk.location), brk)
        return tuple(seen.values())

    def recompiles(self, user: str = "") -> tuple[Recompile, ...]:
        """The recompiles seen; a frame of torch's own wrapper (external_utils' ``inner``) is named
        by ``user``, the compiled model's function, the line a person edits."""
        import torch._dynamo

        failures = {}
        for code, reasons in torch._dynamo.guard_failures.items():
            where = _code_text(code)
            if user and _in_torch(code.co_filename):
                where = user
            for reason in reasons:
                match = _COMPILE_ID.match(reason)
                if match:
                    failures.setdefault(match.groups(), (where, reason.split(":", 1)[1]))
        out = []
        for cid in self.compile_ids:
            match = _COMPILE_ID.match(cid)
            if match and int(match.group(2)) > 0:
                frame, n = match.group(1), int(match.group(2))
                where, text = failures.get((frame, str(n - 1)), ("frame " + frame, "unknown guard failure"))
                out.append(_recompile(cid, where, text))
        return tuple(out)


def _recompile(compile_id: str, function: str, text: str) -> Recompile:
    """Split dynamo's guard failure text into the guard, the user line that read it and the hint."""
    lines = text.strip().split("\n")
    head = lines[0].strip()
    hint = _HINT.search(head)
    reason = _GUARD_COMMENT.split(head, maxsplit=1)[0].strip()
    location = code = ""
    for i, line in enumerate(lines):
        frame = _USER_FRAME.match(line)
        # the last frame in the user's code read the guarded value; torch's own frames below it
        # (torch/_dynamo/external_utils.py calling the user's function) are not a line to edit
        if frame and not (location and _in_torch(frame["file"])):
            location = f"{frame['file']}:{frame['line']}"
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
    return Recompile(compile_id, function, reason, location, code, hint["hint"] if hint else "")


def _code_text(code) -> str:
    """'forward (/path/model.py:12)': a code object as dynamo names a frame."""
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


def _user_code(model) -> str:
    """The compiled model's own function (``forward`` of a module, else the callable) as
    ``_code_text``; for a module whose forward is torch's (``nn.Sequential``), "Sequential.forward";
    "" when it has no Python code object."""
    import torch

    fn = type(model).forward if isinstance(model, torch.nn.Module) else model
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return ""
    return f"{type(model).__name__}.forward" if _in_torch(code.co_filename) else _code_text(code)


def _in_torch(file: str) -> bool:
    """A frame of torch itself (an installed torch or a source checkout), not of the user's code."""
    return "/torch/" in file.replace("\\", "/")


def _graph_break(item: Any, known: list[str]) -> GraphBreak:
    frame = item.user_stack[-1] if item.user_stack else None
    location = f"{frame.filename}:{frame.lineno}" if frame else "unknown"
    lines = str(item.reason).strip().split("\n")
    title, detail = lines[0].strip(), "\n".join(lines[1:]).strip()
    if frame and (title.startswith("generic_jump") or not detail):
        text = _explanation(title, frame, known)
        if text:
            title, detail = text.split("\n")[0].strip(), "\n".join(text.split("\n")[1:]).strip()
    return GraphBreak(title, location, (frame.line or "").strip() if frame else "", detail)


def _explanation(title: str, frame, known: list[str]) -> str:
    """Dynamo's long explanation of a break: the one naming this file and line, else (for a
    bare ``if tensor:``, whose explanation names no line) the one whose debug context matches."""
    site = f'"{frame.filename}", line {frame.lineno}'
    for text in known:
        if site in text:
            return text
    if title.startswith("generic_jump "):
        context = _DEBUG_CONTEXT + title[len("generic_jump "):]
        return next((text for text in known if context in text), "")
    return ""


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


def _with_findings(r: CompileABResult) -> CompileABResult:
    findings = [f for f in (_break_finding(r), _recompile_finding(r), _speed_finding(r),
                            _break_even_finding(r)) if f is not None]
    return replace(r, findings=rank_findings(findings))


def _break_finding(r: CompileABResult) -> Finding | None:
    if not r.graph_breaks:
        return None
    first = r.graph_breaks[0]
    return Finding("high", f"{len(r.graph_breaks)} graph break(s): {first.reason} at {first.location}",
                   {"graph_breaks": len(r.graph_breaks), "first_code": first.code,
                    "sites": "; ".join(f"{b.reason} @ {b.location}" for b in r.graph_breaks[:5])},
                   "Make the code traceable: replace data-dependent Python branches with torch.where "
                   "or torch.cond, move print/logging/.item() out of forward; compile with "
                   "fullgraph=True to fail at the first break",
                   "any graph break (each one splits the graph and blocks fusion across it)")


_SHAPE_FIX = ("Pad inputs to a few fixed shapes, mark the varying dim with torch._dynamo.mark_dynamic(x, 0), "
              "or compile with dynamic=True")
_VALUE_FIX = ("Dynamo specializes on Python values the code reads (flags, ints, config attributes): each new "
              "value compiles another graph, up to recompile_limit, then runs eagerly. Keep such values fixed "
              "during a run, branch outside the compiled function (one compiled function per setting), or "
              "pass the value as a tensor and select with torch.where")


def _recompile_finding(r: CompileABResult) -> Finding | None:
    if not r.recompiles:
        return None
    first = next((x for x in r.recompiles if x.location), r.recompiles[0])
    where = f" at {first.location}" if first.location else f" in {first.function}"
    fixes = [fix for fix, hit in ((_SHAPE_FIX, any(x.on_shape for x in r.recompiles)),
                                  (_VALUE_FIX, not all(x.on_shape for x in r.recompiles))) if hit]
    hints = sorted({x.hint for x in r.recompiles if x.hint})
    return Finding("medium", f"{len(r.recompiles)} recompile(s): {first.reason}{where}",
                   {"recompiles": len(r.recompiles), "variant_call_s": sum(r.variant_call_s),
                    "reasons": "; ".join(sorted({x.reason for x in r.recompiles}))[:300],
                    **({"code": first.code} if first.code else {})},
                   ". ".join(fixes + [f"dynamo: {h}" for h in hints]), "any recompile after the first compile of a frame")


def _speed_finding(r: CompileABResult) -> Finding | None:
    if r.verdict == "faster":
        return None
    severity = "high" if r.verdict == "slower" else "medium"
    return Finding(severity, f"torch.compile ({r.backend}) shows no steady-state speedup: {r.verdict}",
                   {"speedup": r.speedup, "ci_low": r.timing.speedup_ci[0], "ci_high": r.timing.speedup_ci[1],
                    "n": r.timing.n},
                   "Fix graph breaks first; try mode='max-autotune' (GPU) or larger batches; small, "
                   "launch-bound or already-fused models may not benefit: keep them eager",
                   f"verdict from a {r.timing.test.confidence:.0%} CI and a "
                   f"{r.timing.test.min_effect:.0%} minimum effect")


def _break_even_finding(r: CompileABResult) -> Finding | None:
    if not (math.isfinite(r.break_even_steps) and r.break_even_steps > r.planned_steps):
        return None
    return Finding("medium", f"compile pays off only after {r.break_even_steps:,.0f} steps "
                   f"(planned run: {r.planned_steps:,})",
                   {"compile_time_s": r.compile_time_s, "saving_per_step_s": r.saving_per_step_s},
                   "Compile only long runs, or keep compiled artifacts between runs "
                   "(torch.compiler.save_cache_artifacts / load_cache_artifacts)",
                   "break-even above planned_steps")
