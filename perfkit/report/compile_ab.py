"""The compile_ab investigation as a report shows it: perf-log rows and the prose of a compile A/B."""
from __future__ import annotations

import math

from ..results import format_number
from ..stats import exact
from .prose import ab_word
from .rows import ab_rows
from .rows import finite_rows
from .rows import load_note
from .rows import row


def compile_rows(result, subject: str) -> list[dict]:
    """compiled and eager step time and speedup (``ab_rows``), compile time (s; no CI: judged
    against its history) and graph breaks (exact)."""
    device = result.device
    rows = ab_rows("compile_ab", result.timing, ("eager_step_ms", "compiled_step_ms"), subject, device)
    rows += [row("compile_ab", "compile_time_s", result.compile_time_s, "s", subject=subject, device=device,
                 quality=load_note()),
             row("compile_ab", "graph_breaks", result.graph_break_count, "breaks", subject=subject, device=device,
                 ci=exact(result.graph_break_count))]
    return finite_rows(rows)


def compile_text(result) -> str:
    s = result.summary()
    steps = s["break_even_steps"]
    even = "never (no established saving)" if steps == math.inf else f"after {steps:,.0f} steps"
    return (f"torch.compile ({s['backend']}, mode {s['mode']}) on {s['device']}: {ab_word(result)}, speedup "
            f"{s['speedup']:.3g}x (CI {s['ci_low']:.3g}-{s['ci_high']:.3g}) over eager. Compiling cost "
            f"{format_number(s['compile_time_s'], 3)} s, repaid {even}. {s['graph_breaks']} graph break(s), "
            f"{s['recompiles']} recompile(s).")
