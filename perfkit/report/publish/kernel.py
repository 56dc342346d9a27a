"""The kernel a report runs in: this interpreter's ipykernel, its console chatter kept out of the
user's terminal, figures drawn inline.

* ``kernel_manager_class()``: an nbclient kernel manager that starts ipykernel with *this*
  interpreter whatever the ``python3`` kernelspec found first says (a user-level spec can point
  at another Python, where perfkit or the right torch is missing), with its stdout/stderr sent
  to a log file instead of the terminal: ipykernel logs "running over TCP without encryption"
  at every start and "KeyboardInterrupt caught in kernel" when it is shut down, neither of which
  means anything to a person running reports. The runner shows the log's tail when a kernel dies.
* ``quiet_kernel_output(log)``: the context in which kernels write to ``log`` and get the inline
  matplotlib backend.
* ``kernel_warnings(kernel_name)``: a warning when the python3 kernelspec names another Python.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

_PYTHON_ALIASES = {"python", f"python{sys.version_info[0]}", "python%i.%i" % sys.version_info[:2]}
_LOG: list[Path] = []


def kernel_manager_class():
    """See the module docstring."""
    from jupyter_client.manager import AsyncKernelManager

    class ThisInterpreterKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            super().format_kernel_cmd(extra_arguments)
            return [sys.executable, "-m", "ipykernel_launcher", "-f",
                    os.path.realpath(self.connection_file)] + list(extra_arguments or [])

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if _LOG:
                sink = open(_LOG[-1], "ab")  # closed by the child's exit; the parent's copy below
                kw.setdefault("stdout", sink)
                kw.setdefault("stderr", sink)
                try:
                    return await super()._async_launch_kernel(kernel_cmd, **kw)
                finally:
                    sink.close()
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return ThisInterpreterKernelManager


@contextlib.contextmanager
def quiet_kernel_output(log: Path):
    """Kernels started inside write their console output to ``log``, draw figures inline (the
    kernel inherits MPLBACKEND; a non-inline value such as Agg in CI would drop every figure from
    the report) and keep the profiler's per-session log lines out of the report."""
    # Kineto prints "profiler_start"/"profiler_stop" lines on every profiling session of a live
    # notebook; level 6 silences them (a recording that lost its GPU events is still named by
    # perfkit's own "no GPU events" warning). A level the user set is kept.
    env = {"MPLBACKEND": "module://matplotlib_inline.backend_inline",
           "KINETO_LOG_LEVEL": os.environ.get("KINETO_LOG_LEVEL", "6")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    _LOG.append(log)
    try:
        yield
    finally:
        _LOG.pop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def kernel_warnings(kernel_name: str | None) -> list[str]:
    """A warning when the ``python3`` kernelspec starts another Python than this one (the
    runner uses this interpreter anyway)."""
    if kernel_name not in (None, "python3"):
        return []
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        argv = KernelSpecManager().get_kernel_spec("python3").argv
    except NoSuchKernel:
        return []
    exe = argv[0] if argv else ""
    if exe in _PYTHON_ALIASES or os.path.realpath(exe) == os.path.realpath(sys.executable):
        return []
    return [f"the python3 kernelspec starts {exe}; ran the notebook with {sys.executable} instead"]
