"""Does ``perfkit profile``'s recorder cost more than the profiler itself?

Times the same schedule (wait 5, warm-up 2, active 3, with_stack, record_shapes) over a reference
workload two ways, interleaved: a hand-written ``torch.profiler`` loop calling ``prof.step()``, and
perfkit's ``Recorder`` stepping from the optimizer post-hook. Prints the median wall time of each over
``--rounds`` rounds (trace export included in both) and their ratio.

    python benchmarks/bench_profile.py --rounds 5
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from perfkit.profiling.recorder import Recorder
from perfkit.workloads.record import export_gzipped_trace
from perfkit.workloads.registry import make_workload

WAIT, WARMUP, ACTIVE = 5, 2, 3


def by_hand(w, out: Path) -> float:
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
                 on_trace_ready=lambda p: export_gzipped_trace(p, out / "hand.pt.trace.json.gz"),
                 with_stack=True, record_shapes=True) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            w.step()
            prof.step()
    return time.perf_counter() - t0


def with_recorder(w, out: Path) -> float:
    t0 = time.perf_counter()
    with Recorder(out / "rec.pt.trace.json.gz", wait=WAIT, warmup=WARMUP, active=ACTIVE):
        for _ in range(WAIT + WARMUP + ACTIVE):
            w.step()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    # leaky only: one optimizer step per step(), so both loops profile the same steps (PPO takes several)
    ap.add_argument("--workload", default="leaky", choices=["leaky"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    w = make_workload(args.workload, "cpu")
    hand, rec = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            hand.append(by_hand(w, Path(tmp)))
            rec.append(with_recorder(w, Path(tmp)))
    h, r = statistics.median(hand), statistics.median(rec)
    print(f"{args.workload}: by hand {h * 1e3:.1f} ms, perfkit Recorder {r * 1e3:.1f} ms, ratio {r / h:.3f} "
          f"(median of {args.rounds} rounds, {WAIT + WARMUP + ACTIVE} steps each)")


if __name__ == "__main__":
    main()
