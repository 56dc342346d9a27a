"""What a script can do to the recording it runs under, watched so that no run is lost or misread in silence.

* ``os.fork``: the child inherits the recorder; it is detached there (:func:`watch_forks`), so a child's
  steps never step or write the parent's trace, and the parent counts the forks to say so.
* ``os.execv`` and the rest of the ``exec`` family (they all call ``os.execv``/``os.execve``): the new
  program replaces perfkit and its report, so the trace recorded until then is written first and one line
  says where (:func:`watch_exec`).
* Its own ``torch.profiler`` (or ``torch.autograd.profiler.profile``): one profiler per process, so
  perfkit's stops and the run says why (:func:`watch_profilers`).
* ``--seconds``: the window ends on a timer thread that asks the main thread to stop through
  ``Py_AddPendingCall`` (:func:`window_timer`), which a script's own ``SIGALRM`` handler cannot take over.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading

_FORK_WATCHERS: list = []  # (pid, on_fork_in_parent, on_child) of the recordings running now


def _before_fork() -> None:
    for pid, on_fork, _ in list(_FORK_WATCHERS):
        if os.getpid() == pid:
            on_fork()


def _after_in_child() -> None:
    watchers = list(_FORK_WATCHERS)
    _FORK_WATCHERS.clear()
    for _, _, on_child in watchers:
        on_child()


if hasattr(os, "register_at_fork"):  # registered once: os.register_at_fork has no undo
    os.register_at_fork(before=_before_fork, after_in_child=_after_in_child)


def watch_forks(on_fork, on_child):
    """Call ``on_fork()`` in this process before each fork and ``on_child()`` in each child; returns the undo."""
    entry = (os.getpid(), on_fork, on_child)
    _FORK_WATCHERS.append(entry)
    return lambda: entry in _FORK_WATCHERS and _FORK_WATCHERS.remove(entry)


def watch_exec(on_exec):
    """Call ``on_exec(program)`` in this process before the script replaces it with ``os.execv``/``os.execve``
    (a forked child's exec is its own); returns the undo."""
    pid, saved = os.getpid(), {name: getattr(os, name) for name in ("execv", "execve") if hasattr(os, name)}

    def watched(name):
        def exec_(path, *args):
            if os.getpid() == pid:
                on_exec(os.fsdecode(path) if isinstance(path, (str, bytes)) else str(path))
            return saved[name](path, *args)

        return exec_

    for name in saved:
        setattr(os, name, watched(name))
    return lambda: [setattr(os, name, original) for name, original in saved.items()]


def watch_profilers(torch, ours, on_foreign):
    """Call ``on_foreign(what)`` when the script starts a torch profiler other than ``ours()``; returns the undo."""
    from torch.autograd import profiler as autograd_profiler  # heavy, optional: torch

    patched = []
    for cls, method, what in ((torch.profiler.profile, "start", "torch.profiler.profile"),
                              (autograd_profiler.profile, "__enter__", "torch.autograd.profiler.profile")):
        original = cls.__dict__.get(method)
        if original is None:
            continue

        def watched(self, *args, _original=original, _what=what, **kwargs):
            if self is not ours():
                on_foreign(_what)
            return _original(self, *args, **kwargs)

        setattr(cls, method, watched)
        patched.append((cls, method, original))
    return lambda: [setattr(cls, method, original) for cls, method, original in patched]


_PENDING = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_CALLBACKS: list = []  # one small ctypes callback per --seconds recording in this process


def window_timer(seconds: float, stop):
    """Call ``stop()`` on the main thread after ``seconds``: a timer thread queues it with
    ``Py_AddPendingCall``, which the interpreter runs on the main thread between bytecodes (a script
    blocked in C code gets it when it comes back), whatever the script does with signals. Returns the undo."""
    done = threading.Event()

    def on_main(_arg) -> int:
        if not done.is_set():
            done.set()
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 (an exception here would surface in the script's code)
                print(f"perfkit profile: could not end the --seconds window: {exc}", file=sys.stderr)
        return 0

    callback = _PENDING(on_main)
    _CALLBACKS.append(callback)  # never freed: a call queued just before the undo may still run it

    def fire() -> None:
        if not done.wait(seconds):
            ctypes.pythonapi.Py_AddPendingCall(callback, None)

    timer = threading.Thread(target=fire, name="perfkit-window", daemon=True)
    timer.start()

    def undo() -> None:
        done.set()
        timer.join()

    return undo


def after_return(frame, call) -> bool:
    """Call ``call()`` once ``frame`` has returned (a one-off ``sys.setprofile`` hook, removed at that return):
    ``optimizer.step()``'s profiler steps are taken outside torch's ``Optimizer.step#...`` range, since a profiler
    cycle that ends inside an open ``record_function`` range crashed the process (torch 2.13, one-step cycles:
    5 of 5 runs). False, and nothing set, when another profile function is set (the script's own profiler)."""
    if sys.getprofile() is not None:
        return False

    def hook(current, event, _arg):
        if event == "return" and current is frame:
            sys.setprofile(None)
            call()

    sys.setprofile(hook)
    return True
