"""What ``perfkit memory`` prints: per device the peak and what allocated it, memory at each step's end,
growth per step, the top allocating ops."""
from __future__ import annotations


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
