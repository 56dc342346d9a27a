"""Findings and warnings of ``diff``: what got slower *and* what got faster, each with the numbers
of both sides, and a host wait that only moved between kinds reported as moved, not as a
regression.

A change is reported when it moves the per-step time by at least ``CHANGE_SHARE`` of A's median
step (A's mean window when it has no steps): regressions as "medium" (the step as "high"),
improvements as "info". Ops are compared as the user calls them (outermost ops only: aten::to, not
also the aten::_to_copy and aten::copy_ inside it); kernels, record_function ranges, GPU copy time
and host waits by name or kind.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...results import Finding
from ...text import us_text
from ...trace.steps import stub_note
from ..step.cpu_bound import PARTIAL_NOTE
from .conditions import ADVICE, WIDE_CI

# An op, kernel, range, copy or wait change is reported when it moves the per-step time by at least
# this share of A's median step (perfkit rule: smaller moves are within step-to-step noise of most runs).
CHANGE_SHARE = 0.05
MAX_NAME_FINDINGS = 3
_RULE = f">= {CHANGE_SHARE:.0%} of A's median step (perfkit rule)"


def findings(parts: dict, sides) -> list[Finding]:
    """All findings; ``parts`` are the DiffResult tables (``top_ops``: the outermost-op table)."""
    s = parts["step_change"]
    if s["verdict"] == "inconclusive":  # no op, kernel or wait is blamed for a change the steps cannot show
        return [_inconclusive_finding(s)]
    base = _base_us(s, sides[0])
    out = _step_findings(s) + _idle_findings(sides, base)
    out += _name_findings(parts["top_ops"], "op", base)
    out += _name_findings(parts["kernels"], "kernel", base)
    out += _name_findings(parts["annotations"][parts["annotations"]["status"] == "common"], "record_function", base)
    out += _copy_findings(parts["metrics"], base) + _wait_findings(parts["waits"], base)
    new = parts["kernels"][parts["kernels"]["status"] == "new"]
    if len(new):
        out.append(Finding("info", f"{len(new)} kernels only in B ({int(new['triton'].sum())} Triton)",
                           {"new_kernels": len(new), "triton": int(new["triton"].sum()),
                            "time_per_step_us": float(new["per_step_us_b"].sum())},
                           "Expected after torch.compile or a library upgrade; check they replaced the vanished ones.",
                           "any kernel name present only in B"))
    return out


def _base_us(step_change: dict, side_a: dict) -> float:
    """A's median step (us); without steps, A's wall time per window."""
    if np.isfinite(step_change["median_a_us"]):
        return float(step_change["median_a_us"])
    return float(side_a["cpu_overall"]["wall_us"]) / side_a["n"]


def _step_findings(s: dict) -> list[Finding]:
    if s["verdict"] not in ("slower", "faster"):
        return []
    severity = "high" if s["verdict"] == "slower" else "info"
    return [Finding(severity, f"B is {s['verdict']}: median step {s['median_b_us'] / 1e3:.3f} ms vs "
                              f"{s['median_a_us'] / 1e3:.3f} ms (B/A {s['ratio']:.3g})",
                    {k: s[k] for k in ("ratio", "low", "high", "n_a", "n_b")},
                    "Look at the op and kernel deltas below for where the time went." if severity == "high" else "",
                    s["reason"])]


def _inconclusive_finding(s: dict) -> Finding:
    return Finding("medium", f"step times cannot be compared: {s['unreliable']} (median step "
                             f"{s['median_a_us'] / 1e3:,.3f} -> {s['median_b_us'] / 1e3:,.3f} ms)",
                   {k: s[k] for k in ("ratio", "low", "high", "n_a", "n_b")},
                   f"Inconclusive: {ADVICE}; until then no op or kernel delta listed is a cause.",
                   "busy machine (load average above the CPUs), the A/B harness's noise rule, or a CI "
                   f"over {WIDE_CI:g}x wide")


def _idle_findings(sides, base_us: float) -> list[Finding]:
    """GPU idle *time* per step (wall minus busy): a share alone rises when the GPU work shrinks."""
    (a, b), (va, vb) = ((s["cpu_overall"] for s in sides), (s["cpu"].verdict for s in sides))
    if not base_us or not (a["gpu_busy_us"] or b["gpu_busy_us"]):
        return []
    idle_a, idle_b = ((o["wall_us"] - o["gpu_busy_us"]) / s["n"] for o, s in zip((a, b), sides))
    delta = idle_b - idle_a
    if abs(delta) < CHANGE_SHARE * base_us:
        return []
    worse = delta > 0
    return [Finding("medium" if worse else "info",
                    f"GPU idle time per step {'rose' if worse else 'fell'} by {abs(delta) / 1e3:.3f} ms "
                    f"({us_text(idle_a)} -> {us_text(idle_b)}; idle {a['gpu_idle_pct']:.0f}% -> {b['gpu_idle_pct']:.0f}% "
                    f"of the step; {va} -> {vb})",
                    {"idle_us_per_step_a": idle_a, "idle_us_per_step_b": idle_b,
                     "idle_a_pct": a["gpu_idle_pct"], "idle_b_pct": b["gpu_idle_pct"]},
                    "Run cpu_bound(B) for the cause of the idle time." if worse else "", _RULE)]


def _name_findings(table: pd.DataFrame, what: str, base_us: float) -> list[Finding]:
    """The largest per-step changes of a name table, up to MAX_NAME_FINDINGS, both directions."""
    if not base_us or table.empty:
        return []
    moved = table[table["delta_per_step_us"].abs() >= CHANGE_SHARE * base_us].head(MAX_NAME_FINDINGS)
    return [_name_finding(r, what) for r in moved.to_dict("records")]


def _name_finding(r: dict, what: str) -> Finding:
    worse = r["delta_per_step_us"] > 0
    title = (f"{what} {r['name'][:80]} {'+' if worse else '-'}{abs(r['delta_per_step_us']) / 1e3:.3f} ms/step "
             f"({r['status']}): {us_text(r['per_step_us_a'])} -> {us_text(r['per_step_us_b'])} per step")
    fix = (f"Find why this {what} takes longer or runs more often in B (shapes, dtype, call count)."
           if worse else "")
    return Finding("medium" if worse else "info", title,
                   {"per_step_us_a": r["per_step_us_a"], "per_step_us_b": r["per_step_us_b"],
                    "count_a": int(r["count_a"]), "count_b": int(r["count_b"])}, fix, _RULE)


def _copy_findings(metrics: pd.DataFrame, base_us: float) -> list[Finding]:
    m = metrics.set_index("metric")
    out = []
    delta = m.at["HtoD time per step (us)", "delta"]
    if base_us and abs(delta) >= CHANGE_SHARE * base_us:
        a, b = m.at["HtoD time per step (us)", "a"], m.at["HtoD time per step (us)", "b"]
        worse = delta > 0
        out.append(Finding("medium" if worse else "info",
                           f"HtoD copy time per step {'rose' if worse else 'fell'} by {abs(delta) / 1e3:.3f} ms "
                           f"({us_text(a)} -> {us_text(b)})",
                           {"a": a, "b": b, "pageable_a": m.at["pageable HtoD per step", "a"],
                            "pageable_b": m.at["pageable HtoD per step", "b"]},
                           "Run htod(B): pin memory, non_blocking." if worse else "", _RULE))
    if m.at["pageable HtoD per step", "delta"] > 0:
        out.append(Finding("low", "more pageable HtoD copies per step in B",
                           {"a": m.at["pageable HtoD per step", "a"], "b": m.at["pageable HtoD per step", "b"]},
                           "Pin the host memory (pin_memory=True) for the new copies.", "any increase"))
    return out


def _wait_findings(waits: pd.DataFrame, base_us: float) -> list[Finding]:
    """Host waits on the device: judged on their total, so a wait that moved between kinds (a
    pageable copy's wait becoming an event sync after pinning) is "moved", not a regression."""
    if not base_us or waits.empty:
        return []
    limit = CHANGE_SHARE * base_us
    total = float(waits["delta_per_step_us"].sum())
    a, b = float(waits["per_step_us_a"].sum()), float(waits["per_step_us_b"].sum())
    moves = waits[waits["delta_per_step_us"].abs() >= limit]
    listed = ", ".join(f"{r['kind']} {us_text(r['per_step_us_a'])} -> {us_text(r['per_step_us_b'])}"
                       for r in moves.rename(columns={"name": "kind"}).to_dict("records"))
    evidence = {"per_step_us_a": a, "per_step_us_b": b, **{f"{k}_delta_us": d for k, d in
                                                          zip(moves["name"], moves["delta_per_step_us"])}}
    if total >= limit:
        return [Finding("medium", f"host waits on the GPU rose by {total / 1e3:.3f} ms/step ({us_text(a)} -> {us_text(b)}): "
                                  f"{listed}", evidence,
                        "Run syncs(B) (or `perfkit sync-points B`) for the new waits and their source lines.", _RULE)]
    if total <= -limit:
        return [Finding("info", f"host waits on the GPU fell by {-total / 1e3:.3f} ms/step ({us_text(a)} -> {us_text(b)}): "
                                f"{listed}", evidence, "", _RULE)]
    if (moves["delta_per_step_us"] > 0).any():
        return [Finding("info", f"host wait moved between kinds, total {us_text(a)} -> {us_text(b)} per step: {listed}",
                        evidence, "Not a regression: the host waits as long as before, in another call (e.g. a "
                        "pinned copy returns at once and the wait shows up in the next synchronize).", _RULE)]
    return []


def warnings(a, b, sides) -> tuple:
    out = []
    names = [sorted({d.get("name", "") for d in t.devices} - {""}) for t in (a, b)]
    if names[0] and names[1] and names[0] != names[1]:
        out.append(f"A and B ran on different GPUs ({', '.join(names[0])} vs {', '.join(names[1])}): "
                   "differences include the hardware")
    if len(a.ranks) != len(b.ranks):
        out.append(f"A has {len(a.ranks)} rank(s), B has {len(b.ranks)}: per-step numbers sum over ranks")
    sources = [sorted(set(t.steps["source"])) if len(t.steps) else [] for t in (a, b)]
    if sources[0] != sources[1]:
        out.append(f"steps come from {sources[0] or 'nothing'} in A and {sources[1] or 'nothing'} in B: "
                   "per-step numbers may not cover the same work")
    for label, side in zip("AB", sides):
        out += _stub_warning(label, side)
        cpu = [w for w in side["cpu"].warnings if PARTIAL_NOTE not in w]  # the stub warning above says it
        seen = dict.fromkeys(w for w in (*cpu, *side["htod_warnings"], *side["syncs_warnings"]))
        out += [f"{label}: {w}" for w in seen]
    return tuple(dict.fromkeys(out))  # htod and syncs name the side's stub steps too


def _stub_warning(label: str, side: dict) -> list[str]:
    note = stub_note(side["stubs"], side["n"])
    return [f"{label}: {note}"] if note else []
