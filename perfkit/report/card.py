"""The first screen of every report: the verdict, the 3 numbers behind it and the top fix.

``verdict_card(investigation, result, logged, ...)`` reads a result generically: its ``verdict``
string when it has one, else its most severe finding's title; the fix of its most severe finding
that has one; and the first three perf-log rows this run logged (value, unit and how each
compares with the previous run). The card displays as HTML in JupyterLab and in the shared
report, and carries the same facts as JSON (``MIME``) in the executed notebook, from where the
runner copies them into the run record and the index.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import pandas as pd

from ..results import format_number, html_text, rank_findings

MIME = "application/vnd.perfkit.card+json"
CARD_VERSION = 1
# Metric names as a person reads them; other names are shown with "_" as spaces.
LABELS = {
    "median_step_ms": "median step", "host_busy_ms_per_step": "host busy per step", "gpu_busy_pct": "GPU busy",
    "queued_gpu_ms_per_step": "GPU work queued per step (the host ran ahead)",
    "launches_per_step": "kernel launches per step", "htod_ms_per_step": "host-to-device copy time per step",
    "pageable_htod_per_step": "pageable host-to-device copies per step", "compile_s": "compile time",
    "sync_points_per_step": "sync points per step", "sync_blocked_ms_per_step": "host blocked in syncs per step",
    "host_scalar_reads_per_step": "host scalar reads per step (no GPU wait)",
    "detected_syncs_per_step": "syncing calls per step (run time)",
    "compiled_step_ms": "compiled step", "eager_step_ms": "eager step", "speedup": "speedup",
    "compile_time_s": "compile time", "amp_step_ms": "autocast step", "fp32_step_ms": "fp32 step",
    "loss_max_rel_diff": "largest loss difference", "leak": "leak found", "snapshot_leak": "leak across snapshots",
    "window_growth_mib": "growth within the snapshot's window", "window_peak_mib": "peak in the snapshot's window",
    "growth_mib_per_interval": "growth per interval between snapshots",
    "memory_growth_per_step_bytes": "memory held at step ends, growth per step",
    "step_ratio_after_before": "step time after / before",
    "mean_step_ms": "mean step", "gpu_busy_ms_per_step": "GPU busy per step", "gpu_idle_ms_per_step": "GPU idle per step",
    "peer_wait_ms_per_step": "waiting for peers per step", "straggler_excess_pct": "worst straggler's excess",
    "straggling_ranks": "straggling ranks", "comm_overlap_pct": "communication hidden under compute",
    "gemm_tflops_per_s": "GEMM throughput", "tensor_core_share_pct": "GEMM time on Tensor Cores",
    "mfu_pct": "model FLOP/s utilisation",
}
_STYLE = ("border:2px solid {color};border-radius:6px;padding:0.6em 1em;margin:0.4em 0 1em;"
          "font-family:system-ui,sans-serif;max-width:60em")
_COLORS = {"critical": "#b00020", "high": "#b00020", "medium": "#c77700", "low": "#2e6da4", "info": "#2e7d32"}


@dataclass(frozen=True)
class Number:
    """One number behind the verdict, as logged: ``verdict`` compares it with the previous run."""

    label: str
    value: float
    unit: str
    verdict: str
    delta_pct: float

    def text(self) -> str:
        change = _change_text(self.verdict, self.delta_pct)
        return self.value_text() + (f" ({change})" if change else "")

    def value_text(self) -> str:
        """"label: value unit"; a yes/no metric (unit "flag": a check passed, a leak found) as yes or no."""
        if self.unit == "flag":
            return f"{self.label}: {flag_text(self.value)}"
        return f"{self.label}: {format_number(self.value)} {self.unit}".rstrip()

    def short_text(self) -> str:
        """``value_text`` with the change against the previous run only when it is one a reader
        acts on (improved, regressed): the index's one number per report."""
        if self.verdict not in ("improved", "regressed") or math.isnan(self.delta_pct):
            return self.value_text()
        return f"{self.value_text()} ({_change_text(self.verdict, self.delta_pct)})"


