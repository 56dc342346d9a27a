"""Notebook support: where an investigation's data comes from, and the headline metrics it
appends to the performance log.

Notebooks stay thin (STYLE 11): the choice between a trace file and a live run, the workload
setup and the rows written to the perf log live here, where tests reach them.

* ``find_trace(path)``: a trace path as given, relative to the repository, or a file name in
  ``data/traces/cpu``; ``shipped_traces()`` lists those.
* ``load_or_record(mode, trace_path, workload=..., ...)``: the ``Trace`` of a file
  (``mode="trace"``) or of a freshly recorded live run of a reference workload (``mode="live"``).
* ``*_rows(result, ...)``: perf-log rows (dicts for ``PerfLog.append_many``) of each
  investigation; ``log_headline(path, rows)`` appends them (creating the folder).
"""
from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..errors import ParameterError

ROOT = Path(__file__).resolve().parents[2]
CPU_TRACES = ROOT / "data" / "traces" / "cpu"
MODES = ("trace", "live")
# ABResult verdicts (STYLE 7) in the perf log's words.
AB_VERDICTS = {"faster": "improved", "slower": "regressed", "no change": "within noise",
               "insufficient data": "not enough data"}


# -- data sources ------------------------------------------------------------------------------

def check_mode(mode: str) -> str:
    """``mode`` if it is "trace" or "live"; ParameterError otherwise."""
    if mode not in MODES:
        raise ParameterError(f"mode={mode!r}: use 'trace' (analyze trace_path) or 'live' (run a reference workload)")
    return mode


def shipped_traces() -> list[str]:
    """File names of the traces shipped in ``data/traces/cpu``."""
    return sorted(p.name for p in CPU_TRACES.glob("*.json.gz"))


def find_trace(path: str | os.PathLike) -> Path:
    """Resolve ``path``: as given (absolute or from the working directory), else from the
    repository root, else as a file name in ``data/traces/cpu``. Raises ParameterError naming
    the shipped traces when none exists."""
    given = Path(path).expanduser()
    for candidate in (given, ROOT / given, CPU_TRACES / given.name):
        if str(path) and candidate.is_file():
            return candidate.resolve()
    raise ParameterError(f"trace_path={str(path)!r}: no such file (looked in {Path.cwd()}, {ROOT} and "
                         f"{CPU_TRACES}); shipped traces: {', '.join(shipped_traces()) or 'none'}")


def load_or_record(mode: str, trace_path: str | os.PathLike = "", *, workload: str = "ppo",
                   variant: str | None = None, device: str = "auto", steps: int = 3, warmup: int = 1,
                   overrides: dict | None = None):
    """The ``Trace`` this investigation reads.

    ``mode="trace"``: ``load_trace(find_trace(trace_path))``. ``mode="live"``: build
    ``make_workload(workload, device, variant=variant, **overrides)``, record ``steps`` profiled
    steps after ``warmup`` with ``record_trace`` into a temporary file and load it (the Trace
    keeps its data in memory; the file is removed). Raises ParameterError for a bad mode,
    path, workload, variant or override.
    """
    from ..trace import load_trace

    if check_mode(mode) == "trace":
        return load_trace(find_trace(trace_path))
    from ..workloads.record import record_trace
    from ..workloads.registry import make_workload

    with tempfile.TemporaryDirectory(prefix="perfkit-live-") as tmp:
        with make_workload(workload, device, variant=variant, **dict(overrides or {})) as w:
            path = record_trace(w, Path(tmp) / f"{workload}_{variant or 'default'}.json.gz",
                                steps=steps, warmup=warmup)
        return load_trace(path)


