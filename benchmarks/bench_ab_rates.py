"""How often does perfkit.bench.compare tell the truth on this machine?

Runs ``--trials`` A/A comparisons of identical work (goal: "no change" in >= 95%) and
``--trials`` comparisons where B does ``--slowdown`` more work (goal: "slower" in >= 95%),
all with compare()'s default knobs unless overridden, and prints both rates.

    .venv/bin/python benchmarks/bench_ab_rates.py            # ~2 minutes on 2 cores
    .venv/bin/python benchmarks/bench_ab_rates.py --work python --trials 20
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfkit.bench.compare import compare  # noqa: E402


def matmul_work(iterations: int, seed: int):
    """A zero-argument callable doing ``iterations`` small matmul+tanh steps (~25 us each)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(128, 128, generator=gen) / 128 ** 0.5

    def work():
        y = x
        for _ in range(iterations):
            y = torch.tanh(y @ x)
        return y

    return work


def python_work(iterations: int, seed: int):
    """A zero-argument callable doing a pure-Python busy loop of ``iterations`` x 100 adds."""
    start = seed % 7

    def work():
        total = start
        for i in range(iterations * 100):
            total += i
        return total

    return work


WORKS = {"matmul": matmul_work, "python": python_work}


def calibrate(make, target_ms: float, step: int = 20) -> int:
    """Iterations of ``make`` taking about ``target_ms`` per call, as a multiple of ``step`` so
    that a 15% (or any multiple-of-5%) slowdown is a whole number of iterations."""
    fn = make(step, 0)
    for _ in range(3):
        fn()
    times = []
    for _ in range(9):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    per_step_ms = statistics.median(times) * 1e3
    return step * max(1, round(target_ms / per_step_ms))


def run_trials(make, base: int, factor: float, trials: int, knobs: dict) -> collections.Counter:
    verdicts = collections.Counter()
    for trial in range(trials):
        a, b = make(base, 2 * trial), make(round(base * factor), 2 * trial + 1)
        verdicts[compare(a, b, seed=trial, **knobs).verdict] += 1
    return verdicts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--work", choices=sorted(WORKS), default="matmul")
    parser.add_argument("--work-ms", type=float, default=1.5, help="target milliseconds per call of A")
    parser.add_argument("--slowdown", type=float, default=0.15, help="extra work in B (0.15 = 15%%)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: on a shared 2-core box, 2 OpenMP threads make "
                             "samples bimodal whenever another process takes a core)")
    parser.add_argument("--min-time-s", type=float, default=None, help="override compare(min_time_s=)")
    parser.add_argument("--min-effect", type=float, default=None, help="override compare(min_effect=)")
    parser.add_argument("--unpaired", action="store_true", help="compare(paired=False): median(B)/median(A)")
    args = parser.parse_args(argv)
    knobs = {k: v for k, v in (("min_time_s", args.min_time_s), ("min_effect", args.min_effect)) if v is not None}
    if args.unpaired:
        knobs["paired"] = False
    make = WORKS[args.work]
    if args.work == "matmul":
        import torch

        torch.set_num_threads(args.threads)
    base = calibrate(make, args.work_ms)
    started = time.perf_counter()
    same = run_trials(make, base, 1.0, args.trials, knobs)
    slow = run_trials(make, base, 1.0 + args.slowdown, args.trials, knobs)
    print(f"work={args.work} iterations A={base} B={round(base * (1 + args.slowdown))} "
          f"(~{args.work_ms} ms/call for A) threads={args.threads} knobs={knobs or 'defaults'}")
    print(f"A/A      : 'no change' rate {same['no change'] / args.trials:.0%}  {dict(same)}")
    print(f"+{args.slowdown:.0%} work: 'slower' rate    {slow['slower'] / args.trials:.0%}  {dict(slow)}")
    print(f"elapsed {time.perf_counter() - started:.0f} s, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
