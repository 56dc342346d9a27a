"""The answers two surfaces give alike: the JSON object ``perfkit <command> --json`` prints and the MCP
tool of the same name (``perfkit mcp``) returns, for the commands whose object joins two analyses (a
command whose object is one result's ``to_json()`` calls it where it stands). One function per command,
called by both, so that the two never drift apart."""
from __future__ import annotations

from ..trace import Trace
from .step.critical_path import critical_path, path_note
from .step.diagnosis import diagnose, verdict_line
from .step.gaps import gpu_gaps
from .step.whatif import whatif


def critical_path_answer(trace: Trace, annotation: str | None = None) -> dict:
    """``critical_path(trace).to_json()`` with the diagnosis's verdict line (``diagnosis``) and, on each
    step's row, that step's own verdict (``verdict``) and why it differs from the path's ``bound_by``
    (``why``, empty where they agree)."""
    line = verdict_line(trace)
    verdicts = line.pop("steps")
    data = dict(critical_path(trace, annotation=annotation).to_json(), diagnosis=line)
    for row in data["steps"]:
        row["verdict"] = verdicts.get((int(row["rank"]), int(row["step"])))
        row["why"] = path_note(row["bound_by"], row["verdict"]) if row["verdict"] else ""
    return data


def gaps_answer(trace: Trace) -> dict:
    """``gpu_gaps(trace).to_json()`` with the diagnosis's verdict line (``diagnosis``; None without GPU events)."""
    result = gpu_gaps(trace)
    line = verdict_line(trace) if result.has_gpu else None
    if line is not None:
        line.pop("steps")
    return dict(result.to_json(), diagnosis=line)


def whatif_answer(trace: Trace, path: str | None = None) -> dict:
    """``whatif(trace).to_json()`` with the verdict it decides (``verdict``, ``rule``, ``decided_by``) and the
    diagnosis's ``prediction`` (``path``: the trace as the diagnosis names it in its commands)."""
    d = diagnose(trace, path=path, kernel_fix=False)
    return dict(whatif(trace).to_json(), verdict=d.verdict, rule=d.rule, decided_by=d.decided_by,
                prediction=d.prediction)
