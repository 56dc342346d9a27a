"""Does the perf log cry wolf? Run `perfkit run` twice back to back, no code change, PAIRS times
(each pair into a fresh reports folder), and count the rows of each second run that say
"regressed" or "improved" (issue 11: none, in 5 of 5 pairs). Prints one line per pair and the
verdict counts; exit 1 when any pair raised a false alarm.

    .venv/bin/python benchmarks/bench_perflog_false_alarms.py [--pairs 5] [--names cpu_bound ...]
"""
from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def one_run(out: Path, names: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "perfkit", "run", *names, "--out", str(out), "--no-progress"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--names", nargs="*", default=[])
    args = p.parse_args(argv)
    from perfkit.report.perflog import PerfLog

    alarms = 0
    totals = collections.Counter()
    for pair in range(1, args.pairs + 1):
        with tempfile.TemporaryDirectory(prefix="perfkit-pair-") as tmp:
            out = Path(tmp) / "reports"
            t1, t2 = one_run(out, args.names), one_run(out, args.names)
            log = PerfLog(out / "perf_log.csv").read()
            second = log[log["run_id"].str.startswith(sorted({r.rsplit("/", 1)[0] for r in log["run_id"]})[-1])]
            counts = collections.Counter(second["verdict"])
            totals.update(counts)
            flagged = second[second["verdict"].isin(["regressed", "improved"])]
            alarms += bool(len(flagged))
            worst = ", ".join(f"{r.metric} {r.delta_pct:+.0f}% {r.verdict}" for r in flagged.itertuples())
            print(f"pair {pair}: runs {t1:.0f} s + {t2:.0f} s; second run: {dict(counts)}"
                  + (f"; FALSE ALARM: {worst}" if worst else ""), flush=True)
    print(f"{args.pairs - alarms} of {args.pairs} pairs without a false alarm; verdicts: {dict(totals)}")
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())
