"""Profile a user's script (``profile_script``) or a notebook block (``profile``) and diagnose the trace.

Both record with :class:`perfkit.profiling.recorder.Recorder` into the workbook's ``traces/`` folder
(``<name>-<YYYY-MM-DD>-<HHMMSS>.pt.trace.json.gz``, the workbook root of ``perfkit run``), load the
trace and diagnose it (:func:`perfkit.analysis.step.diagnosis.diagnose`). The script runs the way
``perfkit detect`` runs it (:func:`perfkit.detect.script.run_as_main`): its ``__main__``, argv,
working directory and exit status are its own, and an early exit, exception or Ctrl-C keeps what was
recorded until then.
"""
from __future__ import annotations

import datetime as _dt
import itertools
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.step.diagnosis import diagnose
from ..atomic import output_error
from ..detect.script import run_as_main
from ..detect.static import scan
from ..errors import ParameterError
from ..trace import load_trace
from ..workbook import workbook_root
from .recorder import Recorder

TRACE_SUFFIX = ".pt.trace.json.gz"
OVERHEAD_WARN_PCT = 10.0  # the bar: above it the recorded steps are noticeably slower than real ones
MIN_SIDE = 2  # timed steps each side of the overhead comparison needs (one step is no median)


@dataclass(frozen=True)
class ProfileResult:
    """What a profiling run produced. ``trace``: path of the trace written (None: nothing
    recorded); ``loaded``: the loaded Trace; ``steps_recorded``: complete steps recorded (window: ``ProfilerStep`` spans);
    ``step_source``: optimizer, function or window; ``overhead_pct``: step time with the profiler
    on over step time without it, minus 1, in percent (None: too few steps to tell, :func:`overhead_pct`),
    ``overhead_clock``: "GPU" (CUDA events at the step boundaries) or "host", ``overhead_noise_pct``: how
    much the steps without the profiler varied (an overhead within it is not measurable);
    ``diagnosis`` and ``diagnosis_text``; ``error`` and
    ``exit_status`` of the script; ``scan``: ``perfkit scan`` findings of the script (or None)."""

    trace: Path | None
    steps_recorded: int
    step_source: str
    overhead_pct: float | None
    diagnosis: dict
    diagnosis_text: str
    warnings: tuple[str, ...] = ()
    error: str = ""
    exit_status: int = 0
    scan: object = None
    loaded: object = field(default=None, repr=False, compare=False)
    extra_traces: tuple[Path, ...] = ()
    overhead_clock: str = "host"
    overhead_noise_pct: float | None = None

    def to_json(self) -> dict:
        """``{trace, steps_recorded, step_source, overhead_pct, diagnosis, warnings}`` (+ scan, error)."""
        out = {"trace": str(self.trace) if self.trace else None, "steps_recorded": self.steps_recorded,
               "step_source": self.step_source, "overhead_pct": self.overhead_pct,
               "overhead_clock": self.overhead_clock, "overhead_noise_pct": self.overhead_noise_pct,
               "diagnosis": self.diagnosis, "warnings": list(self.warnings)}
        if self.extra_traces:
            out["more_traces"] = [str(p) for p in self.extra_traces]
        if self.scan is not None:
            out["scan"] = self.scan.to_records()
        if self.error:
            out["error"], out["exit_status"] = self.error, self.exit_status
        return out


def trace_path(name: str, folder=None, now: _dt.datetime | None = None) -> Path:
    """``<folder>/<name>-<YYYY-MM-DD>-<HHMMSS>.pt.trace.json.gz``, with ``-2``, ``-3``... when that name is
    taken (two runs started in one second), reserved by creating it empty (``finish`` removes it when no
    trace was recorded); ``folder`` (absolute, so a script that changes directory does not move it) defaults
    to the workbook's ``traces/`` (created). Raises ParameterError when ``folder`` exists and is not a
    directory, OutputError when it cannot be written."""
    folder = Path(os.path.abspath(folder)) if folder is not None else workbook_root() / "traces"
    if folder.exists() and not folder.is_dir():
        raise ParameterError(f"--out {str(folder)!r} is a file: pass a folder for the trace")
    base = f"{Path(name).stem or 'profile'}-{(now or _dt.datetime.now()):%Y-%m-%d-%H%M%S}"
    for n in itertools.count(1):
        path = folder / f"{base}{'' if n == 1 else f'-{n}'}{TRACE_SUFFIX}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            continue
        except OSError as exc:
            raise output_error(path, exc) from exc


