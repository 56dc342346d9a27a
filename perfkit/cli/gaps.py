"""``perfkit gaps TRACE [--json]``: every GPU idle interval, why it happened and in which function."""
from __future__ import annotations

from ..analysis.step.gaps import gpu_gaps
from ..text import json_text
from ..trace import load_trace
from .parsers import add_gaps
from .paths import trace_arg


def register(subparsers) -> None:
    add_gaps(subparsers).set_defaults(func=run)


def run(args) -> int:
    result = gpu_gaps(load_trace(trace_arg(args.trace), use_cache=not args.no_cache))
    print(json_text(result.to_json()) if args.json else format_gaps(result, args.trace, args.top))
    return 0


def format_gaps(result, path, top: int = 10) -> str:
    if not result.has_gpu:
        return f"{path}: " + " ".join(result.warnings) + "\n"
    totals = result.totals
    idle = sum(v["dur_us"] for v in totals.values())
    steps = result.steps
    lines = [f"{len(result.gaps):,} gaps, {idle / 1e3:,.3f} ms GPU idle in {steps['wall_us'].sum() / 1e3:,.3f} ms of "
             f"{len(steps)} step(s) (GPU busy {steps['gpu_busy_us'].sum() / 1e3:,.3f} ms)", "",
             f"{'class':<14}{'gaps':>8}{'idle ms':>12}{'share':>8}"]
    for cls, v in sorted(totals.items(), key=lambda kv: -kv[1]["dur_us"]):
        lines.append(f"{cls:<14}{v['count']:>8,}{v['dur_us'] / 1e3:>12,.3f}{100 * v['share']:>7.1f}%")
    lines += ["", f"{'idle ms':>10}{'step':>6}  {'class':<13}function (file:line) [thread]"]
    for g in result.top(top).to_dict("records"):
        where = f" ({g['file']}:{g['line']})" if g["file"] else ""
        lines.append(f"{g['dur_us'] / 1e3:>10,.3f}{g['step']:>6}  {g['class']:<13}{g['function'] or '-'}{where} "
                     f"[{g['thread']}]")
    lines += [""] + [f"{f.severity:<8} {f.title}\n         fix: {f.fix}" for f in result.findings]
    lines += [f"warning  {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"
