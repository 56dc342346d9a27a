"""``diff(a, b)``: what changed between trace A (baseline) and trace B (candidate)?

Per op and per kernel name: counts and times of both sides, normalized per step (each side divided
by its own number of steps) so runs with different step counts compare; status ``new`` (only in
B: e.g. Triton kernels after torch.compile), ``vanished`` (only in A) or ``common``. Step time is
compared as median(B)/median(A) with a bootstrap confidence interval and one of four verdicts:
faster, slower, no detectable change, not enough data (fewer than ``MIN_STEPS`` steps on a side).
GPU idle, host-device copies and syncs come from ``cpu_bound``, ``htod`` and ``syncs`` of each side.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..bench.stats import bootstrap_median_ratio
from ..errors import ParameterError
from ..results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from .cpu_bound import cpu_bound
from .htod import htod
from .ops import host_events, jsonable, nest, op_table, step_windows
from .syncs import syncs

MIN_STEPS = 3
CONFIDENCE = 0.95
RESAMPLES = 2000
# An op, kernel, copy or sync change is reported when it moves the per-step time by at least this
# share of A's median step (perfkit rule: smaller moves are within step-to-step noise of most runs).
REGRESSION_SHARE = 0.05
IDLE_POINTS = 5.0
MAX_NAME_FINDINGS = 3
VERDICTS = ("faster", "slower", "no detectable change", "not enough data")
NAME_COLUMNS = ["name", "status", "count_a", "count_b", "time_us_a", "time_us_b", "per_step_us_a", "per_step_us_b",
                "delta_per_step_us", "delta_pct"]


@dataclass(frozen=True, eq=False, repr=False)
class DiffResult:
    """A/B comparison. ``to_frame()``: one row per headline metric (per step where it says so) with
    A, B, delta and delta %. ``ops`` and ``kernels``: per-name tables (``NAME_COLUMNS``).
    ``step_change``: median step-time ratio B/A with its CI and verdict."""

    labels: tuple
    metrics: pd.DataFrame
    ops: pd.DataFrame
    kernels: pd.DataFrame
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
                "ops": records(self.ops), "kernels": records(self.kernels),
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
                            html_table(self.kernels), html_table(self.ops), html_warnings(self.warnings))


def diff(a, b) -> DiffResult:
    """Compare trace ``a`` (baseline) with trace ``b``; both are :class:`perfkit.trace.Trace`.

    Times in microseconds; per-step values divide each side by its own step count. Raises
    :class:`~perfkit.errors.ParameterError` when an argument is not a Trace.
    """
    for label, t in (("a", a), ("b", b)):
        if not hasattr(t, "events") or not hasattr(t, "steps"):
            raise ParameterError(f"diff({label}=...) needs a Trace (perfkit.load_trace(path)), got {type(t).__name__}")
    sides = [_side(t) for t in (a, b)]
    step_change = compare_steps(sides[0]["step_us"], sides[1]["step_us"])
    ops = compare_names(sides[0]["ops"], sides[1]["ops"], sides[0]["n"], sides[1]["n"])
    kernels = compare_names(sides[0]["kernels"], sides[1]["kernels"], sides[0]["n"], sides[1]["n"])
    kernels["triton"] = kernels["name"].str.startswith("triton_")
    parts = dict(metrics=_metrics(sides), ops=ops, kernels=kernels, copies=_copies(sides),
                 sync_kinds=_sync_kinds(sides), step_change=step_change)
    findings = _findings(parts, sides)
    return DiffResult(labels=(_label(a), _label(b)), findings=rank_findings(findings),
                      warnings=_warnings(a, b, sides), **parts)


def _label(trace) -> str:
    return ", ".join(f.path.rsplit("/", 1)[-1] for f in trace.files)


def _side(trace) -> dict:
    windows = step_windows(trace)
    host = host_events(trace)
    ops = op_table(host, nest(host))
    ops = ops[ops["cat"] == "cpu_op"].groupby("name").agg(count=("count", "sum"), time_us=("total_us", "sum"))
    k = trace.kernels()
    kernels = k.assign(name=k["name"].astype(str)).groupby("name").agg(count=("dur_us", "size"),
                                                                       time_us=("dur_us", "sum"))
    return {"n": max(len(windows), 1), "step_us": trace.steps["dur_us"].to_numpy(dtype=float), "ops": ops,
            "kernels": kernels, "cpu": cpu_bound(trace), "htod": htod(trace), "syncs": syncs(trace)}


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
    c = side["htod"].copies
    c = c[c["direction"] == "HtoD"]
    if memory:
        c = c[c["memory"] == memory]
    return _per_step(side, len(c) if col == "count" else c[col].sum())


_METRICS = [
    ("steps", lambda s: s["n"]),
    ("median step (us)", lambda s: _median(s["step_us"])),
    ("GPU busy (%)", lambda s: s["cpu"].overall["gpu_busy_pct"]),
    ("GPU idle (%)", lambda s: s["cpu"].overall["gpu_idle_pct"]),
    ("host busy per step (us)", lambda s: _per_step(s, s["cpu"].overall["host_busy_us"])),
    ("DataLoader per step (us)", lambda s: _per_step(s, s["cpu"].overall["dataloader_us"])),
    ("launches per step", lambda s: s["cpu"].overall["launches_per_step"]),
    ("kernels per step", lambda s: _per_step(s, s["kernels"]["count"].sum())),
    ("kernel time per step (us)", lambda s: _per_step(s, s["kernels"]["time_us"].sum())),
    ("HtoD copies per step", lambda s: _copy_stat(s, "count")),
    ("HtoD time per step (us)", lambda s: _copy_stat(s, "dur_us")),
    ("pageable HtoD per step", lambda s: _copy_stat(s, "count", "pageable")),
    ("syncs per step", lambda s: s["syncs"].total["per_step"]),
    ("sync blocked per step (us)", lambda s: _per_step(s, s["syncs"].total["blocked_us"])),
]


def _copies(sides) -> pd.DataFrame:
    keys = ["direction", "memory"]
    a, b = (s["htod"].to_frame().set_index(keys)[["count", "bytes", "time_us"]] for s in sides)
    table = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer").fillna(0).reset_index()
    return table.astype({c: np.int64 for c in ("count_a", "count_b", "bytes_a", "bytes_b")})


def _sync_kinds(sides) -> pd.DataFrame:
    a, b = (s["syncs"].by_kind.set_index("kind")[["count", "blocked_us"]] for s in sides)
    table = a.add_suffix("_a").join(b.add_suffix("_b"), how="outer").fillna(0).reset_index()
    table["delta_blocked_us"] = table["blocked_us_b"] - table["blocked_us_a"]
    return table.astype({"count_a": np.int64, "count_b": np.int64})


# --- findings and warnings -----------------------------------------------------------------------

def _findings(parts: dict, sides) -> list[Finding]:
    s = parts["step_change"]
    base = s["median_a_us"] if np.isfinite(s["median_a_us"]) else 0.0
    out = _step_findings(s) + _idle_findings(sides)
    out += _name_findings(parts["ops"], "op", base) + _name_findings(parts["kernels"], "kernel", base)
    out += _metric_findings(parts["metrics"], base)
    new = parts["kernels"][parts["kernels"]["status"] == "new"]
    if len(new):
        out.append(Finding("info", f"{len(new)} kernels only in B ({int(new['triton'].sum())} Triton)",
                           {"new_kernels": len(new), "triton": int(new["triton"].sum()),
                            "time_per_step_us": float(new["per_step_us_b"].sum())},
                           "Expected after torch.compile or a library upgrade; check they replaced the vanished ones.",
                           "any kernel name present only in B"))
    return out


def _step_findings(s: dict) -> list[Finding]:
    if s["verdict"] not in ("slower", "faster"):
        return []
    severity = "high" if s["verdict"] == "slower" else "info"
    return [Finding(severity, f"B is {s['verdict']}: median step {s['median_b_us'] / 1e3:.3f} ms vs "
                              f"{s['median_a_us'] / 1e3:.3f} ms (B/A {s['ratio']:.3g})",
                    {k: s[k] for k in ("ratio", "low", "high", "n_a", "n_b")},
                    "Look at the op and kernel deltas below for where the time went." if severity == "high" else "",
                    s["reason"])]


def _idle_findings(sides) -> list[Finding]:
    a, b = (s["cpu"] for s in sides)
    delta = b.overall["gpu_idle_pct"] - a.overall["gpu_idle_pct"]
    if delta < IDLE_POINTS:
        return []
    return [Finding("medium", f"GPU idle rose {delta:.1f} points ({a.verdict} -> {b.verdict})",
                    {"idle_a_pct": a.overall["gpu_idle_pct"], "idle_b_pct": b.overall["gpu_idle_pct"]},
                    "Run cpu_bound(B) for the cause of the idle time.", f">= {IDLE_POINTS:g} points (perfkit rule)")]


def _name_findings(table: pd.DataFrame, what: str, base_us: float) -> list[Finding]:
    worse = table[table["delta_per_step_us"] >= REGRESSION_SHARE * base_us].head(MAX_NAME_FINDINGS) if base_us else []
    return [Finding("medium", f"{what} {r['name'][:80]} +{r['delta_per_step_us'] / 1e3:.3f} ms/step ({r['status']})",
                    {"per_step_us_a": r["per_step_us_a"], "per_step_us_b": r["per_step_us_b"],
                     "count_a": int(r["count_a"]), "count_b": int(r["count_b"])},
                    f"Find why this {what} takes longer or runs more often in B (shapes, dtype, call count).",
                    f">= {REGRESSION_SHARE:.0%} of A's median step (perfkit rule)")
            for r in (worse.to_dict("records") if len(worse) else [])]


def _metric_findings(metrics: pd.DataFrame, base_us: float) -> list[Finding]:
    m = metrics.set_index("metric")
    out = []
    checks = [("HtoD time per step (us)", "HtoD copy time per step rose", "Run htod(B): pin memory, non_blocking."),
              ("sync blocked per step (us)", "host time blocked in syncs per step rose",
               "Run syncs(B) (or `perfkit syncs B`) for the new sync points and their source lines.")]
    for metric, title, fix in checks:
        delta = m.at[metric, "delta"]
        if base_us and delta >= REGRESSION_SHARE * base_us:
            out.append(Finding("medium", f"{title} by {delta / 1e3:.3f} ms",
                               {"a": m.at[metric, "a"], "b": m.at[metric, "b"]}, fix,
                               f">= {REGRESSION_SHARE:.0%} of A's median step (perfkit rule)"))
    if m.at["pageable HtoD per step", "delta"] > 0:
        out.append(Finding("low", "more pageable HtoD copies per step in B",
                           {"a": m.at["pageable HtoD per step", "a"], "b": m.at["pageable HtoD per step", "b"]},
                           "Pin the host memory (pin_memory=True) for the new copies.", "any increase"))
    return out


def _warnings(a, b, sides) -> tuple:
    out = []
    names = [sorted({d.get("name", "") for d in t.devices} - {""}) for t in (a, b)]
    if names[0] and names[1] and names[0] != names[1]:
        out.append(f"A and B ran on different GPUs ({', '.join(names[0])} vs {', '.join(names[1])}): "
                   "differences include the hardware")
    if len(a.ranks) != len(b.ranks):
        out.append(f"A has {len(a.ranks)} rank(s), B has {len(b.ranks)}: per-step numbers sum over ranks")
    sources = [sorted(set(t.steps["source"])) if len(t.steps) else [] for t in (a, b)]
    if sources[0] != sources[1]:
        out.append(f"steps come from {sources[0] or 'nothing'} in A and {sources[1] or 'nothing'} in B: "
                   "per-step numbers may not cover the same work")
    for label, side in zip("AB", sides):
        seen = dict.fromkeys(w for key in ("cpu", "htod", "syncs") for w in side[key].warnings)
        out += [f"{label}: {w}" for w in seen]
    return tuple(out)