def overhead_pct(step_times_s, wait: int, warmup: int, active: int) -> float | None:
    """Profiler overhead in percent: the median profiled step (warm-up and active steps after the first,
    whose time holds the profiler's start on the GPU's clock) over the median wait step after the first
    (start-up), minus 1. None when either side has fewer than ``MIN_SIDE`` timed steps (None entries are
    steps without a time)."""
    off, on = _overhead_sides(step_times_s, wait, warmup, active)
    if len(off) < MIN_SIDE or len(on) < MIN_SIDE or statistics.median(off) <= 0:
        return None
    return (statistics.median(on) / statistics.median(off) - 1.0) * 100.0


def overhead_noise_pct(step_times_s, wait: int) -> float | None:
    """How much the wait steps (after the first) vary, in percent of their median: half their range. An
    overhead no larger than this is not measurable with these steps. None with fewer than ``MIN_SIDE``."""
    off = [t for t in step_times_s[1:wait] if t is not None]
    if len(off) < MIN_SIDE or statistics.median(off) <= 0:
        return None
    return (max(off) - min(off)) / 2 / statistics.median(off) * 100.0


def _overhead_sides(step_times_s, wait: int, warmup: int, active: int) -> tuple[list, list]:
    off = [t for t in step_times_s[1:wait] if t is not None]
    on = [t for t in step_times_s[wait + 1:wait + warmup + active] if t is not None]
    return off, on


def step_clock(recorder) -> tuple[list, str]:
    """The step times to measure the overhead on, and their clock: the GPU's (CUDA events) when every
    step the comparison reads has one, else the host's."""
    s = recorder.schedule
    device = recorder.device_step_times_s()
    needed = device[1:s["wait"] + s["warmup"] + s["active"]]
    if needed and all(t is not None for t in needed):
        return device, "GPU"
    return recorder.step_times_s, "host"


def profile_script(target, args=(), *, module: bool = False, wait: int = 5, warmup: int = 2, active: int = 3,
                   repeat: int = 1, step: str | None = None, seconds: float | None = None, memory: bool = False,
                   out=None, scan: bool = False) -> ProfileResult:
    """Run script ``target`` (``module=True``: module, like ``python -m``) unchanged under the profiler
    and diagnose the trace. ``out``: folder for the trace (default: the workbook's ``traces/``).
    ``scan``: also run ``perfkit scan`` on the script. Raises ParameterError for a missing script or
    bad schedule, PerfkitError when torch is missing; the script's own failure is in ``error``."""
    name = str(target).rsplit(".", 1)[-1] if module else Path(target).name
    script = None if module else str(target)
    recorder = Recorder(trace_path(name, out), wait=wait, warmup=warmup, active=active, repeat=repeat,
                        step=step, seconds=seconds, memory=memory, script=script,
                        metadata={"script": str(target), "args": list(map(str, args)), "module": module})
    error, status = run_as_main(target, args, recorder, module=module, command="perfkit profile",
                                found="the steps recorded until then are kept")
    findings = _scan(target, module) if scan else None
    return finish(recorder, error=error, exit_status=status, scan=findings)


def finish(recorder: Recorder, *, error: str = "", exit_status: int = 0, scan=None) -> ProfileResult:
    """Load and diagnose what ``recorder`` wrote, with the warnings about how the recording went."""
    warnings = _schedule_warnings(recorder, error)
    s = recorder.schedule
    times, clock = step_clock(recorder)
    pct, noise = overhead_pct(times, s["wait"], s["warmup"], s["active"]), overhead_noise_pct(times, s["wait"])
    warnings += overhead_warnings(pct, s["wait"], noise)
    timing = {"overhead_clock": clock, "overhead_noise_pct": noise}
    if not recorder.traces:
        _release(recorder.path)
        return ProfileResult(None, 0, recorder.step_source, pct, {}, "no trace was recorded", tuple(warnings),
                             error, exit_status, scan, **timing)
    trace = load_trace(recorder.traces[0], use_cache=False)
    found = diagnose(trace, path=str(recorder.traces[0]))
    diagnosis, text = found.to_json(), found.text()
    recorded = _window_steps(trace) if recorder.step_source == "window" else recorder.active_steps_seen
    return ProfileResult(recorder.traces[0], recorded, recorder.step_source, pct, diagnosis, text,
                         tuple(warnings), error, exit_status, scan, trace, tuple(recorder.traces[1:]), **timing)


def _release(path: Path) -> None:
    """Remove the empty file ``trace_path`` reserved when nothing was written into it."""
    try:
        if path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass


