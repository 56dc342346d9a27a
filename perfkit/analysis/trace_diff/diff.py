"""``diff(a, b)``: what changed between trace A (baseline) and trace B (candidate)?

Each side is read per *full* step (``side``: partial or stub steps at the edge of the
profiler window are dropped, with a warning). Per op, kernel and ``record_function`` range name:
counts and times of both sides, normalized per step (each side divided by its own number of
steps) so runs with different step counts compare; status ``new`` (only in B: e.g. Triton kernels
after torch.compile), ``vanished`` (only in A) or ``common``. Step time is compared as
median(B)/median(A) with a bootstrap confidence interval and one of five verdicts: faster,
slower, no detectable change, not enough data (fewer than ``MIN_STEPS`` steps on a side), inconclusive
(a busy machine, step times too noisy or a CI too wide to compare: ``conditions``, which also says when the
two ran differently loaded). GPU
idle, host-device copies, syncs and host waits come from ``cpu_bound``, ``htod``, ``syncs`` and
``side`` of each side. Findings (``findings``) report regressions and improvements alike,
and a host wait that moved between kinds as moved.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import ParameterError
from ...results import findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from ...stats import bootstrap_median_ratio
from ...text import jsonable
from ..htod import summarize_copies
from .conditions import condition_warnings, judged, unreliable_reasons
from .findings import findings as _findings, warnings as _warnings
from .side import side as _side
from .speedups import op_speedups

MIN_STEPS = 3
CONFIDENCE = 0.95
RESAMPLES = 2000
VERDICTS = ("faster", "slower", "no detectable change", "not enough data", "inconclusive")
NAME_COLUMNS = ["name", "status", "count_a", "count_b", "time_us_a", "time_us_b", "per_step_us_a", "per_step_us_b",
                "delta_per_step_us", "delta_pct"]


@dataclass(frozen=True, eq=False, repr=False)
class DiffResult:
    """A/B comparison. ``to_frame()``: one row per headline metric (per step where it says so) with
    A, B, delta and delta %. ``ops`` (every host op, nested ones too), ``top_ops`` (outermost ops only:
    the calls the user made, each counted once: aten::to, not also its _to_copy and copy_), ``kernels``, ``annotations`` (record_function ranges) and
    ``waits`` (host waits on the device by kind, ``side``): per-name tables (``NAME_COLUMNS``). ``op_speedups``: the
    same op on the same input shapes in both, its GPU time per call before and after (``speedups``).
    ``copies``: per (direction, memory) count/bytes/time of each side; ``sync_kinds``: sync points
    per kind. ``step_change``: median step-time ratio B/A with its CI and verdict."""

    labels: tuple
    metrics: pd.DataFrame
    ops: pd.DataFrame
    top_ops: pd.DataFrame
    kernels: pd.DataFrame
    annotations: pd.DataFrame
    waits: pd.DataFrame
    op_speedups: pd.DataFrame
    copies: pd.DataFrame
    sync_kinds: pd.DataFrame
    step_change: dict
    findings: tuple
    warnings: tuple

    def to_frame(self) -> pd.DataFrame:
        return self.metrics.copy()

    @property
    def new_kernels(self) -> pd.DataFrame:
        return self.kernels[self.kernels["status"] == "new"].reset_index(drop=True)

    @property
    def vanished_kernels(self) -> pd.DataFrame:
        return self.kernels[self.kernels["status"] == "vanished"].reset_index(drop=True)

    def to_json(self, top: int = 20) -> dict:
        def records(frame):
            return jsonable(frame.head(top).to_dict("records"))

        return {"a": self.labels[0], "b": self.labels[1], "step_change": jsonable(self.step_change),
                "metrics": jsonable(self.metrics.to_dict("records")),
                "ops": records(self.ops), "top_ops": records(self.top_ops), "kernels": records(self.kernels),
                "annotations": records(self.annotations), "waits": jsonable(self.waits.to_dict("records")),
                "op_speedups": records(self.op_speedups),
                "new_kernels": records(self.new_kernels), "vanished_kernels": records(self.vanished_kernels),
                "copies": jsonable(self.copies.to_dict("records")), "syncs": jsonable(self.sync_kinds.to_dict("records")),
                "findings": [dict(f.__dict__) for f in self.findings], "warnings": list(self.warnings)}

    def __repr__(self) -> str:
        s = self.step_change
        return (f"<DiffResult B/A step time {s['ratio']:.3g}x ({s['verdict']}), {len(self.new_kernels)} new and "
                f"{len(self.vanished_kernels)} vanished kernels, {len(self.findings)} findings>")

    def _repr_html_(self) -> str:
        s = self.step_change
        head = html_text(f"A = {self.labels[0]}, B = {self.labels[1]}: median step B/A {s['ratio']:.3g} "
                         f"[{s['low']:.3g}, {s['high']:.3g}] -> {s['verdict']}")
        return html_section("Trace diff", head, html_table(findings_frame(self.findings)), html_table(self.metrics),
                            html_table(self.waits), html_table(self.annotations), html_table(self.kernels),
                            html_table(self.top_ops), html_warnings(self.warnings))


def diff(a, b) -> DiffResult:
    """Compare trace ``a`` (baseline) with trace ``b``; both are :class:`perfkit.trace.Trace`.

    Times in microseconds; per-step values divide each side by its own step count. Raises
    :class:`~perfkit.errors.ParameterError` when an argument is not a Trace.
    """
    for label, t in (("a", a), ("b", b)):
        if not hasattr(t, "events") or not hasattr(t, "steps"):
            raise ParameterError(f"diff({label}=...) needs a Trace (perfkit.load_trace(path)), got {type(t).__name__}")
    sides = [_side(t) for t in (a, b)]
    steps, machines = tuple(s["step_us"] for s in sides), tuple(s["machine"] for s in sides)
    step_change = compare_steps(*steps)
    step_change = judged(step_change, unreliable_reasons(step_change, steps, machines))
    tables = {key: compare_names(sides[0][key], sides[1][key], sides[0]["n"], sides[1]["n"])
              for key in ("ops", "top_ops", "kernels", "annotations", "waits")}
    tables["kernels"]["triton"] = tables["kernels"]["name"].str.startswith("triton_")
    speedups, speedup_notes = op_speedups(a, b)
    parts = dict(metrics=_metrics(sides), ops=tables["ops"], top_ops=tables["top_ops"], kernels=tables["kernels"],
                 annotations=tables["annotations"], waits=tables["waits"], op_speedups=speedups,
                 copies=_copies(sides),
                 sync_kinds=_sync_kinds(sides), step_change=step_change)
    findings = _findings(parts, sides)
    return DiffResult(labels=(_label(a), _label(b)), findings=rank_findings(findings),
                      warnings=(*condition_warnings(machines, step_change, tuple(s["outside_us"] for s in sides)),
                                *_warnings(a, b, sides), *speedup_notes), **parts)


def _label(trace) -> str:
    return ", ".join(f.path.rsplit("/", 1)[-1] for f in trace.files)


# --- comparisons ---------------------------------------------------------------------------------

def compare_steps(a_us, b_us, *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """median(B)/median(A) of step times with a percentile-bootstrap CI (each side resampled
    independently, fixed seed) and a verdict: "slower" when the whole CI is above 1, "faster"
    when below, "no detectable change" when it contains 1, "not enough data" under MIN_STEPS."""
    a, b = np.asarray(a_us, dtype=float), np.asarray(b_us, dtype=float)
    out = {"n_a": int(len(a)), "n_b": int(len(b)), "median_a_us": _median(a), "median_b_us": _median(b),
           "confidence": confidence}
    ratio = out["median_b_us"] / out["median_a_us"] if len(a) and len(b) and out["median_a_us"] > 0 else float("nan")
    out["ratio"] = ratio
    if len(a) < MIN_STEPS or len(b) < MIN_STEPS or not np.isfinite(ratio):
        return dict(out, low=float("nan"), high=float("nan"), verdict="not enough data",
                    reason=f"need >= {MIN_STEPS} steps on each side, have {len(a)} and {len(b)}")
    low, high = bootstrap_median_ratio(a, b, confidence=confidence, resamples=resamples, seed=seed)
    verdict = "slower" if low > 1 else "faster" if high < 1 else "no detectable change"
    return dict(out, low=float(low), high=float(high), verdict=verdict,
                reason=f"{confidence:.0%} bootstrap CI of median(B)/median(A) is [{low:.3g}, {high:.3g}]")


def _median(x: np.ndarray) -> float:
    return float(np.median(x)) if len(x) else float("nan")


def compare_names(a: pd.DataFrame, b: pd.DataFrame, n_a: int, n_b: int) -> pd.DataFrame:
    """Outer join of two (name -> count, time_us) tables with per-step times and their deltas,
    sorted by the absolute per-step delta."""
    table = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer").fillna(0.0).reset_index()
    table["status"] = np.where(table["count_a"] == 0, "new", np.where(table["count_b"] == 0, "vanished", "common"))
    table["per_step_us_a"] = table["time_us_a"] / n_a
    table["per_step_us_b"] = table["time_us_b"] / n_b
    table["delta_per_step_us"] = table["per_step_us_b"] - table["per_step_us_a"]
    table["delta_pct"] = 100.0 * table["delta_per_step_us"] / table["per_step_us_a"].where(table["per_step_us_a"] > 0)
    table[["count_a", "count_b"]] = table[["count_a", "count_b"]].astype(np.int64)
    order = table["delta_per_step_us"].abs().sort_values(ascending=False, kind="stable").index
    return table.loc[order, NAME_COLUMNS].reset_index(drop=True)


def _metrics(sides) -> pd.DataFrame:
    rows = [(name, fn(sides[0]), fn(sides[1])) for name, fn in _METRICS]
    frame = pd.DataFrame(rows, columns=["metric", "a", "b"])
    frame["delta"] = frame["b"] - frame["a"]
    frame["delta_pct"] = 100.0 * frame["delta"] / frame["a"].where(frame["a"] != 0)
    return frame


def _per_step(side, value) -> float:
    return float(value) / side["n"]


def _copy_stat(side, col, memory=None) -> float:
    c = side["copies"]
    c = c[c["direction"] == "HtoD"]
    if memory:
        c = c[c["memory"] == memory]
    return _per_step(side, len(c) if col == "count" else c[col].sum())


_METRICS = [
    ("steps", lambda s: s["n"]),
    ("median step (us)", lambda s: _median(s["step_us"])),
    ("GPU busy (%)", lambda s: s["cpu_overall"]["gpu_busy_pct"]),
    ("GPU idle (%)", lambda s: s["cpu_overall"]["gpu_idle_pct"]),
    ("host busy per step (us)", lambda s: _per_step(s, s["cpu_overall"]["host_busy_us"])),
    ("DataLoader per step (us)", lambda s: _per_step(s, s["cpu_overall"]["dataloader_us"])),
    ("compile per step (us)", lambda s: _per_step(s, s["cpu_overall"]["compile_us"])),
    ("launches per step", lambda s: _per_step(s, s["cpu_overall"]["launches"])),
    ("kernels per step", lambda s: _per_step(s, s["kernels"]["count"].sum())),
    ("kernel time per step (us)", lambda s: _per_step(s, s["kernels"]["time_us"].sum())),
    ("HtoD copies per step", lambda s: _copy_stat(s, "count")),
    ("HtoD time per step (us)", lambda s: _copy_stat(s, "dur_us")),
    ("pageable HtoD per step", lambda s: _copy_stat(s, "count", "pageable")),
    ("syncs per step", lambda s: _per_step(s, len(s["syncs"]))),
    ("sync blocked per step (us)", lambda s: _per_step(s, s["syncs"]["blocked_us"].sum())),
    ("host waits per step (us)", lambda s: _per_step(s, s["waits"]["time_us"].sum())),
]


def _copies(sides) -> pd.DataFrame:
    keys = ["direction", "memory"]
    a, b = (summarize_copies(s["copies"], s["n"]).set_index(keys)[["count", "bytes", "time_us"]] for s in sides)
    table = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer").fillna(0).reset_index()
    return table.astype({c: np.int64 for c in ("count_a", "count_b", "bytes_a", "bytes_b")})


def _sync_kinds(sides) -> pd.DataFrame:
    a, b = (s["syncs"].groupby("kind").agg(count=("blocked_us", "size"), blocked_us=("blocked_us", "sum"))
            for s in sides)
    table = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer").fillna(0).reset_index()
    table["delta_blocked_us"] = table["blocked_us_b"] - table["blocked_us_a"]
    return table.astype({"count_a": np.int64, "count_b": np.int64})
