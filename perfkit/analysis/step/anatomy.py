"""``step_anatomy(trace)``: one sentence that explains a step in milliseconds, and the numbers behind it.

"launch-bound; step 87.41 ms: 10.55 ms in _disabled_torch_function_impl (native code called from
Python), 0.03 ms waiting for the GPU at vllm/v1/attention/backends/flashinfer.py:664 (build), GPU busy
11.60 ms and idle 75.82 ms (mostly host_python); critical path 90% host" (a B200 serving trace; Python
with a source file reads "2.64 ms Python in copy_to_gpu (vllm/v1/utils.py:131)")

The sentence opens with the verdict of ``diagnosis.diagnose`` (``verdict``, with its ``fix``): the
same verdict ``perfkit diagnose``, ``cpu_bound`` and ``summary`` give for the trace.

All figures are means per full step window (``trace.steps.full_step_windows``: partial steps at the
profiler window's edge left out), in milliseconds in the sentence and
microseconds in the fields:

* Python: the main thread's function with the most self time inside steps, waiting primitives left
  out (``hotspots``); a host op when the thread has no Python frames;
* waiting for the GPU: host time blocked at sync points inside the steps that a GPU wait confirms,
  and the source line that blocks the longest (``syncs``; a sync before the first or after the last
  step is not part of any step);
* GPU busy / idle: device-union busy time and the rest of the step, with the class holding most
  idle time (``gpu_gaps``);
* critical path: the kind with the largest share of the path (``critical_path``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...results import html_section, html_text, html_warnings
from ...text import jsonable
from ...trace.steps import full_step_windows
from ..sync_points.find import syncs
from ..sync_points.result import site_table
from .critical_path import KINDS, critical_path
from .diagnosis import diagnose
from .gaps import gpu_gaps
from .hotspots import hotspots


@dataclass(frozen=True, eq=False, repr=False)
class StepAnatomy:
    """Per-step means (us) behind :attr:`sentence`. ``python``: function, python (False: a host op),
    file, line, self_per_step_us (None without host frames). ``waiting``: blocked_per_step_us and the site (file, line, func, op;
    None when nothing blocks). ``gpu_busy_us``/``gpu_idle_us``/``idle_class`` are None without a
    GPU timeline. ``critical_path``: time per kind per step; ``bound_by`` its largest kind."""

    steps: int
    wall_us: float
    python: dict | None
    waiting: dict | None
    gpu_busy_us: float | None
    gpu_idle_us: float | None
    idle_class: str | None
    critical_path: dict
    bound_by: str
    warnings: tuple
    verdict: str = ""
    fix: str = ""

    @property
    def sentence(self) -> str:
        """The step in one sentence (see the module doc)."""
        parts = [_python_part(self.python), _waiting_part(self.waiting), self._gpu_part()]
        head = (f"{self.verdict}; " if self.verdict else "") + f"step {_ms(self.wall_us)}: " \
            + ", ".join(p for p in parts if p)
        total = sum(self.critical_path.values())
        if total > 0:
            head += f"; critical path {100 * self.critical_path[self.bound_by] / total:.0f}% {self.bound_by}"
        return head

    def _gpu_part(self) -> str:
        if self.gpu_busy_us is None:
            return "no GPU timeline"
        mostly = f" (mostly {self.idle_class})" if self.idle_class else ""
        return f"GPU busy {_ms(self.gpu_busy_us)} and idle {_ms(self.gpu_idle_us)}{mostly}"

    def to_json(self) -> dict:
        return jsonable({"sentence": self.sentence, "verdict": self.verdict, "fix": self.fix, "steps": self.steps,
                         "wall_us": self.wall_us,
                         "python": self.python, "waiting": self.waiting, "gpu_busy_us": self.gpu_busy_us,
                         "gpu_idle_us": self.gpu_idle_us, "idle_class": self.idle_class,
                         "critical_path": self.critical_path, "bound_by": self.bound_by,
                         "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        return f"<StepAnatomy {self.sentence}>"

    def _repr_html_(self) -> str:
        return html_section("Step anatomy", html_text(self.sentence), html_warnings(self.warnings))


def step_anatomy(trace) -> StepAnatomy:
    """Explain the mean step of ``trace`` (see the module doc). Never raises for traces without
    GPU events, Python stacks or steps: the sentence says what is missing and warnings say why.
    Computed once per trace: the result is shared."""
    return trace.derived("step_anatomy", _step_anatomy)


def _step_anatomy(trace) -> StepAnatomy:
    # The critical path and the gaps the step_anatomy notebook shows beside the sentence, built once;
    # their note on the stubs left out goes last here.
    stubs = full_step_windows(trace)[1]
    path, gaps = critical_path(trace), gpu_gaps(trace)
    n = max(len(path.steps), 1)
    per_step = {k: float(path.steps[f"{k}_us"].sum()) / n for k in KINDS}
    bound = max(per_step, key=per_step.get)
    busy = idle = None
    idle_class = None
    if gaps.has_gpu:
        busy = float(gaps.steps["gpu_busy_us"].sum()) / n
        idle = float(gaps.steps["wall_us"].sum()) / n - busy
        totals = {c: v["dur_us"] for c, v in gaps.totals.items() if v["dur_us"] > 0}
        idle_class = max(totals, key=totals.get) if totals else None
    spots = hotspots(trace)
    sync = syncs(trace)
    diagnosis = diagnose(trace)
    return StepAnatomy(
        steps=len(path.steps), wall_us=float(path.steps["wall_us"].sum()) / n, python=_top_function(spots),
        waiting=_waiting(sync, n), gpu_busy_us=busy, gpu_idle_us=idle, idle_class=idle_class,
        critical_path=per_step, bound_by=bound, verdict=diagnosis.verdict, fix=diagnosis.fix,
        warnings=tuple(dict.fromkeys(_without(path.warnings, stubs) + _without(gaps.warnings, stubs)
                                     + spots.warnings + stubs)))


def _without(warnings: tuple, notes: tuple) -> tuple:
    return tuple(w for w in warnings if w not in notes)


def _top_function(spots) -> dict | None:
    rows = spots.table[~spots.table["waiting"]].sort_values("self_per_step_us", ascending=False, kind="stable")
    if rows.empty:
        return None
    top = rows.iloc[0]
    python = bool(spots.threads["python"].any())
    return {"function": top["function"], "python": python, "file": top["file"] or None,
            "line": int(top["line"]) if top["line"] >= 0 else None, "self_per_step_us": float(top["self_per_step_us"])}


def _waiting(result, n_steps: int) -> dict | None:
    inside = result.events[result.events["gpu_confirmed"] & result.events["in_steps"]]
    if inside.empty:
        return None
    sites = site_table(inside, result.n_steps)
    site = sites[sites["gpu_confirmed"] > 0].iloc[0]
    return {"blocked_per_step_us": float(inside["blocked_us"].sum()) / n_steps, "file": site["file"] or None,
            "line": int(site["line"]) if site["line"] >= 0 else None, "func": site["func"] or None,
            "op": site["top_op"] or site["op"] or site["kind"]}


def _python_part(python: dict | None) -> str:
    if python is None:
        return ""
    spent = _ms(python["self_per_step_us"])
    if not python["python"]:
        return f"{spent} host time in op {python['function']}"
    if python["file"]:
        return f"{spent} Python in {python['function']} ({python['file']}:{python['line']})"
    # A frame without a source file is a built-in: C/C++ the Python called (autograd's engine, linear)
    return f"{spent} in {python['function']} (native code called from Python)"


def _waiting_part(waiting: dict | None) -> str:
    if waiting is None:
        return "no waiting for the GPU"
    if waiting["file"]:
        where = f"{waiting['file']}:{waiting['line']}" + (f" ({waiting['func']})" if waiting["func"] else "")
    else:
        where = waiting["op"]
    return f"{_ms(waiting['blocked_per_step_us'])} waiting for the GPU at {where}"


def _ms(us: float) -> str:
    return f"{us / 1e3:,.2f} ms"
