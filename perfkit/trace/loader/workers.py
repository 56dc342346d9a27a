"""Worker processes for loading traces: how many, how they are started, and the memory they leave.

JSON decoding holds the GIL, so parallel parsing needs processes. Workers are forked when the
loading process has a single thread (fast: they share the already imported modules); otherwise
(a Jupyter kernel, a progress bar's monitor thread, a gzip reader) they come from a fork server
that imports the decoder once, since forking a threaded process can copy a lock some other
thread holds.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

import numpy as np

from ...errors import ParameterError
from ...cpus import available_cores
from ...processes import main_left_out, spawn_all_at_once


def release_freed_memory() -> None:
    """Give freed heap memory back to the operating system (glibc keeps it otherwise: the column
    arrays of many chunks, unpickled from worker processes, leave the heap fragmented, and RSS
    would stay at its peak for the rest of the load). A no-op where glibc is not the allocator."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _HugePageSwitch:
    """NumPy's huge-page switch, held off while any load runs (see :func:`small_pages`)."""

    def __init__(self):
        self.lock, self.users, self.before = threading.Lock(), 0, None
        self.switch = getattr(np._core.multiarray, "_set_madvise_hugepage", None)

    @contextmanager
    def off(self):
        with self.lock:
            if self.users == 0 and self.switch is not None:
                self.before = self.switch(False)
            self.users += 1
        try:
            yield
        finally:
            with self.lock:
                self.users -= 1
                if self.users == 0 and self.switch is not None:
                    self.switch(self.before)


_HUGE_PAGES = _HugePageSwitch()


def small_pages():
    """NumPy's arrays without transparent huge pages inside, as before outside.

    NumPy asks the kernel for huge pages for each array of 4 MB or more (``madvise``). Where the
    kernel then compacts memory at the page fault to find them (``transparent_hugepage/defrag`` set
    to ``madvise``, a common default) and memory is fragmented (a machine up for a while), a load's
    freshly allocated columns stall in the kernel: the V100 trace at 2 M events, one-line gzip,
    fresh process, 4 runs each, took 3.26-3.30 s with huge pages (0.93-1.09 CPU-s in the kernel)
    and 2.94-3.06 s without (0.65-0.71); its table assembly alone 0.12-0.31 s against 0.13 s. When
    huge pages come without compaction they save about 0.03 s of that assembly, so small pages
    lose little where huge pages are cheap and save up to 0.3 s where they are not. The switch is
    NumPy's private ``_set_madvise_hugepage`` (what ``NUMPY_MADVISE_HUGEPAGE`` sets); a NumPy
    without it is left as it is. Loads in several threads at once share one switch: the first to
    start turns it off, the last to end puts it back."""
    return _HUGE_PAGES.off()


def default_workers() -> int:
    """The cores this process may run on."""
    return available_cores()


def resolve_workers(workers: int | None) -> int:
    """``workers`` checked, or :func:`default_workers` for None; 1 inside a daemonic process (a
    Dask worker, a multiprocessing.Pool worker), which may not start processes of its own.
    Raises ParameterError below 1."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ParameterError(f"workers={workers!r}: expected a whole number of processes >= 1 (or None for one per core)")
    if multiprocessing.current_process().daemon:
        return 1
    return default_workers() if workers is None else workers


def will_fork() -> bool:
    """Whether :func:`process_pool` forks its workers from this process now (so they share memory
    mapped before the call)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes able to run :mod:`perfkit.trace` functions, started without the
    caller's ``__main__`` (``processes.main_left_out``: a script needs no main guard)."""
    with main_left_out():
        if will_fork():
            context = multiprocessing.get_context("fork")
        elif "forkserver" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["perfkit.trace.loader.load"])
        else:
            context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
        spawn_all_at_once(pool)
        pool.submit(os.getpid)  # starts every worker now, before the caller starts threads of its own
    return pool
