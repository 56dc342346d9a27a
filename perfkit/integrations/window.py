"""``ProfileWindow``: the one recorder every training-framework callback drives.

An adapter calls :meth:`ProfileWindow.begin` when training starts (the framework's global step, this process's
rank, the TensorBoard writers and MLflow runs it found), :meth:`ProfileWindow.step` after each step with the
global step (a step is one advance of it: gradient accumulation's micro-batches are one step), and
:meth:`ProfileWindow.end` when training ends. The schedule counts global steps: with ``wait=5, warmup=2,
active=3`` global steps 7-9 are recorded (``wait`` counts from step 0, so a run resumed at step 1000 records at
once). At the window's end (or at ``end`` for a window cut short, or a ``trigger``): the trace is loaded and
diagnosed (:func:`perfkit.profiling.session.finish`), ``report=True`` runs the step_anatomy notebook into a dated
report, and the verdict goes to the run's loggers (:mod:`perfkit.integrations.loggers`).

Never breaks the training run: a failure inside perfkit (an unwritable folder, a full disk, a profiler already
running, a framework version whose hooks differ) is one warning on the ``perfkit`` logger, the recording is
dropped, and every later call returns at once.
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path

from ..profiling.naming import (TRACE_SUFFIX, cycle_steps, cycle_trace, parse_ranks, run_folder, run_name, selected,
                                trigger_trace)
from ..profiling.recorder import Recorder
from ..profiling.session import finish
from ..profiling.trigger import SlowTrigger, parse_trigger
from ..report.publish.runner import run_all
from ..workloads.base import check_int
from .loggers import publish, verdict_record

log = logging.getLogger("perfkit")
# Wait steps the recorder times (the profiler's overhead is measured against them, as ``perfkit profile``'s last
# 4); earlier ones are only counted, so a step outside the window costs one comparison.
TIMED_WAIT = 4


def guarded(method):
    """Run ``method``; an exception becomes one warning and ends this window's recording (the training goes on)."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if self.failed:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 (perfkit's failure must not stop the training)
            self.failed = f"{type(exc).__name__}: {exc}"
            log.warning("perfkit (%s): %s; perfkit stops recording and the training goes on", self.framework,
                        self.failed)
            log.debug("perfkit (%s): where it failed", self.framework, exc_info=True)
            self._abandon()
            return None

    return call


