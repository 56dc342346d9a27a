"""What ``perfkit memory`` prints: per device the peak and what allocated it, memory at each step's end,
growth per step, what holds it (the blocks allocated in a step and never freed, by allocating line), the top
allocating ops."""
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
        lines += [f"  held       {_b(h['bytes']):>10} in {h['count']:>5} blocks never freed, allocated in {h['steps']} "
                  f"step(s) by {h['function']} ({h['op']})" for h in d.get("held_by", [])[:3]]
        lines += [f"  allocates  {_b(o['bytes']):>10} in {o['count']:>5} calls  {o['op']}" for o in d["top_ops"]]
    lines += [f"warning: {w}" for w in t["warnings"]]
    return "\n".join(lines)


def _b(n) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:,.0f} B"


def growth_lines(t: dict) -> list[str]:
    """What ``perfkit profile --memory`` adds to its summary, one line per device: the peak and whether memory
    held at step ends grows (a leak inside the trace, naming what holds it), or why it cannot say."""
    if not t["devices"]:
        return ["memory     no [memory] events were recorded"]
    lines = []
    for d in t["devices"]:
        ci, held = d["growth_ci"], d.get("held_by") or []
        if ci is None:
            growth = "too few steps to fit growth (3 or more: --active 3)"
        elif ci[0] > 0:
            growth = f"held at step ends grows {_b(d['growth_per_step_bytes'])}/step (95% CI {_b(ci[0])}..{_b(ci[1])}): a leak"
            growth += f", held by {held[0]['function']} ({held[0]['op']})" if held else ""
        else:
            growth = f"held at step ends does not grow ({_b(d['growth_per_step_bytes'])}/step, 95% CI {_b(ci[0])}..{_b(ci[1])})"
        lines.append(f"memory     {d['device']}: peak {_b(d['peak_bytes'])}; {growth}; details: perfkit memory TRACE")
    return lines
