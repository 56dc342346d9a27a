"""Trace loading speed and memory in every layout: perfkit first load and cached re-open against
Holistic Trace Analysis's ``TraceAnalysis`` (or ``json.load`` + DataFrame without HTA).

Builds large traces by replicating real ones to at least --events events (see
``load_sources``: an A100 trace without stacks, a V100 ResNet-50 trace with shapes and call stacks,
a flow-heavy V100 trace shaped like issue 41's: 30% flow events, 13% memory instants, and that V100 training
trace itself, HTA's df_index_resolver), each in
three layouts (Kineto's pretty-printed multi-line events, one event a line, json.dump's single
line) and two compressions (plain, gzip). Each file's phase lines end with what decoding costs by
kind of event (``decode_costs``: the decoder in use, perfkit's C extension or msgspec, plus column
building, us an event, in this process on the file's first chunk), so that a slow kind shows. Each load
runs in a fresh process; every loader's time includes its imports (HTA's too: timed in the child, as a
user's ``python -c "import perfkit; perfkit.load_trace(...)"`` meets them, so that a cached re-open is
compared like for like, process start to tables in hand); perfkit's is split into phases
(imports, worker start, parse: gzip inflate, cutting and decoding overlapped, so their CPU seconds
are given apart; table assembly, steps, cache write started (the events and flows are written in a
thread while nesting is computed), nesting, cache write finished (the nesting columns written, the
thread waited for), or the cache read). Each file's floor is the
time to read it once: ``gzip -dc`` and ISA-L's ``igzip -dc`` into /dev/null (``cat`` for plain
files). Memory is the peak, sampled every 50 ms, of the summed proportional set size (PSS) of the
loading process and its worker processes. Children cache bytecode as a user's Python does
(``PYTHONDONTWRITEBYTECODE`` is dropped from their environment, perfkit compiled once first).

    python benchmarks/bench_load.py [--hta-python /tmp/hta-venv/bin/python | --hta-quoted 111.8,2478]
        [--events 2000000] [--traces a100 v100 flows resolver] [--layouts pretty lines compact]
        [--compressions plain gzip] [--workers 1 2] [--files TRACE...]

``--hta-python`` (or $PERFKIT_HTA_PYTHON) names the python of a virtual environment with
HolisticTraceAnalysis installed (``pip install HolisticTraceAnalysis``, outside this repository);
``--hta-quoted`` compares with figures measured before instead (HTA takes ~110 s a load); with
neither, ``json.load`` + ``pandas.DataFrame`` is the baseline. ``--workers 1 2`` makes one first
load per worker count (the first value is the one compared). ``--hta-once`` measures HTA on each
source's first file only (its pretty plain file by default) and compares the source's other files with
that measurement. Targets (issues 26 and 41): first load >= 30x faster than HTA and within 3x of the
file's floor, peak memory <= 1/4 of HTA's, cached re-open >= 300x faster than HTA, every layout's
first load within 1.2x of the fastest layout of the same events.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


import decode_costs  # beside this script (benchmarks/ is a folder of scripts, not a package)
import load_phases
from load_sources import LAYOUTS, SOURCES, LayoutWriter, build_source, source_files

ROOT = Path(__file__).resolve().parents[1]
COMPRESSIONS = ("plain", "gzip")
TARGETS = {"speed": 30.0, "memory": 0.25, "cached": 300.0, "layouts": 1.2}

# (imports, timed load). The imports are timed in the child and added to the wall time of every loader, perfkit's,
# HTA's and json's alike (a user's `python -c "import perfkit; perfkit.load_trace(...)"`, from process start
# until the tables are in hand: issue 52's like-for-like cached re-open); memory is sampled after them.
_TIMED = "import time\n_t = time.perf_counter()\n{}\nIMPORTS = time.perf_counter() - _t"
CHILD = {
    "perfkit": ("import time\n_t = time.perf_counter()\nimport perfkit\nfrom perfkit.trace import load_trace\n"
                "IMPORTS = time.perf_counter() - _t\nfrom load_phases import PH, install\ninstall()",
                "n = len(load_trace(PATH, workers=WORKERS).events)"),
    "json": (_TIMED.format("import gzip, json, pandas as pd"),
             "doc = json.load(gzip.open(PATH) if PATH.endswith('.gz') else open(PATH)); "
             "n = len(pd.DataFrame(doc['traceEvents']))"),
    "hta": (_TIMED.format("import os\nfrom hta.trace_analysis import TraceAnalysis"),
            "a = TraceAnalysis(trace_dir=os.path.dirname(PATH)); n = len(a.t.get_trace(next(iter(a.t.traces))))"),
}

def measure(python: str, loader: str, path: Path, env: dict, workers: int | None = None) -> dict:
    """Seconds, rows and peak memory of one load in a fresh process (perfkit: with its import time
    and phase times)."""
    code = "\n".join([
        "import json, resource, sys, time", f"PATH = {str(path)!r}", f"WORKERS = {workers!r}",
        f"sys.path.append({str(Path(__file__).resolve().parent)!r})", "IMPORTS, PH = 0.0, {}", CHILD[loader][0],
        "sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.readline()",
        "def cpu():",
        "    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))",
        "c0, t0 = cpu(), time.perf_counter()", CHILD[loader][1], "dt, dc = time.perf_counter() - t0, cpu() - c0",
        "print(json.dumps({'seconds': dt + IMPORTS, 'imports': IMPORTS, 'phases': PH, 'cpu_s': dc, 'rows': n, "
        "'main_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))",
    ])
    proc = subprocess.Popen([python, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    proc.stdout.readline()  # imports done: sample memory from here on
    sampler = TreeSampler(proc.pid)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    out, err = proc.communicate()
    peak = sampler.stop()
    if proc.returncode:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"}
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_mb"] = max(peak, result["main_rss_mb"])
    return result


class TreeSampler:
    """Peak of the summed PSS (MB) of a process and its descendants, sampled every 50 ms (light:
    /proc reads only, so that sampling takes little CPU from the loader it measures)."""

    def __init__(self, pid: int):
        self.root, self.peak, self.done = pid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, sum(_pss_mb(pid) for pid in _tree(self.root)))
            time.sleep(0.05)

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return self.peak


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux: /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as fh:
                    todo += [int(child) for child in fh.read().split()]
        except OSError:
            continue
    return out


def _pss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--traces", nargs="+", choices=sorted(SOURCES), default=list(SOURCES))
    ap.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=list(LAYOUTS))
    ap.add_argument("--compressions", nargs="+", choices=COMPRESSIONS, default=list(COMPRESSIONS))
    ap.add_argument("--hta-python", default=os.environ.get("PERFKIT_HTA_PYTHON"),
                    help="python of a venv with HolisticTraceAnalysis installed (default: $PERFKIT_HTA_PYTHON)")
    ap.add_argument("--workdir", type=Path, help="where to build the traces (default: a new temporary directory)")
    ap.add_argument("--files", type=Path, nargs="+",
                    help="measure these trace files (kept) instead of building the replicated ones")
    ap.add_argument("--workers", type=int, nargs="+", default=[None],
                    help="perfkit's worker processes; several values: one first load per value (default: one per core)")
    ap.add_argument("--hta-quoted", metavar="SECONDS,MB", type=_quoted,
                    help="compare with these HTA figures instead of running HTA (issue 26 quotes 111.8,2478: "
                         "the 2.16M-event V100 pretty .json.gz on a quiet 2-core machine)")
    ap.add_argument("--hta-once", action="store_true",
                    help="measure the baseline on each source's first file only and compare its other files with that "
                         "(the same events; an HTA load takes ~100 s)")
    args = ap.parse_args(argv)
    args.bases = {}  # source -> its baseline measured once (--hta-once)
    missing = [p for t in args.traces for p in source_files(t) if not p.exists()]
    if missing:
        print(f"{missing[0]}: not found; set PERFKIT_SHARED to the folder holding traces/public", file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="perfkit-bench-"))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; "
          f"HTA: {_hta_source(args)}")
    rows, env = [], user_env()
    for path in args.files or []:
        rows.append(run_file(path, args, work, env))
    spawn = multiprocessing.get_context("spawn")  # builds in a child: this process stays small, and
    for trace in [] if args.files else args.traces:  # the loaders it starts do not inherit its peak RSS (Linux ru_maxrss does)
        with ProcessPoolExecutor(1, mp_context=spawn) as builder:
            paths = builder.submit(build_files, work, trace, args).result()
        os.sync()  # else the kernel writes the GBs just built back to disk during the first rows' loads
        for path in paths:
            rows.append(run_file(path, args, work, env))
            os.remove(path)  # the disk holds one trace's layouts at a time
    report(rows, hta=bool(args.hta_python or args.hta_quoted))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


def build_files(work: Path, trace: str, args) -> list[Path]:
    writers = {}
    for layout in args.layouts:
        paths = [work / f"{trace}-{layout}-{c}" / f"rank-0.json{'.gz' if c == 'gzip' else ''}" for c in COMPRESSIONS]
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
        writers[layout] = LayoutWriter(layout, *paths)
    n = build_source(trace, args.events, writers)
    paths = [work / f"{trace}-{layout}-{c}" / f"rank-0.json{'.gz' if c == 'gzip' else ''}"
             for layout in args.layouts for c in COMPRESSIONS]
    for p in paths:
        print(f"built {p.relative_to(work)}: {n:,} events, {p.stat().st_size / 1e6:,.0f} MB")
    keep = [p for p in paths if ("gzip" if p.suffix == ".gz" else "plain") in args.compressions]
    for p in set(paths) - set(keep):
        os.remove(p)
    return keep


def _quoted(text: str) -> dict:
    seconds, mb = (float(x) for x in text.split(","))
    return {"seconds": seconds, "peak_mb": mb, "cpu_s": float("nan"), "quoted": True}


def _hta_source(args) -> str:
    if args.hta_quoted:
        return f"not run: its quoted figures {args.hta_quoted['seconds']} s, {args.hta_quoted['peak_mb']:,.0f} MB"
    return f"measured with {args.hta_python}" if args.hta_python else "not measured (pass --hta-python)"


def user_env(**extra) -> dict:
    """The children's environment: this one, less PYTHONDONTWRITEBYTECODE (set in some sandboxes
    and CI images: every child would compile perfkit's modules from source, 0.05-0.3 s a process
    that a user's Python, which caches bytecode, does not pay), with perfkit's bytecode written
    before any child is timed. Call it once per run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "perfkit")], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return dict(env, **extra)


