"""The diagnosis ``perfkit profile`` prints: the one place that asks for a trace's verdict.

For now the verdict is ``cpu_bound``'s (what limits the step) read back by
``report.prose.cpu_bound_text``. When ``perfkit.analysis.diagnosis.diagnose`` (``perfkit diagnose``)
lands, :func:`diagnose_trace` becomes
``d = diagnose(trace); return d.to_json(), format_diagnosis(d)`` and nothing else changes.
"""
from __future__ import annotations

from ..analysis.cpu_bound import cpu_bound
from ..report.prose import cpu_bound_text


def diagnose_trace(trace) -> tuple[dict, str]:
    """(JSON-able diagnosis, one-screen text) of a loaded trace."""
    result = cpu_bound(trace)
    lines = [cpu_bound_text(result)]
    lines += [f"- [{f.severity}] {f.title}" for f in result.findings[:5]]
    lines += [f"warning: {w}" for w in result.warnings]
    return result.to_json(), "\n".join(lines)
