"""What ``perfkit gaps`` prints: GPU idle by class, the longest gaps with the function behind each, findings,
the verdict and how to read the classes beside it."""
from __future__ import annotations


# The gap classes that read as each verdict's cause; a largest class outside them gets a line on why.
_READS_AS = {"launch-bound": ("launch", "host_python"), "host-compute-bound": ("host_python",),
             "input-bound": ("input",), "sync-bound": ("sync_wait", "host_python"), "compiling": ("compile",)}


def reading_note(largest: str, verdict: str) -> str:
    """How to read the gap classes beside the verdict when they seem to disagree ("" when they agree)."""
    if largest == "host_python" and verdict == "launch-bound":
        return ("host_python holds all the Python the GPU waited on, the Python that issues launches (module "
                "forwards) as well as the host's own work; the verdict weighs the two apart (perfkit diagnose)")
    expected = _READS_AS.get(verdict)
    if expected is None or largest in expected:
        return ""
    return (f"the largest idle class is {largest}, but the verdict weighs every cause by its share of the step "
            "less warm-up (perfkit diagnose shows the numbers)")


def format_gaps(result, path, top: int = 10, diagnosis: dict | None = None) -> str:
    if not result.has_gpu:
        return f"{path}: " + " ".join(result.warnings) + "\n"
    totals = result.totals
    idle = sum(v["dur_us"] for v in totals.values())
    steps = result.steps
    lines = [f"{len(result.gaps):,} gaps, {idle / 1e3:,.3f} ms GPU idle in {steps['wall_us'].sum() / 1e3:,.3f} ms of "
             f"{len(steps)} step(s) (GPU busy {steps['gpu_busy_us'].sum() / 1e3:,.3f} ms)", "",
             f"{'class':<14}{'gaps':>8}{'idle ms':>12}{'share':>8}"]
    for cls, v in sorted(totals.items(), key=lambda kv: -kv[1]["dur_us"]):
        lines.append(f"{cls:<14}{v['count']:>8,}{v['dur_us'] / 1e3:>12,.3f}{100 * v['share']:>7.1f}%")
    lines += ["", f"{'idle ms':>10}{'step':>6}  {'class':<13}function (file:line) [thread]"]
    for g in result.top(top).to_dict("records"):
        where = f" ({g['file']}:{g['line']})" if g["file"] else ""
        lines.append(f"{g['dur_us'] / 1e3:>10,.3f}{g['step']:>6}  {g['class']:<13}{g['function'] or '-'}{where} "
                     f"[{g['thread']}]")
    lines += [""] + [f"{f.severity:<8} {f.title}\n         fix: {f.fix}" for f in result.findings]
    if diagnosis is not None:
        lines.append(f"verdict  {diagnosis['title']} (perfkit diagnose: the numbers and the fix)")
        largest = max(totals.items(), key=lambda kv: kv[1]["dur_us"])[0] if totals else ""
        note = reading_note(largest, diagnosis["verdict"])
        lines += [f"reading  {note}"] if note else []
    lines += [f"warning  {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"
