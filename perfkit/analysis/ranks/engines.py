"""Engines that run one function over many trace files: ``"local"`` (this machine: in this
process, or a process pool) and ``"dask"`` (tasks on a ``dask.distributed`` cluster).

An engine maps a module-level function ``func(path, **kwargs)`` over paths and returns the
results in the order of the paths. Each call loads its file where it runs and returns a small
result, so memory is bounded by the number of files loaded at once (the pool size, or the Dask
workers' threads), not by the number of files. An error a call raises is raised here, unchanged
(``PerfkitError`` subclasses pickle with their fields).

The Dask engine needs ``dask[distributed]`` (imported only when used) and a scheduler address:
``scheduler=`` or the ``DASK_SCHEDULER_ADDRESS`` environment variable. Its workers must be able
to read the paths (a shared file system) and import perfkit.
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Sequence

from ...cpus import available_cores
from ...errors import MissingDependencyError, ParameterError
from ...processes import main_left_out, spawn_all_at_once
from ...trace.loader.workers import will_fork

ENGINES = ("local", "dask")
SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
# Seconds to wait for a Dask scheduler to answer before telling the user it is unreachable.
CONNECT_TIMEOUT_S = 10


def map_paths(func: Callable, paths: Sequence, *, engine: str = "local", workers: int | None = None,
              scheduler: str | None = None, progress: bool = False, **kwargs) -> list:
    """``[func(p, **kwargs) for p in paths]``, run by ``engine``.

    ``workers`` (local engine): processes to use; None = one per CPU core (at most one per path);
    1 runs every call in this process. ``scheduler`` (Dask engine): the scheduler's address, e.g.
    ``tcp://10.0.0.5:8786``; default ``$DASK_SCHEDULER_ADDRESS``. ``progress``: a tqdm bar over
    finished calls (local engine). Raises ParameterError for an unknown engine, a bad worker count
    or a missing/unreachable scheduler; MissingDependencyError when Dask is not installed.
    """
    if engine == "local":
        return _local(func, list(paths), _worker_count(workers, len(paths)), progress, kwargs)
    if engine == "dask":
        return _dask(func, list(paths), scheduler_address(scheduler), kwargs)
    raise ParameterError(f"unknown engine {engine!r}: use one of {', '.join(ENGINES)}")


def scheduler_address(scheduler: str | None) -> str:
    """The Dask scheduler address from ``scheduler`` or ``$DASK_SCHEDULER_ADDRESS``."""
    address = scheduler or os.environ.get(SCHEDULER_ENV, "")
    if not address:
        raise ParameterError(
            f"the dask engine needs a scheduler address: pass scheduler='tcp://HOST:8786' (CLI: --scheduler) or "
            f"set {SCHEDULER_ENV}; start one with `dask scheduler` and `dask worker ADDRESS` on each machine")
    return address


def _worker_count(workers: int | None, n_paths: int) -> int:
    if workers is None:
        return max(1, min(available_cores(), n_paths))
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ParameterError(f"workers must be a positive integer (processes), got {workers!r}")
    return min(workers, max(n_paths, 1))


def _local(func: Callable, paths: list, workers: int, progress: bool, kwargs: dict) -> list:
    bar = _bar(len(paths), progress)
    try:
        if workers == 1:
            return [_tick(bar, func(path, **kwargs)) for path in paths]
        return _pool(func, paths, workers, bar, kwargs)
    finally:
        if bar is not None:
            bar.close()


def _pool(func: Callable, paths: list, workers: int, bar, kwargs: dict) -> list:
    """Calls in a pool of ``workers`` processes, forked from this process while it runs one thread (a script:
    the workers then never run the script's ``__main__`` again, so a script without an ``if __name__ ==
    "__main__":`` guard works), else from a fork server that has imported ``func``'s module once (a threaded
    process such as a Jupyter kernel is not forked; workers start without re-importing pandas each)."""
    import multiprocessing

    if will_fork():
        context = multiprocessing.get_context("fork")
    else:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([func.__module__])
    out: list = [None] * len(paths)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        spawn_all_at_once(pool)
        with main_left_out():  # workers start at the submits, none of them from the caller's __main__
            futures = {pool.submit(func, path, **kwargs): i for i, path in enumerate(paths)}
        try:
            for future in as_completed(futures):
                out[futures[future]] = _tick(bar, future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return out


def _dask(func: Callable, paths: list, address: str, kwargs: dict) -> list:
    try:
        from distributed import Client
    except ImportError:
        raise MissingDependencyError("dask[distributed]", "the dask engine") from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ParameterError(f"cannot reach the Dask scheduler at {address!r} ({exc}); check the address "
                             f"(--scheduler / {SCHEDULER_ENV}) and that `dask scheduler` is running") from None
    with client:
        # pure=False: two calls on the same path are separate tasks (the file may have changed).
        futures = client.map(func, paths, pure=False, **kwargs)
        return client.gather(futures)


def _tick(bar, value):
    if bar is not None:
        bar.update(1)
    return value


def _bar(total: int, enabled: bool):
    if not enabled or total < 2:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="ranks", unit="file")
