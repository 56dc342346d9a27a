"""What ``perfkit critical-path`` prints: each step's path by kind beside its verdict, the share of each kind
over all steps."""
from __future__ import annotations


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
