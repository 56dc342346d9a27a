"""What ``perfkit sync-points`` prints: sync points by kind and by site, host scalar reads apart, findings."""
from __future__ import annotations

from ...analysis.sync_points.result import reads_line, where
from ...text import clip


def format_syncs(d: dict, top: int = 20) -> str:
    """Human-readable table of a ``SyncResult.to_json()`` dict."""
    t = d["total"]
    what = "possible sync points (CPU-only trace)" if t.get("cpu_only") else "sync points"
    steps = f"{t['steps']} step{'s' if t['steps'] != 1 else ''}"
    lines = [f"{t['count']:,} {what} ({t['per_step']:.3g} per step over {steps}), "
             f"{_ms(t['blocked_us'])} blocked; {t['gpu_confirmed']:,} confirmed by a GPU wait"]
    if t["host_scalar_reads"]:
        lines.append(reads_line(t))
    lines += ["", f"{'kind':<22}{'count':>8}{'per step':>10}{'blocked':>12}"]
    for kind, k in d["by_kind"].items():
        lines.append(f"{kind:<22}{k['count']:>8,}{k['per_step']:>10.3g}{_ms(k['blocked_us']):>12}")
    lines += ["", f"{'blocked':>10}{'count':>7}{'/step':>7}  {'kind':<22}{'op':<28}source", *_sites(d["sites"], top)]
    reads = d["host_scalar_reads"]["sites"]
    if reads:
        lines += ["", "host scalar reads, no GPU wait (not counted above):", *_sites(reads, top, "host_us")]
    lines += ["", f"source: {d['source_lines']}", ""]
    lines += [f"{f['severity']:<8} {f['title']}\n         fix: {f['fix']}" for f in d["findings"]]
    lines += [f"warning  {w}" for w in d["warnings"]]
    return "\n".join(lines) + "\n"


def _sites(sites: list, top: int, time_key: str = "blocked_us") -> list[str]:
    lines = []
    for s in sites[:top]:
        source = where(s) if s["file"] else "- (no Python stack)"
        lines.append(f"{_ms(s[time_key]):>10}{s['count']:>7,}{s['per_step']:>7.3g}  {s['kind']:<22}"
                     f"{clip(s['op'] or '-', 27):<28}{source}")
    if len(sites) > top:
        lines.append(f"... {len(sites) - top} more sites (--top N or --json)")
    return lines


def _ms(us: float) -> str:
    return f"{us / 1e3:,.3f} ms"
