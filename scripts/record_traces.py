"""Regenerate the reference traces: one gzipped profiler trace per workload variant.

    .venv/bin/python scripts/record_traces.py                      # -> data/traces/cpu/
    .venv/bin/python scripts/record_traces.py --device cuda        # -> data/traces/gpu/

Writes ``<out>/<workload>_<variant>.json.gz`` for every variant (each pathology and its fix)
of every workload in ``perfkit.workloads.registry.WORKLOADS`` whose module is present, and
``<out>/MANIFEST.json`` (file, workload, variant, config, torch version, device, date, event
counts, bytes). Fails (exit 1, no manifest written) when a trace is larger than ``--max-mb``.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfkit.errors import ParameterError, PerfkitError  # noqa: E402
from perfkit.workloads.record import record_trace, trace_event_counts  # noqa: E402
from perfkit.workloads.registry import (  # noqa: E402
    WORKLOADS, available_workloads, make_workload, workload_variants,
)

MANIFEST_FORMAT_VERSION = 1
TOTAL_AIM_MB = 6.0


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    p.add_argument("--out", type=Path, help="output folder (default data/traces/cpu or data/traces/gpu)")
    p.add_argument("--steps", type=int, default=3, help="profiled (active) steps per trace")
    p.add_argument("--warmup", type=int, default=1, help="profiler warm-up steps per trace")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: tiny ops are dominated by thread "
                        "wake-ups otherwise; 0 keeps torch's default)")
    p.add_argument("--max-mb", type=float, default=2.0, help="fail when one trace is larger (MB)")
    p.add_argument("--only", nargs="*", default=None, help="workload names to record (default all)")
    return p.parse_args(argv)


def record_one(name: str, variant: str, args, out: Path) -> dict:
    workload = make_workload(name, device=args.device, variant=variant)
    path = out / f"{name}_{variant}.json.gz"
    try:
        record_trace(workload, path, steps=args.steps, warmup=args.warmup)
    finally:
        workload.close()
    import torch

    return {
        "file": path.name,
        "workload": name,
        "variant": variant,
        "config": dataclasses.asdict(workload.config),
        "notes": list(getattr(workload, "notes", [])),
        "torch_version": torch.__version__,
        "device": str(workload.device),
        "threads": torch.get_num_threads(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "steps": args.steps,
        "bytes": path.stat().st_size,
        **trace_event_counts(path),
    }


def record_all(names: list[str], args, out: Path) -> list[dict]:
    """Record every variant of every workload in ``names``; returns the manifest entries."""
    entries = []
    for name in names:
        for variant in workload_variants(name):
            entry = record_one(name, variant, args, out)
            entries.append(entry)
            print(f"{entry['file']}: {entry['bytes'] / 1e6:.2f} MB, {entry['events']} events, "
                  f"{entry['profiler_steps']} profiler steps")
    return entries


def write_json_atomic(path: Path, data) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def merge_manifest(out: Path, entries: list[dict], recorded: list[str]) -> list[dict]:
    """This run's entries plus the previous manifest's entries of workloads not recorded now
    (so ``--only`` refreshes some workloads without dropping the others). Traces of recorded
    workloads that the previous manifest listed and this run did not regenerate are deleted."""
    old = out / "MANIFEST.json"
    previous = json.loads(old.read_text()).get("files", []) if old.exists() else []
    fresh = {e["file"] for e in entries}
    kept = []
    for entry in previous:
        if entry["workload"] not in recorded:
            kept.append(entry)
        elif entry["file"] not in fresh and (out / entry["file"]).exists():
            print(f"removing stale {out / entry['file']}")
            (out / entry["file"]).unlink()
    return kept + entries


def select_workloads(only: list[str] | None) -> tuple[list[str], list[str]]:
    """(workloads to record, listed workloads whose module is missing from this checkout)."""
    names = only or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise ParameterError(f"--only {' '.join(unknown)}: valid workloads are {', '.join(WORKLOADS)}")
    present = set(available_workloads())
    skipped = [n for n in names if n not in present]
    for name in skipped:
        print(f"WARNING: workload {name!r} skipped: {WORKLOADS[name]} not found", file=sys.stderr)
    return [n for n in names if n in present], skipped


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    out = args.out or ROOT / "data" / "traces" / ("cpu" if args.device == "cpu" else "gpu")
    out.mkdir(parents=True, exist_ok=True)
    recorded, skipped = select_workloads(args.only)
    entries = record_all(recorded, args, out)
    too_big = [f"{e['file']} ({e['bytes'] / 1e6:.2f} MB)" for e in entries if e["bytes"] / 1e6 > args.max_mb]
    if too_big:
        print(f"FAILED: traces over {args.max_mb} MB: {', '.join(too_big)}; lower --steps or the "
              "workload sizes. Files left for inspection; MANIFEST.json not written.", file=sys.stderr)
        return 1
    files = merge_manifest(out, entries, recorded)
    total = sum(e["bytes"] for e in files) / 1e6
    print(f"{len(entries)} traces recorded; {len(files)} traces, {total:.2f} MB in {out}")
    if total > TOTAL_AIM_MB:
        print(f"WARNING: total {total:.2f} MB exceeds the {TOTAL_AIM_MB} MB aim", file=sys.stderr)
    write_json_atomic(out / "MANIFEST.json", {
        "format_version": MANIFEST_FORMAT_VERSION,
        "generated_by": " ".join(["scripts/record_traces.py", *(sys.argv[1:] if argv is None else argv)]),
        "skipped": skipped,
        "files": files,
    })
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PerfkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
