"""Column building (``ColumnBuilder.add``) of this checkout against another git revision's, in one process.

The events of a ``load_sources`` source (one copy, not replicated) are written one a line, cut into
chunks of the loader's size and decoded once with msgspec; then both versions of
``perfkit/trace/loader/columns.py`` build columns from the same decoded chunks, alternating, and the
best CPU time of each is compared. The other revision's module is loaded from ``git show`` beside this
checkout's package, so both use this checkout's events, schema and value checks.

    python benchmarks/bench_columns.py [--base main] [--source flows] [--runs 8]
"""
from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
import types
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_sources import SOURCES, source  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)

import perfkit.trace.loader.columns as current  # noqa: E402
from perfkit.trace.loader.events import EVENTS  # noqa: E402
from perfkit.trace.loader.parse import CHUNK_BYTES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def revision_module(revision: str) -> types.ModuleType:
    """``perfkit/trace/loader/columns.py`` as of ``revision``, as a module of this checkout's package."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:perfkit/trace/loader/columns.py"],
                          capture_output=True, text=True, check=True).stdout
    module = types.ModuleType(f"perfkit.trace.loader.columns_{revision}")
    module.__package__ = "perfkit.trace.loader"
    exec(compile(text, f"columns@{revision}", "exec"), module.__dict__)
    return module


def chunks(trace: str) -> list[list]:
    """The source's events, one a line, in loader-sized chunks, decoded."""
    _, events = source(trace)
    out, part, size = [], [], 0
    for e in events:
        part.append(orjson.dumps(e))
        size += len(part[-1])
        if size >= CHUNK_BYTES:
            out.append(part)
            part, size = [], 0
    out.append(part)
    return [EVENTS.decode(b"[" + b",\n".join(p) + b"]") for p in out if p]


def best_cpu(builders: dict, batches: list[list], runs: int) -> dict[str, float]:
    """Best CPU seconds of each version building every chunk's columns, alternating runs."""
    best = dict.fromkeys(builders, float("inf"))
    collecting = gc.isenabled()
    gc.disable()  # as decode_chunk runs it
    try:
        for _ in range(runs):
            for name, module in builders.items():
                start = time.process_time()
                for batch in batches:
                    module.ColumnBuilder(file_id=0, rank=0).add(batch)
                best[name] = min(best[name], time.process_time() - start)
    finally:
        if collecting:
            gc.enable()
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="git revision to compare with (default: main)")
    ap.add_argument("--source", choices=sorted(SOURCES), default="flows")
    ap.add_argument("--runs", type=int, default=8)
    args = ap.parse_args(argv)
    batches = chunks(args.source)
    n = sum(map(len, batches))
    best = best_cpu({args.base: revision_module(args.base), "this checkout": current}, batches, args.runs)
    base, mine = best[args.base], best["this checkout"]
    print(f"{args.source}: {n:,} events in {len(batches)} chunks, best of {args.runs} alternating runs: "
          f"{args.base} {base / n * 1e9:.0f} ns an event, this checkout {mine / n * 1e9:.0f} ns an event "
          f"({mine / base:.3f}x, {mine / base - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
