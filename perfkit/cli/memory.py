"""``perfkit memory TRACE... [--json]``: memory over time per device from a trace recorded with
``profile_memory=True`` (``perfkit profile --memory``): peak and what allocated it, memory held at
each step's end and its growth per step, the top allocating ops. Of several traces (the README's
``traces/train-*.pt.trace.json.gz`` once there are two runs) the newest is read, and said on stderr."""
from __future__ import annotations

import os
import sys

from ..analysis.memory import memory_timeline
from ..text import json_text, printable, printable_data
from ..trace import load_trace
from .parsers import add_memory
from .paths import trace_arg


def register(subparsers) -> None:
    add_memory(subparsers).set_defaults(func=run)


def run(args) -> int:
    path = newest([trace_arg(p) for p in args.traces])
    if len(args.traces) > 1:
        print(f"perfkit memory: {len(args.traces)} traces given; reading the newest, {printable(path)}",
              file=sys.stderr)
    timeline = memory_timeline(load_trace(path, progress=sys.stderr.isatty()), top=args.top)
    print(json_text(timeline.to_json(), indent=2) if args.json else format_timeline(printable_data(timeline.to_json())))
    return 0


def newest(paths: list[str]) -> str:
    """The most recently modified of ``paths`` (a pattern such as ``traces/train-*.pt.trace.json.gz``
    expands to every run's trace, oldest name first only by chance); one that cannot be read sorts first,
    so its loader error shows only when nothing else is readable."""
    def modified(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return float("-inf")

    return max(paths, key=modified)


def format_timeline(t: dict) -> str:
    lines = []
    for d in t["devices"]:
        ci = d["growth_ci"]
        growth = "-" if d["growth_per_step_bytes"] is None else f"{_b(d['growth_per_step_bytes'])}/step" + (
            f" (95% CI {_b(ci[0])}..{_b(ci[1])})" if ci else "")
        lines += [f"{d['device']} (rank {d['rank']})",
                  f"  peak       {_b(d['peak_bytes'])} allocated in step {d['peak_step']} by {d['peak_op'] or '-'}"
                  f" in {d['peak_function'] or '-'}; reserved peak {_b(d['peak_reserved_bytes'])}",
                  f"  step ends  {', '.join(_b(v) for v in d['end_of_step_bytes']) or '-'}",
                  f"  growth     {growth}"]
        lines += [f"  allocates  {_b(o['bytes']):>10} in {o['count']:>5} calls  {o['op']}" for o in d["top_ops"]]
    lines += [f"warning: {w}" for w in t["warnings"]]
    return "\n".join(lines)


def _b(n) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"