@dataclass(frozen=True)
class MLPProblem:
    """A small policy-style MLP regression (``features`` -> ``hidden`` x ``layers`` ->
    ``outputs``) for the A/B harnesses: ``make_model()``, ``make_batch(step)`` (seeded by
    step), ``loss_fn`` (MSE) and ``example_inputs`` for ``compile_ab``."""

    batch: int = 64
    features: int = 32
    hidden: int = 128
    layers: int = 2
    outputs: int = 4
    seed: int = 0

    def make_model(self):
        import torch

        torch.manual_seed(self.seed)
        dims = [self.features] + [self.hidden] * self.layers
        blocks = [m for a, b in zip(dims, dims[1:]) for m in (torch.nn.Linear(a, b), torch.nn.Tanh())]
        return torch.nn.Sequential(*blocks, torch.nn.Linear(dims[-1], self.outputs))

    def make_batch(self, step: int) -> tuple:
        import torch

        g = torch.Generator().manual_seed(self.seed * 100_003 + step)
        inputs = torch.randn(self.batch, self.features, generator=g)
        return (inputs,), torch.randn(self.batch, self.outputs, generator=g)

    @property
    def loss_fn(self):
        import torch

        return torch.nn.functional.mse_loss

    @property
    def example_inputs(self) -> tuple:
        return self.make_batch(0)[0]


def mlp_problem(batch: int = 64, features: int = 32, hidden: int = 128, layers: int = 2, outputs: int = 4,
                seed: int = 0) -> MLPProblem:
    """An ``MLPProblem``; raises ParameterError for non-positive sizes."""
    sizes = dict(batch=batch, features=features, hidden=hidden, layers=layers, outputs=outputs)
    bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1}
    if bad:
        raise ParameterError(f"mlp_problem: sizes must be integers >= 1, got {bad}")
    return MLPProblem(seed=int(seed), **sizes)


def live_workload(workload: str, variant: str | None = None, device: str = "auto", overrides: dict | None = None):
    """``make_workload`` with a dict of overrides (the notebooks' ``overrides`` parameter)."""
    from ..workloads.registry import make_workload

    return make_workload(workload, device, variant=variant, **dict(overrides or {}))


def detect_workload_syncs(workload: str, variant: str | None = None, *, device: str = "auto", steps: int = 2,
                          overrides: dict | None = None):
    """Run one warm-up step of the workload, then ``steps`` steps under ``detect_syncs()``;
    returns the ``SyncReport`` (syncing calls by source line; ``per_step(steps)`` normalizes)."""
    from ..detect.runtime import detect_syncs

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ParameterError(f"detect_steps={steps!r}: must be an integer >= 1")
    with live_workload(workload, variant, device, overrides) as w:
        w.step()
        with detect_syncs() as detector:
            for _ in range(steps):
                w.step()
    return detector.report


def site_labels(sites: pd.DataFrame) -> list[str]:
    """"op @ file:line" per row of a site table (kind and op when there is no source line)."""
    out = []
    for r in sites.to_dict("records"):
        known = r.get("file") not in (None, "") and r.get("line", -1) not in (None, -1)
        where = f"{Path(str(r['file'])).name}:{r['line']}" if known else ""
        out.append(f"{r['kind']}: {r['op']} @ {where}" if where else f"{r['kind']}: {r['op']}")
    return out


def summary_table(summary: dict) -> pd.DataFrame:
    """A result's ``summary()`` dict as metric/value rows (numbers to 4 significant digits)."""
    return pd.DataFrame([{"metric": k, "value": _cell(v)} for k, v in summary.items()], columns=["metric", "value"])


def summary_pair(before, after) -> pd.DataFrame:
    """``summary_frame`` of two traces side by side: metric, before, after."""
    a, b = summary_frame(_summarize(before)), summary_frame(_summarize(after))
    return pd.DataFrame({"metric": a["metric"], "before": a["value"], "after": b["value"]})


def _summarize(trace) -> dict:
    from ..analysis.summary import summarize

    return summarize(trace)


def trace_device(trace) -> str:
    """"cpu" for a trace without GPU events, else the first GPU's name ("cuda" if unnamed)."""
    if not trace.has_gpu_events:
        return "cpu"
    named = [d.get("name") for d in trace.devices if d.get("name")]
    return named[0] if named else "cuda"


