"""The amp_regression investigation as a report shows it: perf-log rows and the prose of an AMP A/B."""
from __future__ import annotations

from ..results import format_number
from ..stats import exact
from .prose import ab_word
from .prose import mib_text
from .rows import ab_rows
from .rows import finite_rows
from .rows import row


def amp_rows(result, subject: str) -> list[dict]:
    """autocast and fp32 step time and speedup (``ab_rows``), and the largest relative loss
    difference between the two training curves (exact: seeded)."""
    rows = ab_rows("amp_regression", result.timing, ("fp32_step_ms", "amp_step_ms"), subject, result.device)
    rows.append(row("amp_regression", "loss_max_rel_diff", result.loss_max_rel_diff, "ratio", subject=subject,
                    device=result.device, ci=exact(result.loss_max_rel_diff)))
    return finite_rows(rows)


def amp_text(result) -> str:
    s = result.summary()
    return (f"Autocast ({s['dtype']}) on {s['device']}: {ab_word(result)}, speedup {s['speedup']:.3g}x "
            f"(CI {s['ci_low']:.3g}-{s['ci_high']:.3g}) over fp32. The loss curves differ by at most "
            f"{format_number(s['loss_max_rel_diff'], 3) or 'n/a'} (relative). Saved activations: "
            f"fp32 {mib_text(s['saved_bytes_fp32'])}, autocast {mib_text(s['saved_bytes_amp'])}.")
