"""Trace loading speed and memory: perfkit first load, perfkit cached load, json.load + DataFrame.

Builds a large trace by replicating a real one (timestamps shifted so copies follow each other, ids
offset so correlations stay unique) to at least --events events, then times each loader in a fresh
process (the load call only: each loader's imports come before the clock starts) and prints seconds,
peak RSS of the process and ratios against the baseline measured in the same run.

    python benchmarks/bench_load.py [--source TRACE] [--events 2000000] [--hta-python PATH]

``--hta-python`` names the python of a virtual environment with HolisticTraceAnalysis installed; its
``TraceAnalysis`` load (default JSON backend) of the same file is then timed too.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared/traces/public/hta_trace_diff__control__control.json.gz"

# (imports, timed load): imports happen before the clock starts, in every loader alike.
CHILD = {
    "perfkit first load": ("from perfkit.trace import load_trace", "t = load_trace(PATH); n = len(t.events)"),
    "perfkit cached load": ("from perfkit.trace import load_trace", "t = load_trace(PATH); n = len(t.events)"),
    "json.load + DataFrame": ("import json, pandas as pd",
                              "doc = json.load(open(PATH)); df = pd.DataFrame(doc['traceEvents']); n = len(df)"),
    "HTA TraceAnalysis": ("import os\nfrom hta.trace_analysis import TraceAnalysis",
                          "a = TraceAnalysis(trace_dir=os.path.dirname(PATH)); n = len(a.t.get_trace(0))"),
}


def build(source: Path, target: Path, min_events: int) -> int:
    doc = orjson.loads(gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes())
    events = doc.pop("traceEvents")
    stamped = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in stamped) - min(e["ts"] for e in stamped) + 1000
    copies = -(-min_events // len(events))
    written = 0
    with open(target, "wb") as out:
        out.write(orjson.dumps(doc)[:-1] + b',\n"traceEvents": [\n')
        for k in range(copies):
            for i, e in enumerate(events):
                if k and e.get("ph") == "M":
                    continue
                e = _shift(e, k, span)
                out.write((b",\n" if written else b"") + orjson.dumps(e))
                written += 1
        out.write(b"\n]}\n")
    return written


def _shift(e: dict, k: int, span: float) -> dict:
    if not k:
        return e
    e = dict(e)
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = e["ts"] + k * span
    if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
        e["id"] = e["id"] + k * 10_000_000
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id", "external id", "Python id", "Python parent id"):
            if isinstance(args.get(key), int):
                args[key] += k * 10_000_000
        e["args"] = args
    return e


def measure(python: str, label: str, path: Path, env: dict) -> dict:
    code = "\n".join([
        "import json, resource, time",
        f"PATH = {str(path)!r}",
        CHILD[label][0],
        "t0 = time.perf_counter()",
        CHILD[label][1],
        "dt = time.perf_counter() - t0",
        "print(json.dumps({'seconds': dt, 'rows': n, "
        "'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))",
    ])
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis installed")
    args = ap.parse_args(argv)
    if not args.source.exists():
        print(f"{args.source}: not found; pass --source with a real Kineto trace", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="perfkit-bench-"))
    path = work / "rank-0.json"
    n = build(args.source, path, args.events)
    print(f"built {path} ({n:,} events, {path.stat().st_size / 1e6:,.0f} MB) from {args.source.name}")
    env = dict(os.environ, PERFKIT_CACHE_DIR=str(work / "cache"))
    rows = {label: measure(sys.executable, label, path, env)
            for label in ("json.load + DataFrame", "perfkit first load", "perfkit cached load")}
    if args.hta_python:
        rows["HTA TraceAnalysis"] = measure(args.hta_python, "HTA TraceAnalysis", path, env)
    report(rows)
    return 0


def report(rows: dict) -> None:
    base = rows["json.load + DataFrame"]
    if "error" in base:
        print(f"baseline failed: {base['error']}")
        return
    first = rows["perfkit first load"]
    print(f"\n{'loader':24s} {'seconds':>9s} {'peak RSS MB':>12s} {'speed vs baseline':>18s} {'RSS vs baseline':>16s}")
    for label, r in rows.items():
        if "error" in r:
            print(f"{label:24s} failed: {r['error']}")
            continue
        print(f"{label:24s} {r['seconds']:9.2f} {r['peak_rss_mb']:12,.0f} "
              f"{base['seconds'] / r['seconds']:17.1f}x {r['peak_rss_mb'] / base['peak_rss_mb']:15.2f}x")
    if "error" not in first and "error" not in rows["perfkit cached load"]:
        print(f"\ncached load is {first['seconds'] / rows['perfkit cached load']['seconds']:.1f}x faster than the first load")
    hta = rows.get("HTA TraceAnalysis")
    if hta and "error" not in hta and "error" not in first:
        print(f"perfkit first load vs HTA: {hta['seconds'] / first['seconds']:.1f}x faster, "
              f"{first['peak_rss_mb'] / hta['peak_rss_mb']:.2f}x the peak memory")


if __name__ == "__main__":
    sys.exit(main())
