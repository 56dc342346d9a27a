"""Profile a user's script (``profile_script``) or a notebook block (``profile``) and diagnose the trace.

Both record with :class:`perfkit.profiling.recorder.Recorder` into the workbook's ``traces/`` folder
(``<name>-<YYYY-MM-DD>-<HHMMSS>.pt.trace.json.gz``, the workbook root of ``perfkit run``), load the
trace and diagnose it (:func:`perfkit.analysis.step.diagnosis.diagnose`). The script runs the way
``perfkit detect`` runs it (:func:`perfkit.detect.script.run_as_main`): its ``__main__``, argv,
working directory and exit status are its own, and an early exit, exception or Ctrl-C keeps what was
recorded until then.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import errno
import itertools
import os
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.memory import memory_timeline
from ..analysis.step.diagnosis import diagnose
from ..analysis.trace_diff.diff import diff
from ..atomic import output_error
from ..detect.script import run_as_main
from ..detect.static import scan
from ..errors import ParameterError, PerfkitError
from ..report.terminal.diagnose import diagnosis_text
from ..report.terminal.trace_diff import format_diff
from ..text import printable_data
from ..trace import load_trace
from ..workbook import workbook_root
from .output import release as _release
from .recorder import Recorder
from .target import check_target, module_file, module_path
from .trigger import SlowTrigger
from .timing import (machine_load, noise_warnings, overhead_noise_pct, overhead_pct, overhead_unmeasurable,
                     overhead_warnings, step_clock)

TRACE_SUFFIX = ".pt.trace.json.gz"
STEP_HINT = ("--step FUNCTION, the function the loop calls once per step (one call = one step): one the script "
             "defines, --step plan or --step Planner.step, or one of a module, --step mymod:plan")


@dataclass(frozen=True)
class ProfileResult:
    """What a profiling run produced. ``trace``: path of the trace written (None: nothing
    recorded); ``loaded``: the loaded Trace; ``steps_recorded``: complete steps recorded (window: ``ProfilerStep`` spans);
    ``step_source``: optimizer, function or window; ``overhead_pct``: step time with the profiler
    on over step time without it, minus 1, in percent (None: too few steps to tell, :func:`overhead_pct`),
    ``overhead_clock``: "GPU" (CUDA events at the step boundaries) or "host", ``overhead_noise_pct``: how
    much the steps of the comparison varied (an overhead within it is not measurable);
    ``diagnosis`` and ``diagnosis_text``; ``error`` and
    ``exit_status`` of the script; ``scan``: ``perfkit scan`` findings of the script (or None);
    ``step_times_s``: the recorded (active) steps' times on ``overhead_clock`` (None: no time);
    ``load``: (load average over the last minute, CPUs) at the end of the run, None where unknown;
    ``overhead_unmeasurable``: why ``overhead_pct`` is not a measurement ("" when it is;
    :func:`perfkit.profiling.timing.overhead_unmeasurable`); ``problem``: why the recording is not the
    script's, perfkit's own failure (the script runs its own profiler, the trace could not be written), "" when none;
    ``trigger``: with ``--trigger``, :meth:`perfkit.profiling.trigger.SlowTrigger.to_json` and ``diff`` (the median
    step's trace against the slowest's), ``trigger_text`` that diff's text (``trace`` is then the slowest step's)."""

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
    step_times_s: tuple = ()
    load: tuple[float, int] | None = None
    overhead_unmeasurable: str = ""
    problem: str = ""
    trigger: dict | None = None
    trigger_text: str = ""
    memory: dict | None = None  # with --memory: perfkit.memory_timeline(trace).to_json() (peak, growth per step)

    @property
    def overhead_measurable(self) -> bool:
        """Whether ``overhead_pct`` is a measurement (``overhead_unmeasurable`` says why not)."""
        return self.overhead_pct is not None and not self.overhead_unmeasurable

    @property
    def step_median_s(self) -> float | None:
        """Median time of the recorded steps (seconds, ``overhead_clock``); None when none was timed."""
        timed = [t for t in self.step_times_s if t is not None]
        return statistics.median(timed) if timed else None

    @property
    def recorded_nothing(self) -> bool:
        """No trace, or no complete step in it where steps were asked for (a window has none by design)."""
        return self.trace is None or (self.step_source != "window" and self.steps_recorded == 0)

    def to_json(self) -> dict:
        """``{trace, steps_recorded, step_source, step_median_ms, step_times_ms, overhead_pct (raw),
        overhead_measurable, overhead_unmeasurable, overhead_clock, overhead_noise_pct, load, diagnosis,
        warnings}`` (+ scan, error)."""
        median = self.step_median_s
        out = {"trace": str(self.trace) if self.trace else None, "steps_recorded": self.steps_recorded,
               "step_source": self.step_source, "step_median_ms": None if median is None else median * 1e3,
               "step_times_ms": [None if t is None else t * 1e3 for t in self.step_times_s],
               "overhead_pct": self.overhead_pct, "overhead_measurable": self.overhead_measurable,
               "overhead_unmeasurable": self.overhead_unmeasurable,
               "overhead_clock": self.overhead_clock, "overhead_noise_pct": self.overhead_noise_pct,
               "load": None if self.load is None else {"load_1min": self.load[0], "cpus": self.load[1]},
               "diagnosis": self.diagnosis, "warnings": list(self.warnings)}
        if self.extra_traces:
            out["more_traces"] = [str(p) for p in self.extra_traces]
        if self.scan is not None:
            out["scan"] = self.scan.to_records()
        if self.error:
            out["error"], out["exit_status"] = self.error, self.exit_status
        if self.problem:
            out["problem"] = self.problem
        if self.trigger is not None:
            out["trigger"] = self.trigger
        if self.memory is not None:
            out["memory"] = self.memory
        return out


def trace_path(name: str, folder=None, now: _dt.datetime | None = None) -> Path:
    """``<folder>/<name>-<YYYY-MM-DD>-<HHMMSS>.pt.trace.json.gz``, with ``-2``, ``-3``... when that name is
    taken (two runs started in one second; characters other than letters, digits, ``.+-`` become ``_``), reserved by creating it empty (``finish`` removes it when no
    trace was recorded); ``folder`` (absolute, so a script that changes directory does not move it) defaults
    to the workbook's ``traces/`` (created). Raises ParameterError when ``folder`` exists and is not a
    directory, OutputError when it cannot be written."""
    folder = _trace_folder(folder)
    stem = re.sub(r"[^\w.+-]", "_", Path(name).stem)  # a control character in the name broke Kineto's JSON
    base = f"{stem or 'profile'}-{(now or _dt.datetime.now()):%Y-%m-%d-%H%M%S}"
    for n in itertools.count(1):
        path = folder / f"{base}{'' if n == 1 else f'-{n}'}{TRACE_SUFFIX}"
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return path
        except FileExistsError:
            if n >= 1000:  # a folder that says every name exists is not one to write to
                raise output_error(path, OSError(errno.EEXIST, "1,000 trace names there are taken")) from None
        except OSError as exc:
            raise output_error(path, exc) from exc


def _trace_folder(folder) -> Path:
    """``--out`` (default: the workbook's ``traces/``) as an absolute, existing folder: a link to a folder that
    does not exist yet is followed (the folder is made), a loop of links or a file is refused. Raises
    ParameterError or OutputError, before the script runs."""
    folder = Path(os.path.abspath(folder)) if folder is not None else workbook_root() / "traces"
    real = Path(os.path.realpath(folder))
    if real.is_symlink():  # realpath stops at a link it cannot resolve: a loop
        raise ParameterError(f"--out {str(folder)!r} is a loop of symbolic links: pass a folder for the trace")
    if real.exists() and not real.is_dir():
        raise ParameterError(f"--out {str(folder)!r} is a file: pass a folder for the trace")
    try:
        real.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(real, exc) from exc
    return folder if folder.is_dir() else real


def profile_script(target, args=(), *, module: bool = False, wait: int = 5, warmup: int = 2, active: int = 3,
                   repeat: int = 1, step: str | None = None, seconds: float | None = None, memory: bool = False,
                   out=None, scan: bool = False, trigger: str | None = None, keep: int = 3) -> ProfileResult:
    """Run script ``target`` (``module=True``: module, like ``python -m``, found from the working
    directory) unchanged under the profiler and diagnose the trace. ``out``: folder for the trace
    (default: the workbook's ``traces/``). ``scan``: also run ``perfkit scan`` on the script. ``trigger``
    (``"slow:1.5x"``): watch every step after ``wait`` and keep the ``keep`` slowest at that factor of the running
    median, plus one median step's (:mod:`perfkit.profiling.trigger`). Raises
    ParameterError for a missing script or bad schedule, PerfkitError when torch is missing, with no
    trace file left behind; the script's own failure is in ``error``."""
    check_target(target, module)
    name = str(target).rsplit(".", 1)[-1] if module else Path(target).name
    with module_path() if module else contextlib.nullcontext():
        script = module_file(target) if module else str(target)
        recorder = _recorder(name, out, wait=wait, warmup=warmup, active=active, repeat=repeat, step=step,
                             seconds=seconds, memory=memory, script=script, trigger=(trigger, keep),
                             metadata={"script": str(target), "args": list(map(str, args)), "module": module})
        try:
            error, status = run_as_main(target, args, recorder, module=module, command="perfkit profile",
                                        found="the steps recorded until then are kept")
        except BaseException:
            _release(recorder.path)
            raise
    findings, note = _scan(script) if scan else (None, "")
    result = finish(recorder, error=error, exit_status=status, scan=findings)
    return dataclasses.replace(result, warnings=result.warnings + (note,)) if note else result


def _recorder(name: str, out, *, trigger=(None, 3), **options) -> Recorder:
    """A Recorder writing to a fresh :func:`trace_path`, the reservation removed when ``options`` are refused;
    ``trigger``: (spec or None, keep), the slow steps' traces named after that path."""
    path = trace_path(name, out)
    try:
        if trigger[0] is not None:
            options["trigger"] = SlowTrigger(trigger[0], trigger[1], lambda kind, step: path.with_name(
                path.name.replace(TRACE_SUFFIX, f"-{kind}-step{step}{TRACE_SUFFIX}")))
        return Recorder(path, **options)
    except BaseException:
        _release(path)
        raise


def finish(recorder: Recorder, *, error: str = "", exit_status: int = 0, scan=None, load=None) -> ProfileResult:
    """Load and diagnose what ``recorder`` wrote, with the warnings about how the recording went and how
    far its step times can be trusted. ``load``: (load average, CPUs), default :func:`machine_load` now."""
    warnings = _schedule_warnings(recorder, error) + recorder.warnings + _thread_warnings(recorder)
    if recorder.forks:
        warnings.insert(0 if recorder.steps_seen == 0 else len(warnings), _fork_warning(recorder.forks))
    s = recorder.schedule
    load = machine_load() if load is None else load
    times, clock = step_clock(recorder)
    sched = (s["wait"], s["warmup"], s["active"])
    pct, noise = overhead_pct(times, *sched), overhead_noise_pct(times, *sched)
    why = overhead_unmeasurable(times, *sched, load)
    active = tuple(times[i] if i < len(times) else None for i in recorder.active_steps)
    warnings += overhead_warnings(pct, s["wait"], noise, load, why)
    warnings += noise_warnings(active, load, clock, s["active"]) if recorder.traces else []  # nothing recorded: no figures
    timing = {"overhead_clock": clock, "overhead_noise_pct": noise, "step_times_s": active, "load": load,
              "overhead_unmeasurable": why}
    timing["problem"] = recorder.problem
    if recorder.trigger is not None:
        _release(recorder.path)
        return _triggered(recorder.trigger, recorder.step_source, warnings + recorder.trigger.warnings, error, exit_status,
                          scan, pct, timing)
    if recorder.path not in recorder.traces:  # nothing recorded, or written elsewhere (output.write_trace)
        _release(recorder.path)
    if not recorder.traces:
        return ProfileResult(None, 0, recorder.step_source, pct, {}, "no trace was recorded", tuple(warnings),
                             error, exit_status, scan, **timing)
    trace = load_trace(recorder.traces[0], use_cache=False)
    found = diagnose(trace, path=str(recorder.traces[0]))
    diagnosis, text = found.to_json(), diagnosis_text(found)
    recorded = _window_steps(trace) if recorder.step_source == "window" else recorder.active_steps_seen
    memory = memory_timeline(trace).to_json() if recorder.memory else None
    return ProfileResult(recorder.traces[0], recorded, recorder.step_source, pct, diagnosis, text,
                         tuple(warnings), error, exit_status, scan, trace, tuple(recorder.traces[1:]), **timing,
                         memory=memory)


def _triggered(trigger: SlowTrigger, source: str, warnings: list, error: str, exit_status: int, scan, pct,
               timing) -> ProfileResult:
    """The result of a ``--trigger`` run: the slowest step's trace diagnosed and diffed against the median step's."""
    summary, kept = trigger.to_json(), [path for _, _, path in trigger.slow]
    median = trigger.median[2] if trigger.median else None
    if not kept:
        warnings.append(_none_slow(trigger))
    main = kept[0] if kept else median
    if main is None:
        return ProfileResult(None, 0, source, pct, {}, "no trace was recorded", tuple(warnings), error,
                             exit_status, scan, trigger=summary, **timing)
    trace = load_trace(main, use_cache=False)
    found = diagnose(trace, path=str(main))
    text = ""
    if kept and median is not None:
        summary["diff"] = diff(load_trace(median, use_cache=False), trace).to_json()
        text = format_diff(printable_data(summary["diff"]))
    extra = tuple(kept[1:]) + ((median,) if median is not None and kept else ())
    return ProfileResult(main, len(kept) or 1, source, pct, found.to_json(), diagnosis_text(found), tuple(warnings),
                         error, exit_status, scan, trace, extra, trigger=summary, trigger_text=text, **timing)


def _none_slow(trigger: SlowTrigger) -> str:
    s = trigger.stats()
    kept = ": the median step's trace is kept" if trigger.median else ""
    if s["steps"] <= trigger.min_steps:
        return (f"--trigger {trigger.spec}: only {s['steps']} step(s) were timed, and the running median needs "
                f"{trigger.min_steps} before a step can be slow; let the script run longer")
    return (f"--trigger {trigger.spec}: no step took {trigger.factor:g}x the running median over {s['steps']} steps "
            f"(median {s['median_ms']:,.3g} ms, slowest {s['max_ms']:,.3g} ms){kept}; lower the factor to catch milder "
            "slow steps")


def _window_steps(trace) -> int:
    """Steps found in a window's trace: the loader's one-step "whole trace" fallback is not a step."""
    return int((trace.steps["source"] != "whole trace").sum()) if len(trace.steps) else 0


def _schedule_warnings(recorder: Recorder, error: str) -> list[str]:
    s, seen, expected = recorder.schedule, recorder.steps_seen, recorder.expected_steps
    ended = "the script stopped" if error else "the code ended"
    if recorder.step_source == "window":
        return [f"a {_window_text(recorder)} window without steps (--seconds): the diagnosis takes the whole window "
                f"as one step; for per-step numbers let the script call optimizer.step(), or pass {STEP_HINT}"]
    if recorder.step_problem:
        return [recorder.step_problem]
    if recorder.step_source == "optimizer" and seen == 0:
        return [f"no optimizer.step() was seen, so nothing was recorded ({ended} first): for a loop without an "
                f"optimizer pass {STEP_HINT}, or --seconds N for a time window"]
    if recorder.step_source == "function" and not recorder.step_found:
        return [f"--step {recorder.step}: the script never defined it, so nothing was recorded ({ended} first): "
                "name a function the script defines (plan, Planner.step) or module:function"]
    if recorder.step_source == "function" and seen == 0:
        return [f"{recorder.step} was never called, so nothing was recorded: name the function the loop calls once "
                "per step"]
    if seen >= expected:
        return []
    return [f"{ended} after {seen} of {expected} scheduled steps (wait {s['wait']}, warm-up {s['warmup']}, "
            f"active {s['active']} x {s['repeat']}): {recorder.active_steps_seen} active step(s) kept, and the "
            "step running when it stopped is in the trace cut short; "
            "lower --wait/--warmup/--active or let the script run longer"]


def _thread_warnings(recorder: Recorder) -> list[str]:
    """Steps of other threads beside the main thread's: recorded are the main thread's only."""
    if not (recorder.steps_elsewhere and recorder.steps_seen):
        return []
    what = f"--step {recorder.step}" if recorder.step else "optimizer.step()"
    return [f"{what} was also called {recorder.steps_elsewhere:,} time(s) from {len(recorder.threads_elsewhere)} other "
            "thread(s): those calls are not steps (perfkit steps the profiler on the thread that started the script); "
            "the steps recorded are the main thread's"]


def _window_text(recorder: Recorder) -> str:
    """"1 s", or the window's real length when it ran long: a window ends on the main thread when the script
    next runs Python, so one that runs out during a 6 s ``time.sleep`` (or any C call) records 6 s, not 1."""
    asked, got = recorder.seconds, recorder.window_s
    if got is None or got <= asked + max(0.5, 0.1 * asked):
        return f"{asked:g} s"
    return (f"{got:,.1f} s (asked for {asked:g} s: the window ends when the script next runs Python code, and it "
            f"was in C code, e.g. time.sleep or a blocking call, when the {asked:g} s ran out)")


def _fork_warning(forks: int) -> str:
    return (f"the script forked {forks} process(es): perfkit records only the process it started, so steps run "
            "in a forked child are not in the trace; let the parent run the training loop, or pass --step with a "
            "function the parent calls")


def _scan(path: str) -> tuple[object, str]:
    """(``perfkit scan``'s findings, "") or (None, why the scan could not read the script)."""
    try:
        return scan([path]), ""  # ``profile_script``'s own ``scan`` is the flag
    except PerfkitError as exc:
        return None, f"--scan could not read the script after it ran ({exc}); the diagnosis above is kept"


class profile:  # noqa: N801  (used as ``with perfkit.profile(steps=5) as p:``)
    """Profile the code run in a ``with`` block (a notebook cell's ``train()``) with the same hooks and
    schedule as ``perfkit profile``; ``steps`` active steps are recorded. After the block ``p.trace``
    is the loaded Trace, ``p.diagnosis`` the diagnosis (dict), ``p.result`` the ProfileResult and
    printing ``p`` shows the diagnosis text."""

    def __init__(self, steps: int = 5, *, wait: int = 5, warmup: int = 2, step: str | None = None,
                 seconds: float | None = None, memory: bool = False, name: str = "notebook", out=None):
        self._recorder = _recorder(name, out, wait=wait, warmup=warmup, active=steps, step=step, seconds=seconds,
                                   memory=memory, metadata={"script": name})
        self.result: ProfileResult | None = None

    def __enter__(self) -> "profile":
        try:
            self._recorder.__enter__()
        except BaseException:  # a --step that names nothing: no trace will be written
            _release(self._recorder.path)
            raise
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
