"""What ``perfkit whatif`` prints: the fixes ranked by the step time each buys, what each assumed, the replay
error they rest on, and the verdict the saving decides."""
from __future__ import annotations


def format_whatif(d: dict) -> str:
    lines = []
    if d["steps"]:
        e = d["replay_error"]
        lines.append(f"step       {d['step_us'] / 1e3:,.3f} ms (median of {len(d['steps'])} full step(s)); replay "
                     f"error median {100 * e['median']:.1f}%, p90 {100 * e['p90']:.1f}%, worst {100 * e['worst']:.1f}%")
        lines.append(f"{'fix':<20}{'step ms':>12}{'speedup':>9}{'saves':>8}  assumes")
        for f in d["fixes"]:
            if f["applies"]:
                if f["by_mean"]:  # a one-time cost: the mean step shows it, the median does not
                    step, speedup = f["predicted_mean_us"], d["mean_step_us"] / max(f["predicted_mean_us"], 1e-9)
                    note = f" (the mean step, {d['mean_step_us'] / 1e3:,.3f} ms now: a one-time cost)"
                else:
                    step, speedup, note = f["predicted_step_us"], f["speedup"], ""
                lines.append(f"{f['fix']:<20}{step / 1e3:>12,.3f}{speedup:>8.2f}x{100 * f['share']:>7.0f}%  "
                             f"{f['assumes']}{note}")
        for f in d["fixes"]:
            if not f["applies"]:
                lines.append(f"{f['fix']:<20}{'-':>12}{'-':>9}{'-':>8}  does not apply: {f['reason']}")
        if d.get("all_fixes"):
            a = d["all_fixes"]
            lines.append(f"{'all of them':<20}{a['predicted_step_us'] / 1e3:>12,.3f}{a['speedup']:>8.2f}x"
                         f"{100 * a['share']:>7.0f}%  {a['assumes']}")
    c = d.get("combined")
    if c:
        lines.append(f"{'together':<20}{c['predicted_step_us'] / 1e3:>12,.3f}{c['speedup']:>8.2f}x"
                     f"{100 * c['share']:>7.0f}%  {c['fix']}: {c['assumes']}" if c["applies"] else
                     f"{'together':<20}{'-':>12}{'-':>9}{'-':>8}  {c['fix']} does not apply: {c['reason']}")
    lines.append(f"verdict    {d['verdict']}: {d['rule']} (decided by {d['decided_by']})")
    lines.append(f"           {d['prediction']['sentence']}")
    for n in d.get("not_modeled", ()):
        what = "; ".join(f"{i['what']} {i['us'] / 1e3:,.2f} ms" for i in n["not_modeled"])
        lines.append(f"off        rank {n['rank']} step {n['step']}: the replay misses {what}")
    lines += [f"warning    {w}" for w in d["warnings"]]
    return "\n".join(lines) + "\n"