def run_file(path: Path, args, work: Path, env: dict) -> dict:
    """One row: ``path``'s floors, first loads and cached re-open, children in ``env`` (``user_env()``)."""
    cache = work / "cache" / path.parent.name
    env = dict(env, PERFKIT_CACHE_DIR=str(cache))
    row = {"file": path.parent.name, "MB": path.stat().st_size / 1e6, "load": os.getloadavg()[0]}
    row["floor"] = floors(path)
    row["kinds"] = decode_costs.by_kind(path)
    for workers in args.workers:
        shutil.rmtree(cache, ignore_errors=True)  # every first load parses
        row[f"first{'' if workers is None else workers}"] = measure(sys.executable, "perfkit", path, env, workers)
    row["first"] = row[f"first{'' if args.workers[0] is None else args.workers[0]}"]
    row["cached"] = measure(sys.executable, "perfkit", path, env)
    source = row["file"].split("-")[0]
    if args.hta_quoted:
        row["base"] = args.hta_quoted
    elif args.hta_once and source in args.bases:
        row["base"] = dict(args.bases[source], reused=True)
    else:
        row["base"] = measure(args.hta_python, "hta", path, env) if args.hta_python else \
            measure(sys.executable, "json", path, env)
        args.bases.setdefault(source, row["base"])
    print(_line(row), flush=True)
    print(_phase_lines(row), flush=True)
    return row


