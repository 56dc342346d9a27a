"""``Recorder``: the PyTorch profiler on a schedule, stepped without changes to the user's code.

A step is found in one of three ways (``step_source``):

* ``optimizer``: one ``optimizer.step()``, seen through PyTorch's global post-hook
  (``torch.optim.optimizer.register_optimizer_step_post_hook``). With several optimizers only the
  first one that steps counts, so a GAN's two ``step()`` calls make one step.
* ``function``: one call of a function named ``module:qualname`` (``perfkit.workloads.mppi:MPPIWorkload.step``),
  wrapped for the duration of the recording.
* ``window``: no steps; the profiler records from the start for ``seconds`` (stopped by a
  ``SIGALRM`` timer on the main thread) or until the code ends.

The schedule is torch's (``wait``, ``warmup``, ``active``, ``repeat``): the trace holds one
``ProfilerStep#N`` span per active step, like a hand-written ``prof.step()`` loop. The time of each
step is kept so the profiler's own cost can be measured (profiled steps against wait steps): on the
host clock (``step_times_s``) and, once the script uses CUDA, on the GPU's clock (``device_step_times_s``:
a CUDA event recorded at each step boundary). A GPU-bound step's host time is the host issuing work
ahead of the GPU, not the step: an H200 transformer step read +56% on the host clock and -1% on the GPU's.
torch is imported only when recording starts.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from ..errors import ParameterError, PerfkitError
from ..limits import DUR_RANGE_US
from ..workloads.base import check_int
from ..workloads.record import export_gzipped_trace


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
                 metadata: dict | None = None, clock=time.perf_counter, script: str | None = None):
        for name, value, low in (("wait", wait, 0), ("warmup", warmup, 0), ("active", active, 1), ("repeat", repeat, 1)):
            check_int(name, value, low)
        if seconds is not None and not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
                                        and 0 < seconds <= MAX_WINDOW_S):
            raise ParameterError(f"seconds={seconds!r}: the window (--seconds) must be a number of seconds > 0 and "
                                 f"at most a week ({MAX_WINDOW_S:,.0f})")
        if step is not None and seconds is not None:
            raise ParameterError("pass --step or --seconds, not both: a window has no steps")
        if step is not None and ":" in str(step):
            _split(step)
        elif step is not None and not _QUALNAME.match(str(step)):
            raise ParameterError(f"--step {step!r}: name a function the script defines (plan, Planner.step) or "
                                 "one of a module as module:function (mymod:plan)")
        self.script = str(Path(script).resolve()) if script else None
        self.path = Path(path)
        self.schedule = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat}
        self.step, self.seconds, self.memory = step, seconds, memory
        self.metadata = dict(metadata or {})
        self.step_source = "window" if seconds is not None else "function" if step else "optimizer"
        self.clock = clock
        self.traces: list[Path] = []
        self.step_times_s: list[float] = []
        self._marks: list = []  # a CUDA event (or None) per step boundary: the end of that step on the GPU
        self.steps_seen = 0
        self.step_found = True  # False while a --step function the script defines is not defined yet
        self.warnings: list[str] = []
        self._undo: list = []
        self._prof = None
        self._last = None
        self._optimizer = None
        self._tagged = False

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        torch = _import_torch()
        self._prof = self._make_profiler(torch)
        if self.step_source == "function" and ":" not in self.step and self.script:
            self.step_found = False  # until the script defines it
            self._undo.append(_wrap_when_defined(self.step, self.script, self._on_step, self._on_found))
        elif self.step_source == "function":
            spec = self.step if ":" in self.step else f"__main__:{self.step}"
            self._undo.append(_wrap_function(spec, self._on_step))
        elif self.step_source == "optimizer":
            from torch.optim.optimizer import register_optimizer_step_post_hook  # heavy, optional: torch

            handle = register_optimizer_step_post_hook(self._on_optimizer_step)
            self._undo.append(handle.remove)
        self._undo.append(_quiet_kineto())
        self._prof.start()
        self._tag()
        if self.seconds is not None:
            self._undo.append(_alarm(self.seconds, self._stop))
        self._last = self.clock()
        return self

    def __exit__(self, *exc) -> bool:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        self._stop()
        return False

    # -- steps -----------------------------------------------------------------------------------
    def _on_found(self) -> None:
        self.step_found = True

    def _on_optimizer_step(self, optimizer, args, kwargs) -> None:
        if self._optimizer is None:
            self._optimizer = optimizer
        if optimizer is self._optimizer:
            self._on_step()

    def _on_step(self) -> None:
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

    def _last_step(self) -> int:
        s = self.schedule
        return s["wait"] + (s["warmup"] + s["active"]) * s["repeat"]

    def _tag(self) -> None:
        """Write what recorded the trace into its metadata, once the profiler records (Kineto drops
        metadata added while it waits)."""
        from torch.profiler import ProfilerAction  # heavy, optional: torch

        if self._tagged or self._prof.current_action not in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            return
        self._prof.add_metadata_json("perfkit_profile", json.dumps(
            {**self.metadata, "step_source": self.step_source, **self.schedule}))
        self._tagged = True

    def _stop(self, *_signal) -> None:
        prof, self._prof = self._prof, None
        if prof is not None:
            prof.stop()

    # -- profiler --------------------------------------------------------------------------------
    def _make_profiler(self, torch):
        from torch.profiler import ProfilerActivity, profile, schedule  # heavy, optional: torch

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():  # ROCm builds report their GPUs through the CUDA API too
            activities.append(ProfilerActivity.CUDA)
        sched = None
        if self.step_source != "window":
            s = self.schedule
            sched = schedule(wait=s["wait"], warmup=s["warmup"], active=s["active"], repeat=s["repeat"])
        return profile(activities=activities, schedule=sched, on_trace_ready=self._write,
                       with_stack=True, record_shapes=True, profile_memory=self.memory)

    def _write(self, prof) -> None:
        n = len(self.traces)
        path = self.path if n == 0 else self.path.with_name(
            self.path.name.replace(".pt.trace.json.gz", f"-cycle{n + 1}.pt.trace.json.gz"))
        self.traces.append(export_gzipped_trace(prof, path))

    @property
    def active_steps(self) -> list[int]:
        """Indices (into ``step_times_s``) of the complete steps that ended while the schedule recorded
        (the trace may also hold the step that was running when the code stopped, cut short)."""
        if self.step_source == "window":
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
        return 0 if self.step_source == "window" else self._last_step()


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


def _wrap_function(spec: str, on_step):
    """Replace the function named ``module:qualname`` by a wrapper that calls ``on_step`` after each
    call returns; returns the function that puts the original back."""
    owner, attr, original = resolve_function(spec)
    return _wrap_attr(owner, attr, original, on_step)


def _wrap_attr(owner, attr: str, original, on_step):
    """Replace ``owner.attr`` (a module's function or a class's method) by a wrapper that calls
    ``on_step`` after each call; returns the undo."""

    def step_wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        on_step()
        return result

    step_wrapper.__wrapped__ = original
    if not isinstance(owner, type):  # a module's function
        setattr(owner, attr, step_wrapper)
        return lambda: setattr(owner, attr, original)
    own = attr in owner.__dict__
    raw = owner.__dict__.get(attr)
    if isinstance(raw, classmethod):
        original = raw.__func__  # the wrapper is a classmethod too: it gets cls first
        setattr(owner, attr, classmethod(step_wrapper))
    else:
        setattr(owner, attr, staticmethod(step_wrapper) if isinstance(raw, staticmethod) else step_wrapper)
    return lambda: setattr(owner, attr, raw) if own else delattr(owner, attr)


_QUALNAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _wrap_when_defined(qualname: str, script: str, on_step, on_found):
    """Wrap a function the script itself defines (``plan``, ``Planner.step``): it does not exist
    until the script's ``def`` runs, so a profile hook watches the script's own calls until the name
    is bound in its globals, wraps it there (``_wrap_function``'s wrapper), calls ``on_found`` and
    removes itself. Calls from other files cost one comparison each meanwhile. Returns the undo."""
    state: dict = {"undo": None}
    top, *path = qualname.split(".")
    previous = sys.getprofile()

    def hook(frame, event, arg):
        if event != "call" or frame.f_code.co_filename != script or state["undo"] is not None:
            return
        owner = frame.f_globals
        if top not in owner:
            return
        target = owner[top]
        for part in path:
            target = getattr(target, part, None)
        if callable(target):
            state["undo"] = _wrap_in(owner, top, path, on_step)
            on_found()
            if sys.getprofile() is hook:
                sys.setprofile(previous)

    sys.setprofile(hook)

    def undo():
        if sys.getprofile() is hook:
            sys.setprofile(previous)
        if state["undo"] is not None:
            state["undo"]()

    return undo


def _wrap_in(module_globals: dict, top: str, path: list, on_step):
    """Wrap ``top.path...`` found in a module's globals dict; returns the undo."""
    if path:
        owner = module_globals[top]
        for part in path[:-1]:
            owner = getattr(owner, part)
        return _wrap_attr(owner, path[-1], getattr(owner, path[-1]), on_step)
    original = module_globals[top]

    def step_wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        on_step()
        return result

    step_wrapper.__wrapped__ = original
    module_globals[top] = step_wrapper
    return lambda: module_globals.__setitem__(top, original)


def resolve_function(spec: str):
    """(object holding it, attribute name, function) of ``"module:qualname"``.

    Raises ParameterError when the text has no ``module:`` part, the module does not import or the
    name is not a callable in it."""
    module_name, qualname = _split(spec)
    try:
        owner = importlib.import_module(module_name)
    except ImportError as exc:
        raise ParameterError(f"--step {spec!r}: module {module_name!r} does not import ({exc}); run from the "
                             "folder that holds it") from exc
    *path, attr = qualname.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            break
    function = getattr(owner, attr, None) if owner is not None else None
    if not callable(function):
        raise ParameterError(f"--step {spec!r}: {module_name} has no function {qualname!r}")
    return owner, attr, function


def _split(spec: str) -> tuple[str, str]:
    module_name, sep, qualname = str(spec).partition(":")
    if not sep or not module_name or not qualname:
        raise ParameterError(f"--step {spec!r}: name the function as module:function or "
                             "module:Class.method (e.g. mytrain:train_step)")
    return module_name, qualname


def _alarm(seconds: float, stop):
    """Call ``stop`` on the main thread after ``seconds`` (SIGALRM); returns the undo."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        raise ParameterError("--seconds needs the main thread of a Unix process (it uses SIGALRM)")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)

    def undo():
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    return undo
