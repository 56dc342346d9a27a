"""``perfkit critical-path TRACE [--json] [--annotation NAME]``: what bounds each step, by kind."""
from __future__ import annotations

from ..analysis.step.critical_path import critical_path, path_note
from ..analysis.step.diagnosis import verdict_line
from ..text import json_text
from ..trace import load_trace
from .parsers import add_critical_path
from .paths import trace_arg


def register(subparsers) -> None:
    add_critical_path(subparsers).set_defaults(func=run)


def run(args) -> int:
    trace = load_trace(trace_arg(args.trace), use_cache=not args.no_cache)
    result = critical_path(trace, annotation=args.annotation)
    line = verdict_line(trace)
    verdicts = line.pop("steps")
    data = dict(result.to_json(), diagnosis=line)
    for row in data["steps"]:  # each step's own verdict beside its path, and why they differ where they do
        row["verdict"] = verdicts.get((int(row["rank"]), int(row["step"])))
        row["why"] = path_note(row["bound_by"], row["verdict"]) if row["verdict"] else ""
    print(json_text(data) if args.json else format_critical_path(data))
    return 0


def format_critical_path(d: dict) -> str:
    kinds = list(d["total"]["by_kind"])
    lines = [f"{'step':>6}{'wall ms':>11}{'path ms':>11}" + "".join(f"{k:>11}" for k in kinds)
             + "  bound by   step verdict"]
    for r in d["steps"]:
        lines.append(f"{r['step']:>6}{r['wall_us'] / 1e3:>11,.3f}{r['path_us'] / 1e3:>11,.3f}"
                     + "".join(f"{r['by_kind'][k] / 1e3:>11,.3f}" for k in kinds)
                     + f"  {r['bound_by']:<10} {r.get('verdict') or '-'}" + (f": {r['why']}" if r.get("why") else ""))
    t = d["total"]
    if t["path_us"] > 0:
        share = ", ".join(f"{k} {100 * v / t['path_us']:.1f}%" for k, v in t["by_kind"].items() if v > 0)
        lines += ["", f"all steps: {t['path_us'] / 1e3:,.3f} ms of path in {t['wall_us'] / 1e3:,.3f} ms: {share}"]
    if "diagnosis" in d:
        lines.append(f"verdict: {d['diagnosis']['title']} (perfkit diagnose: the numbers and the fix)")
    lines += [f"warning  {w}" for w in d["warnings"]]
    return "\n".join(lines) + "\n"
