"""``Recorder``: the PyTorch profiler on a schedule, stepped without changes to the user's code.

A step is found in one of three ways (``step_source``):

* ``optimizer``: one ``optimizer.step()``, seen through PyTorch's global post-hook
  (``torch.optim.optimizer.register_optimizer_step_post_hook``). With several optimizers only the
  first one that steps counts, so a GAN's two ``step()`` calls make one step.
* ``function``: one call of a function named ``module:qualname`` (``perfkit.workloads.mppi:MPPIWorkload.step``),
  wrapped for the duration of the recording.
* ``window``: no steps; the profiler records from the start for ``seconds`` (stopped on the main
  thread by :func:`perfkit.profiling.watch.window_timer`) or until the code ends.
* ``caller``: the code that runs the recording says where each step ends (:meth:`Recorder.end_step`): a
  training framework's callback (:mod:`perfkit.integrations`), at each advance of its global step.

With a ``trigger`` (:class:`perfkit.profiling.trigger.SlowTrigger`) every step after ``wait`` is recorded in a
cycle of its own and the trigger decides which of them are written (the rare slow step).

Steps are counted on the thread that started the recording (the profiler steps there: stepping it from
another thread crashed Kineto); forks, ``exec`` and a profiler of the script's own are watched
(:mod:`perfkit.profiling.watch`) and said in ``problem``/``warnings``.

The schedule is torch's (``wait``, ``warmup``, ``active``, ``repeat``): the trace holds one
``ProfilerStep#N`` span per active step, like a hand-written ``prof.step()`` loop. The time of each
step is kept so the profiler's own cost can be measured (profiled steps against wait steps): on the
host clock (``step_times_s``) and, once the script uses CUDA, on the GPU's clock (``device_step_times_s``:
a CUDA event recorded at each step boundary). A GPU-bound step's host time is the host issuing work
ahead of the GPU, not the step: an H200 transformer step read +56% on the host clock and -1% on the GPU's.
torch is imported only when recording starts.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import warnings
from pathlib import Path

from ..cpus import available_cores, load_average
from ..errors import ParameterError, PerfkitError
from ..limits import DUR_RANGE_US
from ..text import printable
from ..workloads.base import check_int
from .output import release, write_trace
from .stepfn import QUALNAME, ScriptStep, split, wrap_function
from .watch import after_return, watch_exec, watch_forks, watch_profilers, window_timer


MAX_WINDOW_S = DUR_RANGE_US[1] / 1e6  # a week: the longest event perfkit reads back from a trace


class Recorder:
    """Context manager that profiles the code run inside it and writes the trace to ``path``
    (later cycles of ``repeat > 1`` to ``<stem>-cycleN.pt.trace.json.gz``).

    ``step``: ``"module:qualname"`` of the function whose calls are the steps (None: optimizer
    steps); ``seconds``: record a time window without steps instead. After the block:
    ``traces`` (paths written), ``steps_seen``, ``step_times_s`` (one per step boundary seen),
    ``active_steps`` (their indices recorded), ``device_step_times_s()``, ``step_source``,
    ``step_found`` (False: a ``step`` the script defines was never defined) and ``warnings``.
    Raises ParameterError for bad counts or an unknown function, PerfkitError when torch is not installed.
    """

    def __init__(self, path, *, wait: int = 5, warmup: int = 2, active: int = 3, repeat: int = 1,
                 step: str | None = None, seconds: float | None = None, memory: bool = False,
                 metadata: dict | None = None, clock=time.perf_counter, script: str | None = None,
                 driven: bool = False, name_trace=None, trigger=None):
        for name, value, low in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1), ("repeat", repeat, 1)):
            check_int(name, value, low)
        if seconds is not None and not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
                                        and 0 < seconds <= MAX_WINDOW_S):
            raise ParameterError(f"seconds={seconds!r}: the window (--seconds) must be a number of seconds > 0 and "
                                 f"at most a week ({MAX_WINDOW_S:,.0f})")
        if step is not None and seconds is not None:
            raise ParameterError("pass --step or --seconds, not both: a window has no steps")
        if trigger is not None and seconds is not None:
            raise ParameterError("pass --trigger or --seconds, not both: a trigger compares steps, a window has none")
        if step is not None and ":" in str(step):
            split(step)
        elif step is not None and not QUALNAME.match(str(step)):
            raise ParameterError(f"--step {step!r}: name a function the script defines (plan, Planner.step) or "
                                 "one of a module as module:function (mymod:plan)")
        self.script = str(Path(script).resolve()) if script else None
        self.path = Path(path)
        self.schedule = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        self.step, self.seconds, self.memory = step, seconds, memory
        self.metadata = dict(metadata or {})
        self.step_source = ("window" if seconds is not None else "function" if step else
                            "caller" if driven else "optimizer")
        self.name_trace = name_trace  # cycle index -> the path of that cycle's trace (None: ``path``, -cycleN)
        self.trigger = trigger
        self.clock = clock
        self.traces: list[Path] = []
        self.step_times_s: list[float] = []
        self._marks: list = []  # a CUDA event (or None) per step boundary: the end of that step on the GPU
        self.steps_seen = 0
        self.traces_lost = 0
        self.step_found = True  # False while a --step function the script defines is not defined yet
        self.warnings: list[str] = []
        self.problem = ""  # why the recording is not the script's (its own profiler, a failed write)
        self.steps_elsewhere = 0  # step calls from threads other than the recording's
        self.threads_elsewhere: set = set()  # ... and those threads (the Thread objects: idents are reused)
        self.window_s: float | None = None  # how long the --seconds window really recorded
        self._started = None
        self.forks = 0
        self._script_step: ScriptStep | None = None
        self._thread = threading.get_ident()
        self._undo: list = []
        self._prof = None
        self._last = None
        self._optimizer = None
        self._tagged = False
        self._stopping = False

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        torch = _import_torch()
        if torch.autograd._profiler_enabled():
            raise PerfkitError("a torch profiler is already running in this process: perfkit records with its own, "
                               "one per process; stop the other one first, or diagnose its trace with perfkit diagnose")
        self._prof = self._make_profiler(torch)
        self._thread = threading.get_ident()
        if self.step_source == "function" and ":" not in self.step and self.script:
            self.step_found = False  # until the script defines it
            self._script_step = ScriptStep(self.step, self.script, self._on_step, self._on_found)
            self._undo.append(self._script_step.undo)
        elif self.step_source == "function":
            spec = self.step if ":" in self.step else f"__main__:{self.step}"
            self._undo.append(wrap_function(spec, self._on_step))
        elif self.step_source == "optimizer":
            from torch.optim.optimizer import register_optimizer_step_post_hook  # heavy, optional: torch

            handle = register_optimizer_step_post_hook(self._on_optimizer_step)
            self._undo.append(handle.remove)
        self._undo.append(_quiet_kineto())
        self._prof.start()
        self._started = self.clock()
        self._tag()
        self._undo += [watch_forks(self._on_fork, self._detach), watch_exec(self._on_exec),
                       watch_profilers(torch, lambda: self._prof, self._on_foreign_profiler)]
        if self.seconds is not None:
            self._undo.append(window_timer(self.seconds, self._stop))
        self._last = self.clock()
        return self

    def __exit__(self, *exc) -> bool:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self._stop()
        return False

    @property
    def step_problem(self) -> str:
        """Why the --step function's calls could not be steps ("" when they were, or none was named)."""
        if self._script_step is not None and self._script_step.problem():
            return self._script_step.problem()
        if self.steps_elsewhere and not self.steps_seen:
            what = f"--step {self.step}" if self.step else "optimizer.step()"
            threads = len(self.threads_elsewhere)
            where = "another thread" if threads == 1 else f"{threads} other threads"
            return (f"{what} was called {self.steps_elsewhere} time(s), only from {where} (none from the thread that "
                    "started the script, which perfkit steps the profiler on: stepping it from other threads crashed "
                    "Kineto), so nothing was recorded; pass --step with a function the main thread calls once per "
                    "step, or --seconds N to record a time window")
        return ""

    # -- steps -----------------------------------------------------------------------------------
    def _on_found(self) -> None:
        self.step_found = True

    def _on_fork(self) -> None:
        self.forks += 1

    def _detach(self) -> None:
        """In a forked child: never step or write the parent's trace (the profiler is the parent's)."""
        self._prof, self._undo = None, []

    def _on_exec(self, program: str) -> None:
        """The script replaces this process: write what was recorded, and say so (nothing prints after)."""
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self._stop()
        if not self.traces:
            release(self.path)
        where = f"the trace recorded until then is {self.traces[0]}" if self.traces else "no trace was recorded"
        print(printable(f"perfkit profile: the script is replacing itself with {program!r} (os.exec*) after "
                        f"{self.steps_seen} step(s): perfkit cannot report on the new program; {where}; profile "
                        "that program on its own"), file=sys.__stderr__ or sys.stderr)  # nothing prints after exec
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass

    def _on_foreign_profiler(self, what: str) -> None:
        """The script starts its own profiler: stop perfkit's (one profiler per process) so the script's works.
        Once perfkit's recording is over (the schedule done) the script's profiler is no conflict."""
        if self._prof is None:
            return
        if not self.problem:
            self.problem = (f"the script runs its own profiler ({what}): perfkit cannot record under it; diagnose "
                            "the script's own trace with `perfkit diagnose TRACE`, or remove its profiler and run "
                            "perfkit profile again")
        self._stop()

    def _on_optimizer_step(self, optimizer, args, kwargs) -> None:
        if self._elsewhere():  # before the optimizer is bound: a thread's optimizer is never the main one's
            return
        if self._optimizer is None:
            self._optimizer = optimizer
        if optimizer is not self._optimizer:
            return
        wrapper = _optimizer_wrapper(sys._getframe(1))
        if wrapper is None or not after_return(wrapper, self._on_step):
            self._on_step()

    def end_step(self) -> None:
        """The end of one step, said by the code that runs a ``driven`` recording."""
        self._on_step()

    def _elsewhere(self) -> bool:
        """Whether this step call comes from a thread other than the recording's (counted, not stepped)."""
        if threading.get_ident() == self._thread:
            return False
        self.steps_elsewhere += 1
        self.threads_elsewhere.add(threading.current_thread())
        return True

    def _on_step(self) -> None:
        if self._elsewhere():
            return
        now = self.clock()
        self._marks.append(_device_mark())
        self.step_times_s.append(now - self._last)
        self._last = now
        self.steps_seen += 1
        if self._prof is not None:
            self._prof.step()
            self._tag()
            if self.steps_seen >= self._last_step():
                self._stop()  # the schedule is complete: the rest of the script runs unprofiled
        self._last = self.clock()  # a step's time leaves out the profiler's own start and save

    def device_step_times_s(self) -> list:
        """Each step's time on the GPU's clock (seconds; None where a boundary had no CUDA event: the
        script had not used CUDA yet), from the events at consecutive step boundaries; step 0 has no
        start and is None. Empty when the script never used CUDA or the GPU cannot be read."""
        if not any(m is not None for m in self._marks):
            return []
        try:
            import torch  # heavy, optional: only a recording that used CUDA gets here

            torch.cuda.synchronize()
            return [None] + [a.elapsed_time(b) / 1e3 if a is not None and b is not None else None
                             for a, b in zip(self._marks, self._marks[1:])]
        except (RuntimeError, AssertionError):  # a failed GPU context; torch without CUDA asserts
            return []

    def _last_step(self) -> float:
        s = self.schedule
        if self.trigger is not None:
            return float("inf")  # every step is watched until the code ends
        return s["wait"] + (s["warmup"] + s["active"]) * s["repeat"]

    def _tag(self) -> None:
        """Write what recorded the trace into its metadata, once the profiler records (Kineto drops
        metadata added while it waits)."""
        from torch.profiler import ProfilerAction  # heavy, optional: torch

        if self._tagged or self._prof.current_action not in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            return
        self._prof.add_metadata_json("perfkit_profile", json.dumps(
            {**self.metadata, "step_source": self.step_source, **self.schedule, **machine_now()}))
        self._tagged = True

    def _stop(self, *_signal) -> None:
        prof, self._prof = self._prof, None
        if prof is not None:
            self._stopping = True  # a trace saved now holds the step that was running, cut short
            prof.stop()
            if self.step_source == "window" and self.window_s is None and self._started is not None:
                self.window_s = self.clock() - self._started

    # -- profiler --------------------------------------------------------------------------------
    def _make_profiler(self, torch):
        from torch.profiler import ProfilerActivity, profile, schedule  # heavy, optional: torch

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():  # ROCm builds report their GPUs through the CUDA API too
            activities.append(ProfilerActivity.CUDA)
        sched = None
        s = self.schedule
        # One cycle per step with a trigger, each step's trace offered to it; without Python stacks: torch's stack
        # tracer holds the profile hook that ends an optimizer step's cycle outside its range (watch.after_return).
        if self.trigger is not None:
            with warnings.catch_warnings():  # "won't be using warmup": each cycle is one step, by design
                warnings.simplefilter("ignore", UserWarning)
                sched = schedule(skip_first=s["wait"], wait=0, warmup=0, active=1, repeat=0)
        elif self.step_source != "window":
            sched = schedule(wait=s["wait"], warmup=s["warmup"], active=s["active"], repeat=s["repeat"])
        return profile(activities=activities, schedule=sched, on_trace_ready=self._write,
                       with_stack=self.trigger is None, record_shapes=True, profile_memory=self.memory)

    def _write(self, prof) -> None:
        """Write a cycle's trace; a write that fails is perfkit's, said in ``problem`` or ``warnings``,
        never raised into the script's ``optimizer.step()``. With a trigger, the trigger writes (or not)."""
        if self.trigger is not None:
            complete = not self._stopping and bool(self.step_times_s)
            self.trigger.offer(prof, self.steps_seen - 1, self.step_times_s[-1] if complete else None)
            return
        n = len(self.traces) + self.traces_lost
        if self.name_trace is not None:
            path = Path(self.name_trace(n))
        else:
            path = self.path if n == 0 else self.path.with_name(
                self.path.name.replace(".pt.trace.json.gz", f"-cycle{n + 1}.pt.trace.json.gz"))
        written, note = write_trace(prof, path)
        if written is None:
            self.traces_lost += 1
            self.problem = self.problem or note
        else:
            self.traces.append(written)
            self.warnings += [note] if note else []

    @property
    def active_steps(self) -> list[int]:
        """Indices (into ``step_times_s``) of the complete steps that ended while the schedule recorded
        (the trace may also hold the step that was running when the code stopped, cut short)."""
        if self.step_source == "window" or self.trigger is not None:
            return []
        s, cycle = self.schedule, self.schedule["warmup"] + self.schedule["active"]
        return [i for i in range(s["wait"], self.steps_seen)
                if (i - s["wait"]) % cycle >= s["warmup"] and (i - s["wait"]) // cycle < s["repeat"]]

    @property
    def active_steps_seen(self) -> int:
        return len(self.active_steps)

    @property
    def expected_steps(self) -> int:
        """Steps the schedule asks for (wait + warm-up + active per cycle); 0 for a window."""
        return 0 if self.step_source == "window" or self.trigger is not None else self._last_step()


def _optimizer_wrapper(frame):
    """The frame of torch's ``Optimizer.step`` wrapper (which holds the ``Optimizer.step#...`` range) above ``frame``."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "wrapper" and code.co_filename.replace("\\", "/").endswith("torch/optim/optimizer.py"):
            return frame
        frame = frame.f_back
    return None


def _device_mark():
    """A CUDA event recorded on the current stream now, or None when the process has not used CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _quiet_kineto():
    """Keep Kineto's "USDT: ... profiler_start/profiler_stop" lines (printed to stderr by torch's C++ on
    every recording, at a level above its errors, so only a level that hides those too silences them) off
    the terminal: KINETO_LOG_LEVEL=6 while recording, as the report kernels do (a recording that lost its
    GPU events is still named by perfkit's own "no GPU events" warning). Kineto reads it when it first
    records, during the script. A level the user set is kept. Returns the undo."""
    if "KINETO_LOG_LEVEL" in os.environ:
        return lambda: None
    os.environ["KINETO_LOG_LEVEL"] = "6"
    return lambda: os.environ.pop("KINETO_LOG_LEVEL", None)


def _import_torch():
    try:
        import torch  # heavy, optional: only a recording needs it
    except ImportError as exc:
        raise PerfkitError("torch is not installed in this environment: perfkit profile records with "
                           "torch.profiler; install torch (pip install torch) and run again") from exc
    return torch


def machine_now() -> dict:
    """How loaded the machine is as recording starts, for the trace's metadata (``trace.recorded``): the
    1-minute load average (None where the OS has none), the CPUs this process may run on and torch's
    intra-op thread count."""
    import torch  # heavy, optional: only a recording gets here

    return {"load_1min": load_average(), "cpus": available_cores(), "torch_threads": torch.get_num_threads()}
