"""What ``perfkit ranks`` prints: per-rank step, wait, GPU busy, compute and comm; stragglers, collective
arrival skew, bus bandwidth, findings."""
from __future__ import annotations

from pathlib import Path

from ...analysis.ranks.bandwidth import NO_SIZES
from ...text import clip


def format_ranks(d: dict, top: int = 8) -> str:
    """Human-readable tables of a ``RanksResult.to_json()`` dict (times in ms per step)."""
    lines = [f"{'rank':>5} {'step':>9} {'own':>9} {'wait':>9} {'GPU busy':>9} {'compute':>9} {'comm':>9} "
             f"{'overlap':>8} {'loader':>9} {'sync':>9} {'last':>5}  file", "(ms per step; own = step minus waiting "
             "for peers; last = collectives it reached last)"]
    for r in d["ranks"]:
        n = max(r["steps"], 1)
        lines.append(f"{r['rank']:>5} {_ms(r['median_step_us'])} {_ms(r['median_own_us'])} {_ms(r['wait_us'] / n)} "
                     f"{_pct(r['gpu_busy_pct']):>9} {_ms(r['compute_us'] / n)} {_ms(r['comm_us'] / n)} "
                     f"{_pct(r['overlap_pct']):>8} {_ms(r['dataloader_us'] / n)} {_ms(r['sync_us'] / n)} "
                     f"{r['late_arrivals']:>5}  {Path(r['file']).name}")
    lines += ["", _stragglers(d)] + _skew(d["collectives"], top) + _bandwidth(d, top)
    lines += [""] + [f"{f['severity']:<8} {f['title']}\n         fix: {f['fix']}" for f in d["findings"]]
    lines += [f"warning  {w}" for w in d["warnings"]]
    return "\n".join(lines) + "\n"


def _stragglers(d: dict) -> str:
    if not d["stragglers"]:
        return f"stragglers: none (no rank's own step time >= {d['straggler_pct']:.0f}% over the median rank's)"
    rows = [f"rank {s['rank']} step {s['step']}: +{s['excess_pct']:.1f}% ({s['excess_us'] / 1e3:.2f} ms), "
            f"{s['cause']}" for s in d["stragglers"]]
    return "stragglers (rank, step):\n  " + "\n  ".join(rows)


def _skew(collectives: list, top: int) -> list[str]:
    if not collectives:
        return []
    worst = sorted(collectives, key=lambda c: -c["skew_us"])[:top]
    out = ["", f"collective arrival skew (largest {len(worst)} of {len(collectives)}):"]
    out += [f"  step {c['step']} {clip(c['name'], 48)} #{c['occurrence']}: {c['skew_us'] / 1e3:.2f} ms, "
            f"first rank {c['first_rank']}, last rank {c['last_rank']}" for c in worst]
    return out


def _bandwidth(d: dict, top: int) -> list[str]:
    table = d["bandwidth"]
    if not table:
        return ["", f"bus bandwidth: {NO_SIZES}"] if d["collectives"] else []
    largest = sorted(table, key=lambda c: -c["bytes"])[:top]
    out = ["", f"bus bandwidth (largest {len(largest)} of {len(table)} collectives by bytes; nccl-tests' bus factors):"]
    out += [f"  {_scopes(table)}"] if any(c["scope"] for c in table) else []
    out += [f"  step {c['step']} {c['collective']} {_size(c['bytes'])} {c['dtype']}, {c['group_size']:.0f} ranks"
            f"{' ' + c['scope'] if c['scope'] else ''}"
            f"{' ' + c['algorithm'] if c['algorithm'] else ''}: {_gbs(c['busbw_gbs'])} over {c['transfer_us'] / 1e3:.2f} ms"
            f" ({c['measured']})" for c in largest]
    return out


def _scopes(table: list[dict]) -> str:
    """"12 intra-node (46.8 MB), 0 inter-node (0.0 kB), 3 the traces do not place"."""
    parts = [f"{sum(c['scope'] == s for c in table)} {s} ({_size(sum(c['bytes'] for c in table if c['scope'] == s))})"
             for s in ("intra-node", "inter-node")]
    unknown = sum(not c["scope"] for c in table)
    return "collectives " + ", ".join(parts) + (f", {unknown} the traces do not place" if unknown else "")


def _size(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.1f} MB" if nbytes >= 1e5 else f"{nbytes / 1e3:,.1f} kB"


def _gbs(value) -> str:
    return f"{value:,.1f} GB/s" if value is not None else "- GB/s"


def _ms(us) -> str:
    return f"{us / 1e3:>9.2f}" if us is not None else f"{'-':>9}"


def _pct(value) -> str:
    return f"{value:.0f}%" if value is not None else "-"
