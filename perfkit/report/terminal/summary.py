"""What ``perfkit summary`` prints: a trace's whole-file counts, one line per topic."""
from __future__ import annotations

from ...analysis.compile import regions_note


def format_summary(s: dict) -> str:
    lines = [f"trace      {s['trace']}", f"ranks      {s['ranks']}", f"devices    {_devices(s['devices'])}",
             f"verdict    {s['diagnosis']['title']} (perfkit diagnose)",
             f"           {s['diagnosis']['prediction']['sentence']} (perfkit whatif)",
             f"events     {s['events']['total']:,}", f"steps      {s['steps']['count']} "
             f"(median {_us(s['steps']['median_us'])}, from {', '.join(s['steps']['source']) or '-'})",
             f"kernels    {s['gpu']['kernel_count']:,} taking {_us(s['gpu']['kernel_time_us'])}; "
             f"GPU busy {_us(s['gpu']['busy_us'])}",
             f"syncs      {s['syncs']['count']:,} synchronizing runtime calls, {_us(s['syncs']['blocked_us'])} in them; "
             f"{_points(s['sync_points'])}"]
    for direction, c in s["memcpy"].items():
        if c["count"]:
            lines.append(f"memcpy     {direction}: {c['count']:,} copies, {c['bytes'] / 1e6:,.1f} MB, "
                         f"{_us(c['time_us'])} ({c['pageable_count']} pageable, {c['pinned_count']} pinned)")
    lines += _compile_lines(s.get("compile"))
    lines.append("categories " + ", ".join(f"{k}={v:,}" for k, v in sorted(s["events"]["by_category"].items())))
    lines += [f"warning    {w}" for w in s["warnings"]]
    return "\n".join(lines) + "\n"


def _devices(devices: list[dict]) -> str:
    listed = [d["name"] or "?" for d in devices]
    names = ", ".join(f"{n} x{listed.count(n)}" if listed.count(n) > 1 else n for n in dict.fromkeys(listed))
    if not devices:
        return "none listed"
    return names if any(d.get("active", True) for d in devices) else f"none with activity (listed: {names})"


def _points(p: dict) -> str:
    out = p["outside_steps"]
    outside = f", {out['count']:,} of them outside the profiled steps" if out["count"] else ""
    return (f"{p['count']:,} sync points (perfkit sync-points: Python-level calls, {_us(p['blocked_us'])} blocked{outside}; "
            f"{_us(p['in_steps']['blocked_us'])} inside the steps)")


def _compile_lines(c: dict | None) -> list[str]:
    """torch.compile facts (``compile`` key), or nothing for a trace without them."""
    if not c:
        return []
    share = "-" if c["triton_time_share"] is None else f"{c['triton_time_share']:.0%}"
    return [f"compile    {c['triton_kernels']:,} of {c['kernels']:,} kernels are Triton ({share} of kernel time); "
            f"compiling {c['compile_s']:.3f} s in the trace",
            f"compile    {regions_note(c['compiled_regions'])}"]


def _us(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:.3f} s" if value >= 1e6 else f"{value / 1e3:.2f} ms" if value >= 1e3 else f"{value:.1f} us"