def _window_steps(trace) -> int:
    """Steps found in a window's trace: the loader's one-step "whole trace" fallback is not a step."""
    return int((trace.steps["source"] != "whole trace").sum()) if len(trace.steps) else 0


def overhead_warnings(pct: float | None, wait: int, noise_pct: float | None = None) -> list[str]:
    """What the measured profiler overhead (``overhead_pct``) means: one within the wait steps' own spread
    (``noise_pct``) is not measurable; a cost over ``OVERHEAD_WARN_PCT`` overstates host work; a figure that
    far below zero is noise (the steps without the profiler varied more than its cost), not a speed-up."""
    if pct is None:
        return []
    if noise_pct is not None and abs(pct) <= noise_pct and abs(pct) > OVERHEAD_WARN_PCT:
        return [f"the profiler's overhead is not measurable ({pct:+.0f}%, within the {noise_pct:.0f}% the "
                f"{max(wait - 1, 0)} steps without it varied by); raise --wait for a steadier baseline"]
    if pct > OVERHEAD_WARN_PCT:
        return [f"the profiler made steps {pct:.0f}% slower (over {OVERHEAD_WARN_PCT:.0f}%): times in the "
                "trace overstate host work; Python-heavy steps pay most for with_stack"]
    if pct < -OVERHEAD_WARN_PCT:
        return [f"the profiler's overhead could not be measured ({pct:.0f}%: steps without the profiler varied more "
                f"than its cost over {max(wait - 1, 0)} of them); raise --wait for a steadier baseline"]
    return []


def _schedule_warnings(recorder: Recorder, error: str) -> list[str]:
    s, seen, expected = recorder.schedule, recorder.steps_seen, recorder.expected_steps
    ended = "the script stopped" if error else "the code ended"
    if recorder.step_source == "window":
        return [f"a {recorder.seconds:g} s window without steps (--seconds): the diagnosis takes the whole window "
                "as one step; for per-step numbers let the script call optimizer.step(), or pass --step "
                "module:function (one call = one step)"]
    if recorder.step_source == "optimizer" and seen == 0:
        return [f"no optimizer.step() was seen, so nothing was recorded ({ended} first): for a loop without an "
                "optimizer pass --step module:function (one call = one step), or --seconds N for a time window"]
    if recorder.step_source == "function" and seen == 0:
        return [f"{recorder.step} was never called, so nothing was recorded: name the function the loop calls once "
                "per step"]
    if seen >= expected:
        return []
    return [f"{ended} after {seen} of {expected} scheduled steps (wait {s['wait']}, warm-up {s['warmup']}, "
            f"active {s['active']} x {s['repeat']}): {recorder.active_steps_seen} active step(s) kept, and the "
            "step running when it stopped is in the trace cut short; "
            "lower --wait/--warmup/--active or let the script run longer"]


def _scan(target, module: bool):
    path = target
    if module:
        import importlib.util

        path = importlib.util.find_spec(str(target)).origin
    return scan([path])


class profile:  # noqa: N801  (used as ``with perfkit.profile(steps=5) as p:``)
    """Profile the code run in a ``with`` block (a notebook cell's ``train()``) with the same hooks and
    schedule as ``perfkit profile``; ``steps`` active steps are recorded. After the block ``p.trace``
    is the loaded Trace, ``p.diagnosis`` the diagnosis (dict), ``p.result`` the ProfileResult and
    printing ``p`` shows the diagnosis text."""

    def __init__(self, steps: int = 5, *, wait: int = 5, warmup: int = 2, step: str | None = None,
                 seconds: float | None = None, memory: bool = False, name: str = "notebook", out=None):
        self._recorder = Recorder(trace_path(name, out), wait=wait, warmup=warmup, active=steps, step=step,
                                  seconds=seconds, memory=memory, metadata={"script": name})
        self.result: ProfileResult | None = None

    def __enter__(self) -> "profile":
        self._recorder.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._recorder.__exit__(exc_type, exc, tb)
        error = f"{exc_type.__name__}: {exc}" if exc_type is not None else ""
        self.result = finish(self._recorder, error=error, exit_status=1 if error else 0)
        return False

    @property
    def trace(self):
        return self.result.loaded if self.result else None

    @property
    def diagnosis(self) -> dict | None:
        return self.result.diagnosis if self.result else None

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.result.warnings if self.result else ()

    def __repr__(self) -> str:
        if self.result is None:
            return "<perfkit.profile: not run yet>"
        r = self.result
        return f"<perfkit.profile {r.trace}: {r.steps_recorded} steps ({r.step_source})>\n{r.diagnosis_text}"