def summary_frame(summary: dict) -> pd.DataFrame:
    """``summarize(trace)`` as metric/value rows: events, steps, median step, kernels, GPU
    busy time, HtoD/DtoH copies and syncs (times in us, bytes in bytes)."""
    steps, gpu, syncs = summary["steps"], summary["gpu"], summary["syncs"]
    rows = [("events", summary["events"]["total"]), ("steps", steps["count"]),
            ("median_step_us", steps["median_us"]), ("kernels", gpu["kernel_count"]),
            ("kernel_time_us", gpu["kernel_time_us"]), ("gpu_busy_us", gpu["busy_us"])]
    for direction, copies in summary["memcpy"].items():
        rows += [(f"{direction}_copies", copies["count"]), (f"{direction}_bytes", copies["bytes"])]
    rows += [("sync_calls", syncs["count"]), ("sync_blocked_us", syncs["blocked_us"])]
    return pd.DataFrame([{"metric": k, "value": _cell(v)} for k, v in rows], columns=["metric", "value"])


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.4g}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else str(value)


# -- perf-log rows -----------------------------------------------------------------------------

def row(investigation: str, metric: str, value: float, unit: str, *, change: str = "baseline",
        run_id: str = "", device: str = "", higher_is_better: bool = False, **extra: Any) -> dict:
    """One perf-log row (the fields ``PerfLog.append`` takes). ``higher_is_better`` is always
    written: the log's guess from the metric name would read "..._per_step" as a rate."""
    out = {"investigation": investigation, "metric": metric, "value": float(value), "unit": unit,
           "change": change, "run_id": run_id, "higher_is_better": bool(higher_is_better), **extra}
    if device:
        out["device"] = device
    return out


def finite_rows(rows: Iterable[dict]) -> list[dict]:
    """Rows whose value is a finite number (the perf log refuses NaN: "not measured" is not a value)."""
    return [r for r in rows if isinstance(r["value"], (int, float)) and math.isfinite(r["value"])]


def trace_rows(investigation: str, summary: dict, *, change: str = "baseline", run_id: str = "",
               device: str = "") -> list[dict]:
    """Median step time (ms) of a trace summary, when the trace has steps."""
    median = summary["steps"]["median_us"]
    if median is None:
        return []
    return [row(investigation, "median_step_ms", median / 1e3, "ms", change=change, run_id=run_id, device=device)]


def ab_rows(investigation: str, result, metric: str = "time_per_call_ms", *, change: str = "baseline",
            run_id: str = "", device: str = "") -> list[dict]:
    """An A/B result as one row: value = median(B) in ms against baseline = median(A), the
    ratio CI as ci_low/ci_high and the A/B verdict (faster -> improved, slower -> regressed,
    no change -> within noise, insufficient data -> not enough data); plus the speedup."""
    base = dict(change=change, run_id=run_id, device=device or result.environment.get("device", ""))
    ci = {"ci_low": result.ci_low, "ci_high": result.ci_high} if _finite(result.ci_low, result.ci_high) else {}
    rows = [row(investigation, metric, result.median_b * 1e3, "ms", baseline=result.median_a * 1e3,
                verdict=AB_VERDICTS.get(result.verdict, "not enough data"), **ci, **base)]
    if _finite(result.speedup):
        rows.append(row(investigation, "speedup", result.speedup, "x", baseline=1.0, higher_is_better=True,
                        verdict=AB_VERDICTS.get(result.verdict, "not enough data"), **base))
    return finite_rows(rows)


def leak_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """Growth per 1,000 steps of the series that decided a leak hunt (bytes or objects), and
    1/0 for whether the verdict was "leak"."""
    d = result.decision
    base = dict(change=change, run_id=run_id, device=device or result.device)
    rows = [row("memory_leak", "leak", 1.0 if result.verdict == "leak" else 0.0, "flag", **base)]
    if d is not None:
        rows.append(row("memory_leak", f"{d.series}_per_1000_steps", d.per_1000, d.unit, **base))
    return finite_rows(rows)


