"""The optimization guide's figures (case study 5): an op suite read as one verdict line, and its
comparisons as closing-table rows."""
from __future__ import annotations

from .casestudy import WriteupFigure, measured_ci


def opsuite_verdict(suite) -> str:
    """"op suite (quick) on cpu: matmul bfloat16 0.42x (slower), threads 2 1.6x (faster)"; the
    matmul comparisons (else the first op's), speed-up of B over A with the A/B's own verdict."""
    if not suite.comparisons:
        return f"op suite ({suite.preset}): {len(suite.timings)} timing(s), nothing compared"
    op = "matmul" if any(c.op == "matmul" for c in suite.comparisons) else suite.comparisons[0].op
    parts = [f"{c.axis} {c.b.label} {c.ab.speedup:.3g}x ({c.ab.conclusion})" for c in suite.comparisons if c.op == op]
    devices = sorted({t.setting.device for t in suite.timings})
    return f"op suite ({suite.preset}) on {', '.join(devices)}: {op} " + ", ".join(parts)


def comparison_figure(suite, op: str, axis: str, name: str, writeup: str, why: str) -> WriteupFigure:
    """The ``op`` comparison along ``axis`` ("device", "dtype", "threads") as a closing-table row:
    the speed-up of B over A with its CI, or "not measured: ..." when the suite has no such
    comparison here (one device, one thread count), or "no GPU: ..." for the device axis."""
    found = next((c for c in suite.comparisons if c.op == op and c.axis == axis), None)
    if found is None:
        missing = ("no GPU: one device, nothing to compare" if axis == "device"
                   else f"not measured: no {axis} comparison of {op} on this machine")
        return WriteupFigure(name, writeup, missing, "", why)
    return WriteupFigure(name, writeup, found.ab.speedup, "x",
                         f"{found.b.label} vs {found.a.label}: {found.ab.conclusion}; {why}",
                         ci=measured_ci(*found.ab.speedup_ci))


def throughput_figure(suite, op: str, device: str, dtype: str, name: str, writeup: str, why: str) -> WriteupFigure:
    """The throughput (GFLOP/s or GB/s) of ``op`` at ``device``/``dtype`` (the fewest threads
    timed), with a 95% CI from its median time's CI; "not measured: ..." when it was not timed."""
    timed = [t for t in suite.timings if t.op == op and t.setting.device == device and t.setting.dtype == dtype]
    if not timed:
        return WriteupFigure(name, writeup, f"not measured: {op} on {device} {dtype} was not timed", "", why)
    t = min(timed, key=lambda x: x.setting.threads or 0)
    low_s, high_s = t.ci_s
    ci = measured_ci(t.work / high_s / 1e9, t.work / low_s / 1e9) if low_s > 0 and high_s > 0 else None
    return WriteupFigure(name, writeup, t.throughput, t.unit, f"{t.setting.label}: {why}", ci=ci)