def floors(path: Path) -> dict:
    """Wall seconds to read the file once: ``gzip -dc`` and ISA-L's ``igzip -dc`` (python-isal's
    command line) for gzip, ``cat`` for plain files; output to /dev/null."""
    commands = {"cat": ["cat", str(path)]} if path.suffix != ".gz" else {
        "gzip -dc": ["gzip", "-dc", str(path)], "igzip -dc": [sys.executable, "-m", "isal.igzip", "-dc", str(path)]}
    out = {}
    for name, command in commands.items():
        t0 = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
        out[name] = time.perf_counter() - t0
    return out


def _phase_lines(row: dict) -> str:
    lines = ["    floor: " + ", ".join(f"{k} {v:.2f} s" for k, v in row["floor"].items())]
    for key in [k for k in row if k.startswith("first") and k != "first"] or ["first"]:
        r = row[key]
        if "error" not in r:
            ph = r["phases"]
            lines.append(f"    {key}: {r['seconds']:.2f} s, {r['cpu_s']:.1f} CPU-s, {r['peak_mb']:,.0f} MB; "
                         f"imports {r['imports']:.2f} s, " + ", ".join(
                f"{k} {ph[k]:.2f}" for k in load_phases.ORDER if k in ph))
    if "error" not in row["cached"]:
        lines.append(f"    cached: {row['cached']['seconds']:.2f} s; imports {row['cached']['imports']:.2f} s, read "
                     f"{row['cached']['phases'].get('cache_read', float('nan')):.2f} s")
    lines.append(decode_costs.line(row["kinds"]))
    return "\n".join(lines)