def cpu_bound_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """Median step wall time (ms), host busy time per step (ms), GPU busy share (%, only with
    GPU events) and launches per step of a ``cpu_bound`` result."""
    steps, overall = result.steps, result.overall
    if steps.empty:
        return []
    base = dict(change=change, run_id=run_id, device=device)
    rows = [row("cpu_bound", "median_step_ms", float(steps["wall_us"].median()) / 1e3, "ms", **base),
            row("cpu_bound", "host_busy_ms_per_step", overall["host_busy_us"] / overall["steps"] / 1e3, "ms", **base)]
    if result.has_gpu:
        rows += [row("cpu_bound", "gpu_busy_pct", overall["gpu_busy_pct"], "%", higher_is_better=True, **base),
                 row("cpu_bound", "launches_per_step", overall["launches_per_step"], "launches", **base)]
    return finite_rows(rows)


def cpu_bound_text(result) -> str:
    """The verdict of a ``cpu_bound`` result read back in one paragraph."""
    o = result.overall
    if result.steps.empty:
        return f"Verdict: {result.verdict}. The trace has no profiler steps, so no step could be split."
    gpu = (f"the GPU was busy {o['gpu_busy_pct']:.1f}% of it" if result.has_gpu
           else "the trace has no GPU events, so only host time is known")
    host = o["host_busy_us"] / max(o["wall_us"], 1e-12) * 100
    return (f"Verdict: {result.verdict}. Over {o['steps']} step(s) and {o['wall_us'] / 1e3:,.1f} ms of wall time, "
            f"{gpu}; the host was busy {host:.1f}% of it (DataLoader {o['dataloader_us'] / 1e3:,.2f} ms, "
            f"blocking syncs {o['sync_us'] / 1e3:,.2f} ms, other host work {o['host_other_us'] / 1e3:,.2f} ms). "
            f"{len(result.findings)} finding(s) below, most severe first.")


def htod_rows(result, summary: dict, sweep=None, *, change: str = "baseline", run_id: str = "",
              device: str = "") -> list[dict]:
    """Median step (ms), HtoD copy time per step (ms) and pageable HtoD copies per step of a
    trace's ``htod`` result (when it has copies); with a GPU ``htod_sweep`` result, the best
    GB/s per mode at the largest size swept."""
    base = dict(change=change, run_id=run_id, device=device)
    rows = trace_rows("htod", summary, **base)
    frame = result.to_frame()
    h = frame[frame["direction"] == "HtoD"]
    if len(h) and result.n_steps:
        rows += [row("htod", "htod_ms_per_step", h["time_us"].sum() / result.n_steps / 1e3, "ms", **base),
                 row("htod", "pageable_htod_per_step", h.loc[h["memory"] == "pageable", "count"].sum() / result.n_steps,
                     "copies", **base)]
    if sweep is not None and sweep.available:
        table = sweep.to_frame()
        top = table[table["size_bytes"] == table["size_bytes"].max()]
        rows += [row("htod", f"{m}_gbps_at_{int(r['size_bytes'])}B", r["gbps"], "GB/s", higher_is_better=True,
                     **{**base, "device": device or sweep.device}) for m, r in zip(top["mode"], top.to_dict("records"))]
    return finite_rows(rows)


def htod_text(result, sweep=None) -> str:
    """The copy analysis (and sweep, if any) read back in one paragraph."""
    frame = result.to_frame()
    if frame.empty:
        text = "The trace has no GPU copies (no GPU events), so no host-device copy could be analyzed."
    else:
        h = frame[frame["direction"] == "HtoD"]
        text = (f"{int(frame['count'].sum())} copies in {result.n_steps} step(s): "
                f"{int(h['count'].sum())} host-to-device, "
                f"{int(h.loc[h['memory'] == 'pageable', 'count'].sum())} of them from pageable memory, "
                f"{int(frame['followed_by_sync'].sum())} copies followed by a blocking sync.")
    if sweep is None:
        return text
    if not sweep.available:
        return text + f" Bandwidth sweep: {sweep.reason}; the host memcpy baseline is host memory bandwidth only."
    best = sweep.to_frame().groupby("mode")["gbps"].max()
    return text + " Best measured bandwidth: " + ", ".join(f"{m} {v:.1f} GB/s" for m, v in best.items()) + "."


