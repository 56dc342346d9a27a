"""What does a perfkit callback cost a training step outside its recorded window?

Times the same tiny training step (a 256x256 linear layer, SGD, batch 64, on the CPU) three ways, interleaved
in rounds so that machine noise falls on all three alike: the bare loop; the step wrapped by ``perfkit.watch``
while its window waits (``wait`` larger than the run: every call goes through ``ProfileWindow.step`` and the
profiler's ``step()`` in its wait state); and after the window has ended (the recorder gone: one comparison per
call). The Lightning callback drives the same ``ProfileWindow.step`` from ``on_train_batch_end``. Prints the
median step time of each (microseconds, medians of the per-round medians) and the added time per step; then the
same three with an empty step function, where the added time is perfkit's alone, out of the step's noise.

    python benchmarks/bench_callback_overhead.py --rounds 7 --steps 400
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

import perfkit


def make_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)

    def train_step():
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return train_step


def timed(step, n: int) -> float:
    """Median time of one call of ``step`` over ``n`` calls (seconds)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def empty() -> None:
    pass


def compare(make, rounds: int, steps: int, out: str) -> dict:
    """Median over ``rounds`` of each way's median step time (us)."""
    results = {"bare": [], "waiting": [], "after": []}
    for r in range(rounds):
        waiting = perfkit.watch(make(), wait=10 ** 9, warmup=0, active=1, out=out, run=f"wait{r}")
        after = perfkit.watch(make(), wait=0, warmup=0, active=1, out=out, run=f"after{r}")
        after()
        after()  # the window (one step) has ended: the trace is written and diagnosed before timing
        for name, step in (("bare", make()), ("waiting", waiting), ("after", after)):
            step()  # warm
            results[name].append(timed(step, steps))
        waiting.close()
    return {k: statistics.median(v) * 1e6 for k, v in results.items()}


def show(what: str, med: dict, rounds: int, steps: int) -> None:
    print(f"{what}, median of {rounds} rounds x {steps} steps (us): " + ", ".join(f"{k} {v:,.2f}" for k, v in med.items()))
    for name in ("waiting", "after"):
        print(f"  {name}: +{med[name] - med['bare']:,.2f} us per step ({(med[name] / med['bare'] - 1) * 100:+.1f}%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = tempfile.mkdtemp(prefix="perfkit-overhead-")
    show("training step", compare(make_step, args.rounds, args.steps, out), args.rounds, args.steps)
    show("empty step", compare(lambda: empty, args.rounds, args.steps * 10, out), args.rounds, args.steps * 10)


if __name__ == "__main__":
    main()