def _line(row: dict) -> str:
    cells = [f"{row['file']:22s} {row['MB']:7,.0f} {row['load']:5.1f}"]
    for key in ("first", "cached", "base"):
        r = row[key]
        cpu = "quoted" if r.get("quoted") else "reused" if r.get("reused") else f"{r.get('cpu_s', 0):5.1f}c"
        cells.append(f"{'failed':>24s}" if "error" in r else f"{r['seconds']:7.2f}s {cpu:>6s} {r['peak_mb']:6,.0f}MB")
    first, cached, base = row["first"], row["cached"], row["base"]
    if not any("error" in r for r in (first, cached, base)):
        cells.append(f"{base['seconds'] / first['seconds']:6.1f}x {first['peak_mb'] / base['peak_mb']:5.2f}x "
                     f"{base['seconds'] / cached['seconds']:7.0f}x")
    return " ".join(cells)


def report(rows: list[dict], hta: bool) -> None:
    base = "HTA TraceAnalysis" if hta else "json.load + DataFrame (HTA not measured)"
    print(f"\nbaseline: {base}; each loader: wall seconds from its imports to the tables (imports included on "
          "every side), CPU seconds (all its processes), peak memory (summed PSS of its processes); load: the "
          "machine's 1-minute load average before the row")
    print(f"{'file':22s} {'MB':>7s} {'load':>5s} {'perfkit first':>24s} {'perfkit cached':>24s} {'baseline':>24s} "
          f"{'speed':>7s} {'mem':>6s} {'cached':>8s}")
    for row in rows:
        print(_line(row))
    for row in rows:
        for key in ("first", "cached", "base"):
            if "error" in row[key]:
                print(f"{row['file']} {key}: failed: {row[key]['error']}")
    if hta:
        _verdict(rows)


def _verdict(rows: list[dict]) -> None:
    ok = [r for r in rows if not any("error" in r[k] for k in ("first", "cached", "base"))]
    if not ok:
        return
    speed = min(r["base"]["seconds"] / r["first"]["seconds"] for r in ok)
    memory = max(r["first"]["peak_mb"] / r["base"]["peak_mb"] for r in ok)
    cached = min(r["base"]["seconds"] / r["cached"]["seconds"] for r in ok)
    print(f"\nworst case over {len(ok)} files: first load {speed:.1f}x faster than HTA (target >= {TARGETS['speed']:.0f}x), "
          f"{memory:.2f}x its peak memory (target <= {TARGETS['memory']}), cached re-open {cached:.0f}x faster "
          f"(target >= {TARGETS['cached']:.0f}x)")
    for source in dict.fromkeys(r["file"].split("-")[0] for r in ok):
        times = {r["file"]: r["first"]["seconds"] for r in ok if r["file"].split("-")[0] == source}
        slowest = max(times, key=times.get)
        print(f"{source}: slowest layout {slowest} {times[slowest] / min(times.values()):.2f}x the fastest "
              f"(target <= {TARGETS['layouts']})")


if __name__ == "__main__":
    sys.exit(main())
