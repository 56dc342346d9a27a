"""The cells and blocks every tool's reply shares (:mod:`perfkit.report.replies`): figures as text, a source
line as ``file:line``, the findings with the threshold that raised each, the warnings."""
from __future__ import annotations

from .bounded import Lines, Table


def num(value) -> str:
    """A figure as text: thousands separators, no exponent for everyday sizes, "-" for none."""
    if value is None or isinstance(value, bool) or (isinstance(value, float) and value != value):
        return "-" if value is None or not isinstance(value, bool) else str(value)
    if isinstance(value, float):
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.2e}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def share(value) -> str:
    """A fraction as a percentage, "-" for none."""
    return "-" if value is None else f"{100 * value:.1f}%"


def ts(value) -> str:
    """A timestamp in microseconds as the trace has it (``ts_us``), to the nanosecond, so ``sql`` finds it."""
    return "-" if value is None else f"{value:.3f}"


def site(row: dict) -> str:
    """``file:line`` (function) of a row, or "-"."""
    if not row.get("file"):
        return "-"
    return f"{row['file']}:{row['line']}" if row.get("line") is not None else str(row["file"])


_SEVERITY = {"high": 0, "medium": 1, "low": 2, "info": 3}


def findings(rows: list) -> Table:
    """The findings, the most severe first (in their own order within a severity)."""
    ranked = sorted(rows, key=lambda f: _SEVERITY.get(f.get("severity"), len(_SEVERITY)))
    return Table("findings", ("severity", "finding", "fix", "threshold"),
                 [(f["severity"], f["title"], f.get("fix") or "", f.get("threshold") or "") for f in ranked],
                 ranked_by="severity", source="each finding's rule and the threshold that raised it")


def warnings(lines: list) -> Lines:
    return Lines("warnings", list(lines), source="how far the figures above can be trusted")


def diagnosis(d: dict | None) -> Lines:
    """The verdict of ``perfkit diagnose`` and its fix, as the gaps and critical path answers carry it."""
    return Lines("diagnosis", [f"{d['title']}; fix: {d['fix']}"] if d else [],
                 source="perfkit diagnose's verdict (diagnose(handle): the numbers and the rule behind it)")