class ProfileWindow:
    """The shared recorder (see the module's docstring). ``ranks``: 0 (default), "all", or a list; ``out``: the
    folder of the run folders (default: the workbook's ``traces/``); ``run``: the run's name (default: the
    framework's, else ``<framework>-<date>-<time>``); ``trigger``: ``"slow:1.5x"`` keeps the ``keep`` slowest
    steps and a median one (:mod:`perfkit.profiling.trigger`). After the window: ``result`` (a
    :class:`perfkit.profiling.session.ProfileResult`), ``record`` (what was logged), ``logged`` (the sinks
    written), ``report`` (the HTML path), ``failed`` (why perfkit stopped, "" when it did not).
    Raises ParameterError for bad options, at construction."""

    def __init__(self, framework: str, *, wait: int = 5, warmup: int = 2, active: int = 3, repeat: int = 1,
                 ranks=0, out=None, run: str | None = None, memory: bool = False, report: bool = False,
                 trigger: str | None = None, keep: int = 3):
        for name, value, low in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1),
                                 ("repeat", repeat, 1), ("keep", keep, 1)):
            check_int(name, value, low)
        if trigger is not None:
            parse_trigger(trigger)
        self.framework, self.ranks, self.out, self.run = framework, parse_ranks(ranks), out, run
        self.schedule = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        self.memory, self.want_report, self.trigger, self.keep = memory, report, trigger, keep
        self.result = self.record = self.report = None
        self.logged: list[str] = []
        self.failed = ""
        self.folder: Path | None = None
        self._recorder: Recorder | None = None
        self._sinks: dict = {}
        self._last = self._offset = self._lead = 0

    @property
    def recording(self) -> bool:
        """Whether the window is open (begun on a chosen rank and not ended)."""
        return self._recorder is not None

    @guarded
    def guard(self, hook, *args):
        """``hook(*args)`` under the same guard: an adapter's own reading of the framework (``trainer.global_step``)
        fails the way the recorder does, with one warning, when a framework version differs."""
        return hook(*args)

    @guarded
    def begin(self, global_step: int = 0, *, rank: int | None = 0, run: str | None = None, writers=(),
              mlflow_runs=()) -> None:
        if self._recorder is not None or self.result is not None or not selected(self.ranks, rank):
            return
        name = run_name(self.framework, self.run or run)
        self.folder = folder = run_folder(name, self.out)
        self._last = int(global_step)
        wait = max(0, self.schedule["wait"] - self._last)
        self._lead = max(0, wait - TIMED_WAIT)  # steps counted before the recorder starts
        self._offset = self._last + self._lead  # the global step the recorder's step 0 is
        schedule = dict(self.schedule, wait=wait - self._lead)
        trigger = None
        if self.trigger is not None:
            trigger = SlowTrigger(self.trigger, self.keep, lambda kind, step: trigger_trace(
                folder, name, rank, kind, self._offset + step))
        self._sinks = {"writers": tuple(writers), "mlflow_runs": tuple(mlflow_runs)}
        recorder = Recorder(folder / f".{name}{TRACE_SUFFIX}", **schedule, memory=self.memory, driven=True,
                            metadata={"script": self.framework, "run": name, "rank": rank},
                            name_trace=lambda cycle: cycle_trace(folder, name, rank,
                                                                 *cycle_steps(schedule, cycle, self._offset)),
                            trigger=trigger)
        folder.mkdir(parents=True, exist_ok=True)
        self._recorder = recorder
        if self._lead == 0:
            recorder.__enter__()

    @guarded
    def step(self, global_step: int) -> None:
        """The framework's global step after a step; a step is recorded when it has advanced."""
        recorder = self._recorder
        if recorder is None or global_step == self._last:
            return
        self._last = global_step
        if self._lead:
            self._lead -= 1
            if self._lead == 0:
                recorder.__enter__()
            return
        recorder.end_step()
        if recorder.trigger is None and recorder.steps_seen >= recorder.expected_steps:
            self._close()

    @guarded
    def end(self) -> None:
        """Training ended: close a window still open (cut short, or a trigger's)."""
        if self._recorder is not None:
            self._close()

    def _close(self) -> None:
        recorder, self._recorder = self._recorder, None
        if self._lead:  # training ended before the recorder started: nothing was recorded
            self._lead = 0
            _remove_if_empty(self.folder)
            log.warning("perfkit (%s): nothing recorded: training ended at global step %s, before the window "
                        "(wait %s); lower wait", self.framework, self._last, self.schedule["wait"])
            return
        recorder.__exit__(None, None, None)
        self.result = result = finish(recorder)
        _remove_if_empty(self.folder)
        if result.problem:
            log.warning("perfkit (%s): %s", self.framework, result.problem)
        if result.trace is None:
            log.warning("perfkit (%s): nothing recorded: %s", self.framework,
                        result.warnings[0] if result.warnings else "no step")
            return
        if self.want_report:
            self.report = _report(result.trace)
        self.record = verdict_record(result, self.report)
        self.logged, failed = publish(self.record, step=self._last, **self._sinks)
        for why in failed:
            log.warning("perfkit (%s): could not log the verdict to %s", self.framework, why)
        log.info("perfkit (%s): %s; trace %s", self.framework, self.record["title"], result.trace)

    def _abandon(self) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is not None and not self._lead:
            try:
                recorder.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 (already failing: the first reason is the one said)
                pass
        _remove_if_empty(self.folder)


def _remove_if_empty(folder) -> None:
    """The run's folder, made at ``begin``, removed when nothing was written into it."""
    try:
        if folder is not None:
            folder.rmdir()
    except OSError:  # not empty (the traces are there), or already gone
        pass


def _report(trace) -> str | None:
    """The step_anatomy notebook run on ``trace`` into a dated report: its HTML path (None when it failed, said)."""
    run = run_all(["step_anatomy"], {"mode": "trace", "trace_path": str(trace)}, progress=False)[0]
    if not run.ok:
        log.warning("perfkit: the step_anatomy report failed: %s", run.error)
        return None
    return str(run.html_path)
