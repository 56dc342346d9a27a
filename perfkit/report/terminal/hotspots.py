"""What ``perfkit hotspots`` prints: each thread's covered time, host time by Python function, the folded
stacks file."""
from __future__ import annotations


def format_hotspots(result, top: int = 25, collapsed: str | None = None) -> str:
    lines = []
    for t in result.threads.to_dict("records"):
        role = "main thread" if t["main"] else "thread"
        kind = "Python frames" if t["python"] else "host ops (no Python frames)"
        lines.append(f"{role} {t['thread']}: {t['covered_us'] / 1e3:,.3f} ms covered by {t['frames']:,} {kind} over "
                     f"{t['steps']} step(s); {t['waiting_us'] / 1e3:,.3f} ms in waiting primitives")
    lines += ["", f"{'self ms':>11}{'self %':>8}{'total ms':>11}{'calls':>8}{'ms/step':>10}  function (file:line)"]
    for r in result.top(top).to_dict("records"):
        where = f" ({r['file']}:{r['line']})" if r["file"] else ""
        wait = " [waiting]" if r["waiting"] else ""
        thread = f"  [thread {r['thread']}]" if len(result.threads) > 1 else ""
        lines.append(f"{r['self_us'] / 1e3:>11,.3f}{r['self_pct']:>8.1f}{r['total_us'] / 1e3:>11,.3f}{r['calls']:>8,}"
                     f"{r['per_step_us'] / 1e3:>10,.3f}  {r['function']}{where}{wait}{thread}")
    if len(result.table) > top:
        lines.append(f"... {len(result.table) - top} more functions (--top N or --json)")
    if collapsed:
        lines.append(f"\nfolded stacks: {collapsed} ({len(result.stacks):,} stacks; open in speedscope.app)")
    lines += [f"warning  {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"
