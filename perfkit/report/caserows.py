"""Perf-log rows of the case studies, beside the investigations' own (``perfkit.report.rows``).

Each builder returns rows for ``rows.log_rows`` with a 95% CI where the measurement has one:
counts read from a trace or a seeded run are exact; rates and speedups carry their harness's
CI; fitted memory slopes their fit's. Builders of ``rows`` that name their own investigation
(``leak_rows``, ``compile_rows``...) are reused through ``relabel``.
"""
from __future__ import annotations

import math
import re

from ..stats import exact, step_ci
from .rows import finite_rows, load_note, row


def metric_name(text: str) -> str:
    """``text`` as a perf-log metric name: "aten::linear" -> "aten_linear",
    "## train/sample ##" -> "train_sample"."""
    return re.sub(r"\W+", "_", str(text)).strip("_").lower() or "value"


def relabel(rows, investigation: str) -> list[dict]:
    """``rows`` logged under ``investigation`` (a case study reusing an investigation's rows)."""
    return [{**r, "investigation": investigation} for r in rows]


def count_rows(investigation: str, counts: dict, unit: str, *, subject: str, device: str,
               suffix: str = "") -> list[dict]:
    """One row per ``counts`` entry (name -> value), metric ``<name><suffix>``, exact: a count
    from a trace file, or from a seeded reference workload, is fixed by its input."""
    out = [row(investigation, metric_name(name) + suffix, value, unit, subject=subject, device=device,
               ci=exact(value)) for name, value in counts.items() if isinstance(value, (int, float))]
    return finite_rows(out)


def range_rows(investigation: str, change: dict, *, subject: str, device: str) -> list[dict]:
    """A record_function range before and after a fix (``analysis.per_step.range_change``): its median ms
    per step in the after trace (bootstrap CI over its steps) and the after/before ratio with its
    bootstrap CI."""
    key = metric_name(change["name"])
    ci = (change["low"], change["high"]) if math.isfinite(change["low"]) else None
    return finite_rows([
        row(investigation, f"{key}_ms_per_step", change["after_ms"], "ms", subject=subject, device=device,
            ci=step_ci(change["after_steps_ms"])),
        row(investigation, f"{key}_ratio_after_before", change["ratio"], "x", subject=subject, device=device, ci=ci),
    ])


def ladder_rows(investigation: str, ladder, *, subject: str) -> list[dict]:
    """The first and last rungs' rates and the first-to-last speedup of a ``ladder.speed_ladder``
    with their CIs (higher is better), then the other rungs' rates; timings under load carry the
    load note."""
    note = load_note()
    lo, hi = ladder.overall.speedup_ci
    last = len(ladder.labels) - 1

    def rate_row(i: int) -> dict:
        rate, r_lo, r_hi = ladder.rate(i)
        return row(investigation, f"{metric_name(ladder.labels[i])}_rate", rate, ladder.unit, subject=subject,
                   device=ladder.device, ci=(r_lo, r_hi), higher_is_better=True, quality=note)

    out = [rate_row(0), rate_row(last), row(investigation, "speedup", ladder.overall.speedup, "x", subject=subject,
                                            device=ladder.device, ci=(lo, hi), higher_is_better=True, quality=note)]
    return finite_rows(out + [rate_row(i) for i in range(1, last)])


def planning_rows(investigation: str, planning, *, subject: str) -> list[dict]:
    """Bytes per sample per horizon step (the slope, with its CI) and bytes per sample at
    horizon 0 of a ``planning.planning_memory`` result: figures of the code, not of the
    machine's free memory."""
    fit = planning.fit
    return finite_rows([
        row(investigation, "bytes_per_sample_step", fit.slope, "bytes", subject=subject, device=planning.device,
            ci=(fit.low, fit.high)),
        row(investigation, "bytes_per_sample", fit.intercept, "bytes", subject=subject, device=planning.device),
    ])


def opsuite_rows(investigation: str, suite, *, subject: str) -> list[dict]:
    """Each comparison's speedup (time A / time B, CI from its A/B) and each op's throughput per
    setting (GFLOP/s or GB/s; CI over its samples) of an ``op_suite`` result."""
    note = load_note()
    out = []
    for c in suite.comparisons:
        lo, hi = c.ab.speedup_ci
        out.append(row(investigation, f"{c.op}_{metric_name(c.b.label)}_vs_{metric_name(c.a.label)}", c.ab.speedup,
                       "x", subject=subject, device=c.b.device, ci=(lo, hi), higher_is_better=True, quality=note))
    for t in suite.timings:
        rates = [t.work / s / 1e9 for s in t.samples if s > 0]
        out.append(row(investigation, f"{t.op}_{metric_name(t.setting.label)}", t.throughput, t.unit, subject=subject,
                       device=t.setting.device, ci=step_ci(rates), higher_is_better=True, quality=note))
    return finite_rows(out)
