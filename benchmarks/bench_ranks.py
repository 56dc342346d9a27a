"""Cross-rank analysis at 8, 32 and 64 ranks: local engine (in one process, and a process pool)
against the Dask engine on a LocalCluster, and against loading every rank into one Trace.

Builds each job by replicating the 8 real DLRM ranks (``../shared/traces/public``): rank r is a
copy of DLRM rank r % 8 that claims rank r (``distributedInfo.rank``), with its profiled step
repeated ``--steps`` times (timestamps shifted by a span common to every rank, so the ranks stay
aligned; ``ProfilerStep#`` and correlation ids renumbered). Each measurement runs in a fresh
process with an empty trace cache (first loads: parse + reduce), timing the call only (imports
and the Dask cluster's start come before the clock) and sampling the peak RSS of the process and
its children (pool or Dask workers). Ratios are against "local, 1 process" of the same job.

    python benchmarks/bench_ranks.py [--ranks 8 32 64] [--steps 10] [--workers 2]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_sources import shift  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFKIT_SHARED", ROOT.parent / "shared"))
SOURCE = SHARED / "traces/public/param_v100_dlrm_rank{}.pt.trace.json.gz"
MODES = ("local, 1 process", "local, process pool", "dask LocalCluster", "load_trace(dir), one Trace")


def build(directory: Path, n_ranks: int, steps: int) -> int:
    """Write ``n_ranks`` rank files into ``directory``; returns the total number of events."""
    docs = [orjson.loads(gzip.decompress(Path(str(SOURCE).format(r)).read_bytes())) for r in range(8)]
    span = max(_extent(d["traceEvents"]) for d in docs) + 1000.0
    total = 0
    for r in range(n_ranks):
        doc = dict(docs[r % 8], distributedInfo=dict(docs[r % 8]["distributedInfo"], rank=r, world_size=n_ranks))
        events = [shift(e, k, span, renumber_steps=True) for k in range(steps) for e in doc["traceEvents"] if k == 0 or e.get("ph") != "M"]
        total += len(events)
        data = orjson.dumps(dict(doc, traceEvents=events))
        (directory / f"rank{r}.pt.trace.json.gz").write_bytes(gzip.compress(data, 1))
    return total


def _extent(events: list) -> float:
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    return max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed)


# --- one measurement, in a fresh process --------------------------------------------------------

def child(mode: str, directory: str, workers: int) -> dict:
    """Run one mode on one job directory; returns seconds, peak tree RSS (MB) and a result digest."""
    from perfkit.analysis.ranks.combine import ranks
    from perfkit.trace import load_trace

    cluster = None
    if mode == "dask LocalCluster":
        from distributed import LocalCluster
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    sampler = _PeakRSS()
    t0 = time.perf_counter()
    if mode == "load_trace(dir), one Trace":
        trace = load_trace(directory)
        digest, found = f"{len(trace.events)} events", "-"
    else:
        kw = {"engine": "dask", "scheduler": cluster.scheduler_address} if cluster else {
            "workers": 1 if mode == "local, 1 process" else workers}
        result = ranks(directory, **kw)
        digest = hashlib.sha1(json.dumps(result.to_json(), sort_keys=True).encode()).hexdigest()[:12]
        named = sorted(result.straggling_ranks["rank"])
        found = f"{len(named)} ({','.join(map(str, named[:3]))}{',...' if len(named) > 3 else ''})" if named else "none"
    seconds = time.perf_counter() - t0
    peak = sampler.stop()
    if cluster is not None:
        cluster.close()
    return {"seconds": seconds, "peak_rss_mb": peak / 2**20, "digest": digest, "stragglers": found}


class _PeakRSS:
    """Samples the RSS of this process plus its children every 20 ms; ``stop()`` returns the peak (bytes)."""

    def __init__(self):
        import psutil

        self._proc, self._peak, self._done = psutil.Process(), 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        import psutil

        while not self._done.is_set():
            try:
                procs = [self._proc] + self._proc.children(recursive=True)
                self._peak = max(self._peak, sum(p.memory_info().rss for p in procs))
            except psutil.Error:
                pass
            self._done.wait(0.02)

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self._peak


def measure(mode: str, directory: Path, workers: int, cache: Path) -> dict:
    env = dict(os.environ, PERFKIT_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, __file__, "--child", mode, str(directory), "--workers", str(workers)],
                          capture_output=True, text=True, env=env)
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 32, 64])
    ap.add_argument("--steps", type=int, default=10, help="profiled steps per rank (the DLRM step repeated)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="pool processes / Dask workers")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.workers)))
        return 0
    if not Path(str(SOURCE).format(0)).exists():
        print(f"{str(SOURCE).format(0)}: not found (the DLRM ranks live in ../shared/traces/public; "
              "set PERFKIT_SHARED to the shared folder)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="perfkit-bench-ranks-"))
    print(f"{os.cpu_count()} CPU cores; {args.workers} pool processes / Dask workers; {args.steps} steps per rank")
    for n in args.ranks:
        job = work / f"ranks{n}"
        job.mkdir()
        events = build(job, n, args.steps)
        size = sum(p.stat().st_size for p in job.iterdir()) / 1e6
        print(f"\n{n} ranks: {events:,} events in {size:,.1f} MB of .json.gz")
        rows = {mode: measure(mode, job, args.workers, work / f"cache-{n}-{i}") for i, mode in enumerate(MODES)}
        report(rows)
    return 0


def report(rows: dict) -> None:
    base = rows["local, 1 process"]
    print(f"{'mode':28s} {'seconds':>8s} {'peak RSS MB':>12s} {'speed vs 1 proc':>16s} {'RSS vs 1 proc':>14s}  "
          "stragglers      result digest")
    for mode, r in rows.items():
        if "error" in r:
            print(f"{mode:28s} failed: {r['error']}")
            continue
        ratio = (f"{base['seconds'] / r['seconds']:15.2f}x {r['peak_rss_mb'] / base['peak_rss_mb']:13.2f}x"
                 if "error" not in base else "")
        print(f"{mode:28s} {r['seconds']:8.2f} {r['peak_rss_mb']:12,.0f} {ratio}  {r['stragglers']:<14s}  "
              f"{r['digest']}")
    digests = {r["digest"] for m, r in rows.items() if "error" not in r and m != "load_trace(dir), one Trace"}
    print("engines agree (same result digest)" if len(digests) == 1 else f"ENGINES DISAGREE: {digests}")


if __name__ == "__main__":
    sys.exit(main())
