"""Phase times of one perfkit load, for ``bench_load``'s child processes: :func:`install` wraps the
loader's stages so that each adds its wall seconds to :data:`PH`, except the CPU seconds of the gzip
inflate thread, of the parser's main thread and of its worker processes, which overlap in the
pipelined parse. A stage this perfkit lacks (a baseline checkout of another version) is skipped.
"""
from __future__ import annotations

import resource
import time

PH: dict[str, float] = {}
ORDER = ("pool_start", "parse", "inflate_cpu", "parse_main_cpu", "decode_workers_cpu", "assemble", "pairs",
         "steps", "cache_start", "nesting", "cache_finish", "cache_write", "cache_read")


def install() -> None:
    try:
        from perfkit.trace.loader import cache, columns, load, parse, stream
    except ImportError:  # a checkout from before the loader had its own package (issue 39.5)
        from perfkit.trace import cache, columns, load, parse, stream

    writer = getattr(cache, "Writer", None)
    for owner, name, key in ((parse, "process_pool", "pool_start"), (load, "parse_trace", "parse"),
                             (columns.ColumnBuilder, "frames", "assemble"), (load, "pair_durations", "pairs"),
                             (load, "file_steps", "steps"), (load, "add_nesting", "nesting"),
                             (writer, "start", "cache_start"), (writer, "finish", "cache_finish"),
                             (cache, "write", "cache_write"), (cache, "read", "cache_read")):
        _timed(owner, name, key)
    _timed(stream.ByteStream, "_inflate", "inflate_cpu", time.thread_time)
    _timed(parse._Parser, "run", "parse_main_cpu", time.thread_time)
    inner = load.parse_trace

    def parse_with_workers(*args, **kwargs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            return inner(*args, **kwargs)
        finally:  # the pool is shut down (its workers reaped) when parse_trace returns
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            PH["decode_workers_cpu"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    load.parse_trace = parse_with_workers


def _timed(owner, name: str, key: str, clock=time.perf_counter) -> None:
    inner = getattr(owner, name, None)
    if inner is None:
        return

    def timed(*args, **kwargs):
        start = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            PH[key] = PH.get(key, 0.0) + clock() - start

    setattr(owner, name, timed)