@dataclass(frozen=True)
class VerdictCard:
    """What a report says first. ``subject``: what was measured; ``device``: where it was
    recorded (for a trace: the trace's device, not the machine that analyzed it)."""

    investigation: str
    verdict: str
    numbers: tuple[Number, ...]
    fix: str
    subject: str
    device: str
    severity: str = "info"
    prediction: str = ""  # what the top fix buys ("Predicted: median step 10.52 -> 7.12 ms (1.48x) with the syncs removed")

    def to_json(self) -> dict:
        out = asdict(self)
        out["numbers"] = [{**asdict(n), "value": _finite(n.value), "delta_pct": _finite(n.delta_pct)}
                          for n in self.numbers]
        return {"card_version": CARD_VERSION, **out}

    def line(self) -> str:
        """The card on one line (the index and ``perfkit run`` print it)."""
        numbers = "; ".join(n.text() for n in self.numbers)
        fix = f" Fix: {self.fix}" if self.fix else ""
        fix += f" {self.prediction}." if self.prediction and self.prediction.lower() not in self.fix.lower() else ""
        return f"{self.verdict}. {numbers}.{fix}" if numbers else f"{self.verdict}.{fix}"

    def __repr__(self) -> str:
        return f"VerdictCard({self.investigation}: {self.line()})"

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html_text(n.text())}</li>" for n in self.numbers)
        fix = f"<p><b>Top fix:</b> {html_text(self.fix)}</p>" if self.fix else "<p>No fix needed.</p>"
        if self.prediction and self.prediction.lower() not in self.fix.lower():
            fix += f"<p>{html_text(self.prediction)}</p>"
        where = html_text(f"Input: {self.subject}, recorded on {self.device}")
        style = _STYLE.format(color=_COLORS.get(self.severity, "#2e6da4"))
        return (f"<div class='perfkit-card' style='{style}'><p style='font-size:1.3em;margin:0.2em 0'>"
                f"<b>{html_text(self.verdict)}</b></p><ul>{items}</ul>{fix}"
                f"<p style='color:#555;font-size:0.9em;margin:0'>{where}</p></div>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {"text/html": self._repr_html_(), "text/plain": repr(self), MIME: self.to_json()}


def verdict_card(investigation: str, result, logged: pd.DataFrame | None, *, subject: str, device: str,
                 verdict: str | None = None, fix: str | None = None, numbers: int = 3,
                 prediction: dict | None = None) -> VerdictCard:
    """The card of ``result`` (any perfkit result: ``verdict`` and ``findings`` are read when
    present) with the first ``numbers`` rows of ``logged`` (``log_rows``' return value).
    ``verdict``/``fix`` override what is read from the result; ``prediction``: a diagnosis's
    ``prediction`` (``perfkit.diagnose(trace).prediction``), whose text the card quotes."""
    findings = rank_findings(getattr(result, "findings", ()) or ())
    top = findings[0] if findings else None
    said = getattr(result, "verdict", None)
    text = verdict or (said if isinstance(said, str) and said else top.title if top else "no findings")
    fix_text = fix if fix is not None else next((f.fix for f in findings if f.fix), "")
    rows = logged.head(numbers).to_dict("records") if logged is not None else []
    shown = tuple(Number(LABELS.get(r["metric"], str(r["metric"]).replace("_", " ")), float(r["value"]), r["unit"],
                         r["verdict"], float(r["delta_pct"])) for r in rows)
    return VerdictCard(investigation, text, shown, fix_text, subject, device, top.severity if top else "info",
                       (prediction or {}).get("sentence", ""))


def read_card(nb) -> dict:
    """The card JSON displayed by an executed notebook (the last one), or {} when none."""
    found = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {})
            if MIME in data and isinstance(data[MIME], dict):
                found = dict(data[MIME])
    return found if found.get("card_version") == CARD_VERSION else {}


class CardSummary(NamedTuple):
    """A card as the index shows it, each field one line of plain text: what it read
    (``subject``), ``verdict``, its first ``number`` and its ``prediction``."""

    subject: str
    verdict: str
    number: str
    prediction: str = ""


def card_summary(card: dict) -> CardSummary:
    """A card read back from JSON (``read_card``) as the index shows it: the subject without its
    "trace " prefix (a trace's name; a live run's "live WORKLOAD"), the verdict, and the first
    number (``Number.short_text``); empty fields for no card."""
    if not card:
        return CardSummary("", "", "", "")
    numbers = [Number(n["label"], _float(n["value"]), n["unit"], n["verdict"], _float(n["delta_pct"]))
               for n in card.get("numbers") or ()]
    subject = str(card.get("subject") or "")
    return CardSummary(plain_line(subject.removeprefix("trace ")), plain_line(card.get("verdict") or ""),
                       plain_line(numbers[0].short_text()) if numbers else "", plain_line(card.get("prediction") or ""))


def flag_text(value: float) -> str:
    """A yes/no metric's value (unit "flag": 1 a check passed, a leak found) as people say it."""
    return "n/a" if value is None or math.isnan(value) else "yes" if value else "no"


def plain_line(text: str) -> str:
    """``text`` on one line without markdown code marks (a verdict or error written for a
    notebook's markdown, shown in HTML as text)."""
    return " ".join(str(text).replace("`", "").split())


def _float(value) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def _change_text(verdict: str, delta: float) -> str:
    if verdict == "no baseline":
        return "first run"
    if verdict == "unchanged":
        return "same figures as the previous run"  # the same trace analyzed again: not a measured "no change"
    if math.isnan(delta):
        return verdict
    word = "REGRESSED" if verdict == "regressed" else verdict
    return f"{delta:+.1f}% vs previous run: {word}"


def _finite(value: float):
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None
