"""Speed of ``syncs()`` and of the host-event nesting it reads, on a large cached trace.

Builds a trace of at least --events events by replicating a real one (bench_load.build: timestamps
shifted, ids offset), loads it once (the first load parses and computes the ``parent``/``depth``/
``step`` columns), then in the same process:

* the baseline: the per-analysis re-nesting that perfkit ran before nesting moved into the trace
  model (the stack sweep of the old ``ops.nest``, kept here verbatim as the reference), once;
* the nesting step of the load alone (``nesting.add_nesting`` on the parsed table);
* ``trace.ancestry.nest`` today, which derives op/top/self time from the cached columns;
* ``load_trace`` from the cache and ``syncs()`` on it (the number users wait for: target < 2 s).

    python benchmarks/bench_syncs.py [--source TRACE] [--events 2000000]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import SHARED, SOURCES, LayoutWriter, build  # noqa: E402  (benchmarks/ is a folder of scripts)


def old_nest(events: pd.DataFrame) -> pd.DataFrame:
    """The re-nesting every analysis ran before (perfkit <= schema 1 ``ops.nest``): a stack sweep in
    (thread, start, -end) order that pops a parent whose end equals the next start."""
    starts = events["ts_us"].to_numpy(dtype=np.float64)
    ends = starts + events["dur_us"].to_numpy(dtype=np.float64)
    keys = events[["file_id", "pid", "tid"]].astype({"pid": str, "tid": str})
    threads = keys.groupby(["file_id", "pid", "tid"], sort=False).ngroup().to_numpy()
    order = np.lexsort((-ends, starts, threads))
    is_op = (events["cat"].astype(str).to_numpy() == "cpu_op") & ~events["name"].astype(str).str.startswith(
        "ProfilerStep#").to_numpy()
    parent = [-1] * len(starts)
    inner, outer, depth = [-1] * len(starts), [-1] * len(starts), [0] * len(starts)
    s, e, th, op = starts.tolist(), ends.tolist(), threads.tolist(), is_op.tolist()
    stack, current = [], None
    for i in order.tolist():
        if th[i] != current:
            stack.clear()
            current = th[i]
        while stack and e[stack[-1]] <= s[i]:
            stack.pop()
        if stack:
            p = stack[-1]
            parent[i], depth[i] = p, depth[p] + 1
            inner[i] = i if op[i] else inner[p]
            outer[i] = outer[p] if outer[p] >= 0 else (i if op[i] else -1)
        else:
            inner[i] = outer[i] = i if op[i] else -1
        stack.append(i)
    parent = np.asarray(parent)
    durs = events["dur_us"].to_numpy(dtype=np.float64)
    child = np.bincount(parent[parent >= 0], weights=durs[parent >= 0], minlength=len(parent))
    return pd.DataFrame({"parent": parent, "depth": depth, "self_us": np.clip(durs - child, 0, None)},
                        index=events.index)


def timed(fn, *args):
    """(result, (wall seconds, CPU seconds of this process)): CPU time stays meaningful on a shared machine."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, (time.perf_counter() - t0, time.process_time() - c0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", type=Path, default=SHARED / SOURCES["v100"])
    ap.add_argument("--events", type=int, default=2_000_000)
    args = ap.parse_args(argv)
    if not args.source.exists():
        print(f"{args.source}: not found; pass --source with a real Kineto trace", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="perfkit-bench-syncs-"))
    os.environ["PERFKIT_CACHE_DIR"] = str(work / "cache")
    from perfkit.analysis.host_ops import host_events
    from perfkit.trace.ancestry import nest
    from perfkit.analysis.sync_points.find import syncs
    from perfkit.trace import load_trace
    from perfkit.trace.nesting import add_nesting

    path = work / "rank-0.json"
    n = build(args.source, args.events, {"lines": LayoutWriter("lines", path, work / "rank-0.json.gz")})
    print(f"built {path.name}: {n:,} events from {args.source.name}")
    trace, first = timed(load_trace, path)
    host = host_events(trace)
    table = trace.events.drop(columns=["parent", "depth", "step"])
    _, nesting_s = timed(add_nesting, table, trace.steps.drop(columns="rank"))
    _, old_s = timed(old_nest, host)
    _, new_nest_s = timed(nest, host)
    cached, cached_s = timed(load_trace, path)
    result, syncs_s = timed(syncs, cached)
    rows = [("first load (parse + nesting + cache write)", first), ("  of which nesting at load", nesting_s),
            ("old re-nesting, once per analysis (baseline)", old_s), ("ancestry.nest from the cached columns", new_nest_s),
            ("cached load", cached_s), ("syncs() on the cached trace", syncs_s)]
    print(f"{len(host):,} host events; syncs: {result.headline()}\n")
    print(f"{'':46s} {'wall s':>8s} {'CPU s':>8s}")
    for label, (wall, cpu) in rows:
        print(f"{label:46s} {wall:8.3f} {cpu:8.3f}")
    print(f"\nnest (CPU time): {old_s[1] / new_nest_s[1]:.1f}x faster than the old re-nesting; nesting at load costs "
          f"{nesting_s[1] / old_s[1]:.2f}x one old re-nesting, once per file (then cached)")
    print(f"syncs on the cached trace: {syncs_s[0]:.2f} s wall, {syncs_s[1]:.2f} s CPU (target < 2 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