def sync_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "",
              detected=None, detected_steps: int = 0) -> list[dict]:
    """Sync points per step and host time blocked per step (ms) of a ``syncs`` result; with a
    runtime ``detect_syncs`` report over ``detected_steps`` steps, its syncs per step."""
    t = result.total
    base = dict(change=change, run_id=run_id, device=device)
    rows = []
    if t["steps"]:
        rows += [row("sync_points", "syncs_per_step", t["per_step"], "syncs", **base),
                 row("sync_points", "blocked_ms_per_step", t["blocked_us"] / t["steps"] / 1e3, "ms", **base)]
    if detected is not None and detected_steps:
        rows.append(row("sync_points", "detected_syncs_per_step", detected.total / detected_steps, "syncs", **base))
    return finite_rows(rows)


def sync_text(result, detected=None, detected_steps: int = 0) -> str:
    """The sync analysis (and runtime detector, if run) read back in one paragraph."""
    t = result.total
    by = result.by_kind
    kinds = ", ".join(f"{r['kind']} x{int(r['count'])}" for r in by.to_dict("records")) or "none"
    text = (f"{t['count']} sync point(s) over {t['steps']} step(s) ({t['per_step']:.3g} per step), blocking the host "
            f"{t['blocked_us'] / 1e3:,.3f} ms in total; {t['gpu_confirmed']} confirmed by a GPU-side wait. "
            f"By kind: {kinds}.")
    if detected is not None:
        per = f" ({detected.total / detected_steps:.3g} per step)" if detected_steps else ""
        text += (f" The runtime detector ({detected.mode}) saw {detected.total} syncing call(s){per} at "
                 f"{len(detected.events)} source line(s).")
    return text


def compile_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """The steady-state A/B (compiled vs eager) as ``ab_rows``, plus compile time (s) and graph breaks."""
    base = dict(change=change, run_id=run_id, device=device or result.device)
    rows = ab_rows("compile_ab", result.timing, "compiled_step_ms", **base)
    rows += [row("compile_ab", "compile_time_s", result.compile_time_s, "s", **base),
             row("compile_ab", "graph_breaks", result.graph_break_count, "breaks", **base)]
    return finite_rows(rows)


def compile_text(result) -> str:
    s = result.summary()
    steps = s["break_even_steps"]
    even = "never (no established saving)" if steps == math.inf else f"after {steps:,.0f} steps"
    return (f"torch.compile ({s['backend']}, mode {s['mode']}) on {s['device']}: {s['verdict']}, speedup "
            f"{s['speedup']:.3g}x (CI {s['ci_low']:.3g}-{s['ci_high']:.3g}) over eager. Compiling cost "
            f"{s['compile_time_s']:.3g} s, repaid {even}. {s['graph_breaks']} graph break(s), "
            f"{s['recompiles']} recompile(s).")


def amp_rows(result, *, change: str = "baseline", run_id: str = "", device: str = "") -> list[dict]:
    """The steady-state A/B (autocast vs fp32) as ``ab_rows``, plus the largest relative loss
    difference between the two training curves."""
    base = dict(change=change, run_id=run_id, device=device or result.device)
    rows = ab_rows("amp_regression", result.timing, "amp_step_ms", **base)
    rows.append(row("amp_regression", "loss_max_rel_diff", result.loss_max_rel_diff, "ratio", **base))
    return finite_rows(rows)


