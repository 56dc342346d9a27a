"""How reliable are leak-hunt verdicts? Run each leaky-trainer variant N times and count.

    .venv/bin/python benchmarks/bench_leak_verdicts.py --repeats 10 --steps 300

Every run builds a fresh trainer in this process (fresh processes are not needed: the hunt
freezes pre-existing objects and measures growth only). Prints one row per variant with the
verdict counts, the series that decided most often, the median growth per 1,000 steps of
that series and the median wall time of one hunt.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter

from perfkit.bench.leak import hunt_leak
from perfkit.workloads import leaky

VERDICTS = ("leak", "no leak", "inconclusive")


def run_variant(config, repeats: int, steps: int, device: str) -> dict:
    verdicts, deciders, growth, wall = Counter(), Counter(), [], []
    for _ in range(repeats):
        trainer = leaky.make(config, device=device)
        result = hunt_leak(trainer.step, steps=steps, device=device)
        trainer.close()
        verdicts[result.verdict] += 1
        deciders[result.decided_by] += 1
        growth.append(result.per_1000)
        wall.append(result.elapsed_s)
    decider = deciders.most_common(1)[0][0]
    return {"verdicts": verdicts, "decided_by": decider, "growth": statistics.median(growth),
            "wall_s": statistics.median(wall)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    expected = {name: ("no leak" if name == "clean" else "leak") for name in leaky.variants()}
    header = f"{'variant':<22}" + "".join(f"{v:>14}" for v in VERDICTS)
    print(f"{header}  {'decided by':<20}{'median growth/1000 steps':>26}{'hunt s':>8}  expected")
    for name, config in leaky.variants().items():
        row = run_variant(config, args.repeats, args.steps, args.device)
        counts = "".join(f"{row['verdicts'][v]:>14}" for v in VERDICTS)
        print(f"{name:<22}{counts}  {row['decided_by']:<20}{row['growth']:>26,.0f}{row['wall_s']:>8.2f}"
              f"  {expected[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
