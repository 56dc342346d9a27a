"""How closely the replay reproduces the steps it was built from, on every GPU trace perfkit ships and every one in
../shared/traces/public: per trace, its full steps, the replay's error against each measured step (median, p90,
worst), the verdict the savings decide, the sentence every surface quotes (the top fix and the step it buys),
and the seconds ``whatif`` took (cached load excluded). The last row pools every step. Prints a Markdown table (docs/whatif.md quotes it).

    python benchmarks/replay_error.py [TRACE ...]
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from perfkit.analysis.step.whatif import whatif  # noqa: E402  (the checkout's perfkit, not an installed one)
from perfkit.trace import load_trace  # noqa: E402

SHARED = Path(os.environ.get("PERFKIT_SHARED", ROOT.parent / "shared")) / "traces" / "public"


def traces(args: list[str]) -> list[Path]:
    if args:
        return [Path(a) for a in args]
    return (sorted((ROOT / "data" / "traces" / "gpu").glob("*.json.gz")) + sorted(SHARED.glob("*.json.gz"))
            + [ROOT / "data" / "traces" / "ranks" / "ddp4_slow_dataloader"])


def main(args: list[str]) -> int:
    print("| trace | steps | error median | p90 | worst | verdict | prediction | whatif s |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    pooled = []
    for path in traces(args):
        trace = load_trace(path)
        t0 = time.perf_counter()
        w = whatif(trace)
        seconds = time.perf_counter() - t0
        steps = w.replay.steps
        if steps.empty:
            print(f"| {path.name} | 0 | | | | | not replayed: {w.rule} | {seconds:.2f} |")
            continue
        errors = steps["error"].abs().dropna().to_numpy()
        pooled.extend(errors)
        print(f"| {path.name} | {len(steps)} | {np.median(errors):.1%} | {np.quantile(errors, 0.9):.1%} | "
              f"{errors.max():.1%} | {w.verdict or '(share rules)'} | {w.prediction_text} | {seconds:.2f} |")
    if pooled:
        a = np.asarray(pooled)
        print(f"| all {len(a)} steps | {len(a)} | {np.median(a):.1%} | {np.quantile(a, 0.9):.1%} | {a.max():.1%} | "
              "| | |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
