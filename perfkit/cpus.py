"""The CPUs this process may run on, and whether the machine is busier than they can serve.

One rule for every timing perfkit takes or judges: the machine is *busy* when its 1-minute load
average exceeds the CPUs this process may run on (more runnable tasks than CPUs: a timed step waited
for a CPU). ``perfkit profile`` withholds its overhead figure then, A/B timings warn, and the perf
log does not judge a live measurement taken then against another run.
"""
from __future__ import annotations

import os


def available_cores() -> int:
    """The CPUs this process may run on (its affinity where the OS has one, else all of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def load_average() -> float | None:
    """The machine's 1-minute load average; None where the OS has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def busy(load: float | None, cores: int) -> bool:
    """Whether ``load`` (a 1-minute load average; None: unknown) exceeds ``cores``."""
    return load is not None and load > cores
