"""Which CPU memory reading sees torch tensors? Each method against a planted workload whose
memory is known analytically (a samples x horizon x dim float32 buffer, 2,048 bytes per sample).

Usage: ``.venv/bin/python benchmarks/bench_memsweep.py``. For every method it prints the bytes
it measured per sample, the ratio to the analytic 2,048 (the baseline, exact by construction)
and the predicted number of samples that fill 1 GiB (analytic: 524,288). Methods:

* ``profiler``: perfkit.bench.memsweep (torch profiler CPU allocator events), what perfkit uses;
* ``tracemalloc``: the Python allocator's peak (does not see c10's allocations);
* ``rss_high_water``: growth of the process's RSS high-water mark (getrusage) across the call;
* ``rss_sampled``: peak RSS sampled every 1 ms by perfkit's SystemMonitor, minus RSS before;
* ``rss_subprocess``: RSS growth in a fresh interpreter per size, read while the buffer is alive
  (the code must be importable there; ~2 s per size).
"""
from __future__ import annotations

import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HORIZON, DIM = 16, 32
SIZES = (4096, 8192, 16384, 32768, 65536)
GIB = 2**30
_CHILD = """
import sys, psutil, torch
torch.zeros(1).add_(1)
before = psutil.Process().memory_info().rss
plan = torch.zeros(int(sys.argv[1]), {h}, {d})
print(psutil.Process().memory_info().rss - before, float(plan.sum()))
"""


def planted(samples):
    import torch

    plan = torch.zeros(int(samples), HORIZON, DIM)
    return plan.sum()


def by_tracemalloc(size) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        planted(size)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def by_rss_high_water(size) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    planted(size)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024


def by_rss_sampled(size) -> int:
    import psutil

    from perfkit.bench.monitor import SystemMonitor

    before = psutil.Process().memory_info().rss
    with SystemMonitor(interval_s=0.001, gpu=False) as mon:
        planted(size)
    return max([r["rss_bytes"] for r in mon.result().rows] + [before]) - before


def by_rss_subprocess(size) -> int:
    code = _CHILD.format(h=HORIZON, d=DIM)
    out = subprocess.run([sys.executable, "-c", code, str(size)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def main() -> int:
    from perfkit.bench.memsweep import memory_sweep
    from perfkit.stats import fit_slope

    analytic = 4 * HORIZON * DIM
    sweep = memory_sweep(planted, SIZES, device="cpu", budget_bytes=GIB, python_heap=False)
    rows = {"profiler": [p.peak_bytes for p in sweep.points]}
    for name, fn in (("tracemalloc", by_tracemalloc), ("rss_high_water", by_rss_high_water),
                     ("rss_sampled", by_rss_sampled), ("rss_subprocess", by_rss_subprocess)):
        rows[name] = [fn(s) for s in SIZES]
    print(f"analytic: {analytic} bytes per sample; 1 GiB fills at {GIB / analytic:,.0f} samples")
    print(f"{'method':<16}{'bytes/sample':>14}{'ratio':>9}{'1 GiB at':>14}{'r2':>7}  peaks (bytes)")
    for name, peaks in rows.items():
        fit = fit_slope(SIZES, peaks)
        at = (GIB - fit.intercept) / fit.slope if fit.slope > 0 else float("inf")
        print(f"{name:<16}{fit.slope:>14,.1f}{fit.slope / analytic:>9.3f}{at:>14,.0f}{fit.r2:>7.3f}  {peaks}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
