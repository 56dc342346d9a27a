"""An investigation's numbers read back in words: one paragraph per result (``*_text``) and
``prose()`` to show paragraphs as escaped HTML in a notebook.
"""
from __future__ import annotations

import math
import numbers

from ..results import html_text


def ms_text(us: float) -> str:
    return f"{us / 1e3:,.2f} ms"


def mib_text(value) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.2f} MiB"


# How diff's stub-step warning starts after "A: " / "B: " (analysis.trace_diff.findings._stub_warning).
PARTIAL_STEPS = "partial step(s) at the edge of the profiler window"


def prose(*paragraphs: str) -> str:
    """Plain-text paragraphs as escaped HTML ``<p>`` elements (for ``display(HTML(...))``)."""
    return "".join(f"<p>{html_text(p)}</p>" for p in paragraphs)


def finite(*values: float) -> bool:
    """True when every value is a real, finite number (None, NaN, inf and booleans are "not measured")."""
    return all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def ab_verdict(what: str, result) -> str:
    """An A/B result (compile_ab, amp_ab) as a verdict line: "torch.compile: faster (1.8x
    speedup, CI 1.6-2.0)"; the verdict word is the result's own, unless its timing supports
    none (``ab_word``): "torch.compile: inconclusive: re-run on a quiet machine (timing drifted
    -66%, CV 131%)"."""
    if getattr(getattr(result, "timing", result), "unreliable", ""):
        return f"{what}: {ab_word(result)}"
    s = result.summary()
    ci = f", CI {s['ci_low']:.3g}-{s['ci_high']:.3g}" if finite(s["ci_low"], s["ci_high"]) else ""
    speed = f" ({s['speedup']:.3g}x speedup{ci})" if finite(s["speedup"]) else ""
    return f"{what}: {result.verdict}{speed}"


def ab_word(result) -> str:
    """The verdict an A/B result's text may state: its own (faster, slower, no change, insufficient
    data), or "inconclusive: re-run on a quiet machine (WHY)" when its timing drifted or spread
    too far to support any: ``ABResult.conclusion``, the one place that decides it (``result`` is an
    ABResult or holds one as ``timing``)."""
    return getattr(getattr(result, "timing", result), "conclusion", result.verdict)
