"""What ``perfkit trace-diff`` prints: step time B/A, the metrics side by side, what changed per step, findings; a
warning of both traces said once."""
from __future__ import annotations

from ...text import clip


def format_diff(d: dict) -> str:
    """Human-readable summary of a ``DiffResult.to_json()`` dict."""
    s = d["step_change"]
    lines = [f"A  {d['a']}", f"B  {d['b']}",
             f"median step B/A {_num(s['ratio'])} [{_num(s['low'])}, {_num(s['high'])}]: {s['verdict']} ({s['reason']})",
             "", f"{'metric':<28}{'A':>14}{'B':>14}{'delta':>14}"]
    lines += [f"{m['metric']:<28}{_num(m['a']):>14}{_num(m['b']):>14}{_num(m['delta']):>14}" for m in d["metrics"]]
    for title, key in (("host waits by kind", "waits"), ("ops", "ops"), ("kernels", "kernels"),
                       ("record_function ranges", "annotations")):
        if not d[key]:
            continue
        lines += ["", f"{title} by change in time per step (us):", f"  {'name':<60}{'A':>12}{'B':>12}  status"]
        lines += [f"  {clip(r['name'], 60):<60}{_num(r['per_step_us_a']):>12}{_num(r['per_step_us_b']):>12}  "
                  f"{r['status']}" for r in d[key]]
    lines += _speedup_lines(d["op_speedups"])
    lines += ["", f"{len(d['new_kernels'])} new kernels listed, {len(d['vanished_kernels'])} vanished listed"]
    lines += [""] + [f"{f['severity']:<8} {f['title']}" + (f"\n         fix: {f['fix']}" if f["fix"] else "")
                     for f in d["findings"]]
    lines += [f"warning  {w}" for w in _merged_warnings(d["warnings"])]
    return "\n".join(lines) + "\n"


def _speedup_lines(rows: list[dict]) -> list[str]:
    """Per op and input shape in both traces: GPU time per call in A and B and A/B (x: above 1, B is faster)."""
    if not rows:
        return ["", "per-op speedups: no op with recorded input shapes ran GPU work in both traces "
                    "(record_shapes=True on both)"]
    lines = ["", "per-op speedups, same op and input shapes (GPU us per call; saved: us B saves over its calls):",
             f"  {'op':<34}{'A':>11}{'B':>11}{'A/B':>9}{'saved':>12}  shape"]
    return lines + [f"  {clip(r['op'], 34):<34}{_num(r['us_per_call_a']):>11}{_num(r['us_per_call_b']):>11}"
                    f"{_ratio(r['speedup']):>9}{_num(r['saved_us']):>12}  {clip(r['shape'], 60)}" for r in rows]


def _ratio(x) -> str:
    return "-" if x is None or x != x else f"{x:.2f}x"


def _merged_warnings(warnings: list[str]) -> list[str]:
    """"A: x" and "B: x" as one "A and B: x" (two CPU-only traces otherwise repeat each warning)."""
    sides: dict[str, list[str]] = {}
    for w in warnings:
        side, sep, text = w.partition(": ")
        key, who = (text, side) if sep and side in ("A", "B") else (w, "")
        sides.setdefault(key, []).append(who)
    return [f"{' and '.join(who)}: {text}" if all(who) else text for text, who in sides.items()]


def _num(v) -> str:
    """Thousands separators, no exponent: 12,230 not 1.223e+04; 55.29; 0.1234."""
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}" if abs(v) >= 1e-4 or v == 0 else f"{v:.2e}"
    return f"{v:,}" if isinstance(v, int) else str(v)