def amp_text(result) -> str:
    s = result.summary()
    return (f"Autocast ({s['dtype']}) on {s['device']}: {s['verdict']}, speedup {s['speedup']:.3g}x "
            f"(CI {s['ci_low']:.3g}-{s['ci_high']:.3g}) over fp32. The loss curves differ by at most "
            f"{s['loss_max_rel_diff']:.3g} (relative). Saved activations: fp32 {_bytes(s['saved_bytes_fp32'])}, "
            f"autocast {_bytes(s['saved_bytes_amp'])}.")


def leak_text(result) -> str:
    lo, hi = result.ci
    d = result.decision
    unit = d.unit if d else ""
    return (f"Verdict: {result.verdict} after {result.steps} steps on {result.device} (decided by {result.decided_by}: "
            f"{result.per_1000:,.4g} {unit} per 1,000 steps, CI {lo:,.4g} to {hi:,.4g}).")


def _bytes(value) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.2f} MiB"


DIFF_VERDICTS = {"faster": "improved", "slower": "regressed", "no detectable change": "within noise",
                 "not enough data": "not enough data"}


def diff_rows(investigation: str, result, *, change: str = "baseline", run_id: str = "",
              device: str = "") -> list[dict]:
    """A trace diff as perf-log rows: B's median step (ms) against A's as baseline, with the
    bootstrap CI of the ratio and the diff's verdict, plus B's host busy time per step (ms)."""
    s = result.step_change
    base = dict(change=change, run_id=run_id, device=device)
    ci = {"ci_low": s["low"], "ci_high": s["high"]} if _finite(s["low"], s["high"]) else {}
    rows = []
    if _finite(s["median_b_us"], s["median_a_us"]):
        rows.append(row(investigation, "diff_median_step_ms", s["median_b_us"] / 1e3, "ms",
                        baseline=s["median_a_us"] / 1e3, verdict=DIFF_VERDICTS.get(s["verdict"], "not enough data"),
                        **ci, **base))
    host = result.metrics[result.metrics["metric"] == "host busy per step (us)"]
    if len(host):
        rows.append(row(investigation, "diff_host_busy_ms_per_step", float(host["b"].iloc[0]) / 1e3, "ms",
                        baseline=float(host["a"].iloc[0]) / 1e3, **base))
    return finite_rows(rows)


def diff_text(result) -> str:
    """A trace diff read back in one paragraph: step-time ratio with CI and verdict, new and
    vanished kernels, and the op whose per-step time moved most."""
    s = result.step_change
    ci = f" (CI {s['low']:.3g}-{s['high']:.3g})" if _finite(s["low"], s["high"]) else ""
    text = (f"A = {result.labels[0]}, B = {result.labels[1]}: median step B/A = {s['ratio']:.3g}{ci}, "
            f"{s['verdict']}. {len(result.new_kernels)} new and {len(result.vanished_kernels)} vanished "
            "kernel name(s).")
    ops = result.ops.dropna(subset=["delta_per_step_us"])
    if len(ops):
        top = ops.loc[ops["delta_per_step_us"].abs().idxmax()]
        text += (f" Largest op change: {top['name']} ({top['status']}) {top['delta_per_step_us']:+,.1f} us per step.")
    return text


def prose(*paragraphs: str) -> str:
    """Plain-text paragraphs as escaped HTML ``<p>`` elements (for ``display(HTML(...))``)."""
    from ..results import html_text

    return "".join(f"<p>{html_text(p)}</p>" for p in paragraphs)


def log_headline(perf_log_path: str | os.PathLike, rows: Iterable[dict]) -> pd.DataFrame:
    """Append ``rows`` to the perf log at ``perf_log_path`` in one atomic write (its folder
    is created); returns the rows as written (``PerfLog`` columns)."""
    from .perflog import PerfLog

    rows = list(rows)
    if not rows:
        raise ParameterError("log_headline: no rows to append (every headline metric was NaN?)")
    Path(perf_log_path).parent.mkdir(parents=True, exist_ok=True)
    return PerfLog(perf_log_path).append_many(rows)


def _finite(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)
