"""``cpu_bound(trace)``: is a step limited by the GPU, by the host launching work, by input
loading, or by host-device syncs?

Per step window (``trace.steps``; per rank) the step's wall time is split into what the GPU and
the host did in it (all in microseconds):

* ``gpu_busy_us``: union of kernel, memcpy and memset intervals of the rank's GPUs inside the window;
* ``dataloader_us``: union of ``enumerate(DataLoader)...`` annotations (the loader's ``__next__``);
* ``sync_us``: union of blocking calls outside data loading (``syncs.blocking_calls``: synchronize
  calls and device-to-host copies that wait for the GPU);
* ``host_other_us``: the rest of the host's busy time (ops and runtime calls of any thread, union);
* ``host_busy_us`` = dataloader + sync + other; ``cpu_gpu_ratio`` = host_busy / gpu_busy;
* ``launches`` / ``launch_us``: kernel launch calls (runtime and driver, cudaGraphLaunch included)
  and their summed duration; ``queue_delay_us``: median launch-to-GPU-start delay of the step's
  kernels (small when the GPU waits for the host, large when work is queued ahead of it).

The verdict (see ``decide``) uses these shares of the wall time against the thresholds below.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from ..trace.schema import LAUNCH_CATEGORIES
from ..trace.steps import window_index
from .classify import is_launch
from .ops import (COPY_OPS, DATALOADER_PREFIX, HOST_CATEGORIES, HOST_WORK_CATEGORIES, STEP_PREFIX, host_events,
                  jsonable, nest, op_table, starts_with, step_rows, step_windows, window_cover)
from .syncs import blocking_calls

VERDICTS = ("GPU-bound", "CPU-launch-bound", "input-bound", "sync-bound")

# GPU busy share of the step at or above which the GPU is the limiter. What stays idle in a
# well-fed PyTorch loop (launch gaps, step boundaries) is typically a few percent; perfkit calls a
# step GPU-bound when at most a fifth of it is idle. torch-tb-profiler (pytorch/kineto tb_plugin,
# RunGenerator.analyze) flags "low utilization" below 50%: those steps get severity "high" here.
GPU_BOUND_BUSY = 0.80
LOW_UTILIZATION = 0.50
# Share of the step spent in DataLoader.__next__ at or above which an idle GPU is blamed on input.
# torch-tb-profiler recommends num_workers from 5% (same source); a verdict asks for twice that.
INPUT_SHARE = 0.10
# Share of the step the host spends blocked in sync calls (outside data loading) at or above which
# an idle GPU is blamed on syncs: each sync drains the GPU queue, so host and GPU stop overlapping.
SYNC_SHARE = 0.10
# Short-kernel rule of torch-tb-profiler: more than half of more than 100 kernels are short.
TINY_KERNEL_SHARE = 0.50
TINY_KERNEL_MIN_COUNT = 100
DATALOADER_NOTE_SHARE = 0.05
COPY_OPS_SHARE = 0.10

STEP_COLUMNS = [
    "rank", "step", "start_us", "end_us", "wall_us", "gpu_busy_us", "gpu_busy_pct", "gpu_idle_pct",
    "host_busy_us", "cpu_gpu_ratio", "dataloader_us", "sync_us", "sync_blocked_us", "host_other_us",
    "launches", "launch_us", "queue_delay_us", "kernels", "tiny_kernels", "tiny_kernel_pct", "verdict",
]
_SUMMED = ["wall_us", "gpu_busy_us", "host_busy_us", "dataloader_us", "sync_us", "sync_blocked_us",
           "host_other_us", "launches", "launch_us", "kernels", "tiny_kernels"]


@dataclass(frozen=True, eq=False, repr=False)
class CPUBoundResult:
    """Per-step breakdown (``steps``), host ops (``ops``), record_function ranges
    (``annotations``), per-launch raw data (``launches``), the verdict with its evidence, findings
    and warnings. ``to_frame()`` is the per-step table."""

    steps: pd.DataFrame
    ops: pd.DataFrame
    annotations: pd.DataFrame
    launches: pd.DataFrame
    verdict: str
    evidence: dict
    findings: tuple
    warnings: tuple
    has_gpu: bool
    tiny_kernel_us: float

    def to_frame(self) -> pd.DataFrame:
        return self.steps.copy()

    @property
    def overall(self) -> dict:
        """Sums over all steps plus the derived percentages and the median launch queue delay."""
        return overall_numbers(self.steps, self.launches)

    @property
    def copy_ops(self) -> pd.DataFrame:
        """aten::to / aten::_to_copy / aten::copy_ rows of ``ops`` (count, total and self time)."""
        return self.ops[self.ops["name"].isin(COPY_OPS)].reset_index(drop=True)

    def top_ops(self, n: int = 10, by: str = "self_us") -> pd.DataFrame:
        return self.ops.sort_values(by, ascending=False).head(n).reset_index(drop=True)

    def to_json(self) -> dict:
        return jsonable({"verdict": self.verdict, "evidence": self.evidence, "overall": self.overall,
                         "steps": self.steps.to_dict("records"), "ops": self.top_ops(20).to_dict("records"),
                         "findings": [dict(f.__dict__) for f in self.findings], "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        o = self.overall
        busy = f"GPU busy {o['gpu_busy_pct']:.1f}%" if self.has_gpu else "no GPU events"
        return (f"<CPUBoundResult {self.verdict}: {len(self.steps)} steps, {busy}, "
                f"host/GPU {o['cpu_gpu_ratio']:.3g}x, {len(self.findings)} findings, {len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        return html_section(
            f"CPU-bound analysis: {self.verdict}",
            html_text(", ".join(f"{k}={_short(v)}" for k, v in self.evidence.items())),
            html_table(findings_frame(self.findings)), html_table(self.steps), html_table(self.top_ops()),
            html_table(self.annotations), html_warnings(self.warnings))


def cpu_bound(trace, *, tiny_kernel_us: float = 10.0, gpu_bound_busy: float = GPU_BOUND_BUSY,
              input_share: float = INPUT_SHARE, sync_share: float = SYNC_SHARE) -> CPUBoundResult:
    """Classify each step (and the whole trace) as GPU-bound, CPU-launch-bound, input-bound or
    sync-bound from the trace's timeline.

    ``tiny_kernel_us``: kernels shorter than this (us) count as tiny. ``gpu_bound_busy``,
    ``input_share``, ``sync_share``: verdict thresholds as fractions of step wall time (defaults and
    their sources are the module constants). Never raises on a trace lacking GPU events or steps:
    those become warnings.
    """
    thresholds = {"gpu_bound_busy": gpu_bound_busy, "input_share": input_share, "sync_share": sync_share}
    windows = step_windows(trace)
    host = host_events(trace, HOST_CATEGORIES)
    launches = _launch_table(trace, host, windows)
    steps = _step_table(trace, host, windows, launches, tiny_kernel_us)
    has_gpu = trace.has_gpu_events
    steps["verdict"] = [decide(row, thresholds, has_gpu)[0] for row in steps.to_dict("records")]
    verdict, evidence = decide(overall_numbers(steps, launches), thresholds, has_gpu)
    nested = nest(host)
    result = dict(steps=steps[STEP_COLUMNS], ops=op_table(host, nested), annotations=_annotations(host, len(windows)),
                  launches=launches, verdict=verdict, evidence=evidence, has_gpu=has_gpu,
                  tiny_kernel_us=float(tiny_kernel_us))
    findings = _findings(result, copy_us=_outer_copy_us(host, nested))
    return CPUBoundResult(findings=rank_findings(findings), warnings=_warnings(trace, windows, has_gpu), **result)


def step_table(trace, *, tiny_kernel_us: float = 10.0) -> pd.DataFrame:
    """The per-step table of ``cpu_bound`` (``STEP_COLUMNS`` less ``verdict``, same numbers) without
    the op tables, call nesting and verdicts: for analyses that need only the per-step split
    (``perfkit.ranks`` reduces each rank to it)."""
    windows = step_windows(trace)
    host = host_events(trace, HOST_CATEGORIES)
    steps = _step_table(trace, host, windows, _launch_table(trace, host, windows), tiny_kernel_us)
    return steps[STEP_COLUMNS[:-1]]


# --- per-step table ------------------------------------------------------------------------------

def _step_table(trace, host, windows, launches, tiny_us) -> pd.DataFrame:
    steps = windows.rename(columns={"dur_us": "wall_us"}).copy()
    work = host[host["cat"].isin(HOST_WORK_CATEGORIES) & ~starts_with(host["name"], STEP_PREFIX)]
    loader = host[starts_with(host["name"], DATALOADER_PREFIX)]
    blocking = blocking_calls(trace, host)
    dl = window_cover(loader, windows)
    dl_sync = window_cover(pd.concat([loader, blocking]), windows)
    everything = window_cover(pd.concat([work, loader]), windows)
    steps["gpu_busy_us"] = window_cover(trace.gpu_events(), windows)
    steps["dataloader_us"] = dl
    steps["sync_us"] = dl_sync - dl
    steps["sync_blocked_us"] = window_cover(blocking, windows)
    steps["host_busy_us"] = np.maximum(everything, dl_sync)
    steps["host_other_us"] = steps["host_busy_us"] - dl_sync
    _add_launch_columns(steps, launches)
    _add_kernel_columns(steps, trace, windows, tiny_us)
    _add_ratios(steps)
    return steps


def _launch_table(trace, host, windows) -> pd.DataFrame:
    """One row per launch call inside a step: rank, window row, call duration, queue delay (us)."""
    calls = host[host["cat"].isin(LAUNCH_CATEGORIES)]
    calls = calls[calls["name"].map(is_launch).astype(bool)]
    out = pd.DataFrame({"rank": calls["rank"].to_numpy(), "window": step_rows(windows, calls),
                        "name": calls["name"].to_numpy(), "launch_us": calls["dur_us"].to_numpy()}, index=calls.index)
    links = trace.launches()
    delay = links[links["gpu_cat"] == "kernel"].drop_duplicates("cpu_index").set_index("cpu_index")["queue_delay_us"]
    out["queue_delay_us"] = delay.reindex(out.index).to_numpy()
    return out[out["window"] >= 0].reset_index(drop=True)


def _add_launch_columns(steps: pd.DataFrame, launches: pd.DataFrame) -> None:
    grouped = launches.groupby("window")
    steps["launches"] = grouped.size().reindex(steps.index, fill_value=0).astype(np.int64)
    steps["launch_us"] = grouped["launch_us"].sum().reindex(steps.index, fill_value=0.0)
    steps["queue_delay_us"] = grouped["queue_delay_us"].median().reindex(steps.index)


def _add_kernel_columns(steps, trace, windows, tiny_us) -> None:
    kernels = trace.kernels()
    row = window_index(windows, kernels["ts_us"], kernels["rank"])
    frame = pd.DataFrame({"window": row, "tiny": (kernels["dur_us"] < tiny_us).to_numpy()})
    frame = frame[frame["window"] >= 0].groupby("window")
    steps["kernels"] = frame.size().reindex(steps.index, fill_value=0).astype(np.int64)
    steps["tiny_kernels"] = frame["tiny"].sum().reindex(steps.index, fill_value=0).astype(np.int64)


def _add_ratios(frame: pd.DataFrame) -> None:
    wall = frame["wall_us"].where(frame["wall_us"] > 0)
    frame["gpu_busy_pct"] = (100.0 * frame["gpu_busy_us"] / wall).fillna(0.0)
    frame["gpu_idle_pct"] = 100.0 - frame["gpu_busy_pct"]
    frame["cpu_gpu_ratio"] = frame["host_busy_us"] / frame["gpu_busy_us"].where(frame["gpu_busy_us"] > 0)
    kernels = frame["kernels"].where(frame["kernels"] > 0)
    frame["tiny_kernel_pct"] = (100.0 * frame["tiny_kernels"] / kernels).fillna(0.0)


def overall_numbers(steps: pd.DataFrame, launches: pd.DataFrame) -> dict:
    """Sums of the per-step columns over all steps, with the percentages recomputed from the sums."""
    total = pd.DataFrame([steps[_SUMMED].sum()]) if len(steps) else pd.DataFrame([dict.fromkeys(_SUMMED, 0.0)])
    _add_ratios(total)
    out = {k: float(v) for k, v in total.iloc[0].items()}
    out["steps"] = int(len(steps))
    delays = launches["queue_delay_us"].dropna()
    out["median_queue_delay_us"] = float(delays.median()) if len(delays) else float("nan")
    out["mean_launch_us"] = out["launch_us"] / out["launches"] if out["launches"] else float("nan")
    out["launches_per_step"] = out["launches"] / max(out["steps"], 1)
    return out


# --- verdict -------------------------------------------------------------------------------------

def decide(row: dict, thresholds: dict, has_gpu: bool = True) -> tuple[str, dict]:
    """Verdict for one step (or the overall sums) and the numbers and thresholds that decided it.

    1. GPU busy >= ``gpu_bound_busy`` of the wall time: GPU-bound.
    2. Otherwise (or with no GPU events, from host time alone) the idle GPU is blamed on the host:
       input-bound when the DataLoader share >= ``input_share`` and >= the sync share; else
       sync-bound when the sync share >= ``sync_share``; else CPU-launch-bound (the host is busy
       issuing ops, or runs untraced Python, while the GPU waits).
    """
    wall = row["wall_us"] or float("nan")
    shares = {"dataloader_share": row["dataloader_us"] / wall, "sync_share": row["sync_us"] / wall,
              "host_other_share": row["host_other_us"] / wall}
    evidence = {"gpu_busy_share": row["gpu_busy_us"] / wall if has_gpu else None, **shares,
                "launches": row["launches"], "tiny_kernel_pct": row["tiny_kernel_pct"],
                **{f"threshold_{k}": v for k, v in thresholds.items()}}
    if has_gpu and row["gpu_busy_us"] >= thresholds["gpu_bound_busy"] * row["wall_us"] and row["wall_us"] > 0:
        return "GPU-bound", dict(evidence, rule=f"gpu busy >= {thresholds['gpu_bound_busy']:.0%} of step")
    if shares["dataloader_share"] >= thresholds["input_share"] and shares["dataloader_share"] >= shares["sync_share"]:
        return "input-bound", dict(evidence, rule=f"DataLoader >= {thresholds['input_share']:.0%} of step")
    if shares["sync_share"] >= thresholds["sync_share"]:
        return "sync-bound", dict(evidence, rule=f"host blocked in syncs >= {thresholds['sync_share']:.0%} of step")
    return "CPU-launch-bound", dict(evidence, rule="GPU idle; not explained by DataLoader or syncs")


# --- ops and annotations -------------------------------------------------------------------------

def _annotations(host: pd.DataFrame, n_windows: int) -> pd.DataFrame:
    """record_function ranges (user_annotation, ProfilerStep# excluded): count and time (us)."""
    marks = host[(host["cat"] == "user_annotation") & ~starts_with(host["name"], STEP_PREFIX)]
    if marks.empty:
        return pd.DataFrame(columns=["name", "count", "total_us", "mean_us", "per_step_us"])
    table = marks.groupby("name", sort=False)["dur_us"].agg(count="size", total_us="sum").reset_index()
    table["mean_us"] = table["total_us"] / table["count"]
    table["per_step_us"] = table["total_us"] / max(n_windows, 1)
    return table.sort_values("total_us", ascending=False, ignore_index=True)


# --- findings and warnings -----------------------------------------------------------------------

_FIXES = {
    "GPU-bound": "Make the kernels faster: mixed precision (torch.autocast), torch.compile to fuse kernels, "
                 "larger/better-shaped matmuls; the top kernels in the trace are where the time goes.",
    "CPU-launch-bound": "Issue fewer, larger GPU operations per step: torch.compile (mode='reduce-overhead' "
                        "adds CUDA graphs), fuse small ops, batch environments/samples, and move per-step "
                        "Python work (logging, bookkeeping) out of the hot loop.",
    "input-bound": "Feed the GPU in the background: DataLoader(num_workers>0, pin_memory=True, "
                   "persistent_workers=True, prefetch_factor=2+), or move preprocessing onto the GPU.",
    "sync-bound": "Remove host-device syncs from the step (run `perfkit syncs TRACE` to find each one and its "
                  "source line): keep values on the GPU instead of .item()/.cpu()/print, use non_blocking copies.",
}


def _outer_copy_us(host: pd.DataFrame, nested: pd.DataFrame) -> float:
    """Time in copy/convert ops not nested in another copy op (aten::to -> _to_copy -> copy_ counted once)."""
    is_copy = host["name"].isin(COPY_OPS) & (host["cat"] == "cpu_op")
    parent_op = nested["op"]
    inside_copy = parent_op.isin(host.index[is_copy])
    return float(host.loc[is_copy & ~inside_copy, "dur_us"].sum())


def _findings(r: dict, copy_us: float) -> list[Finding]:
    o = overall_numbers(r["steps"], r["launches"])
    out = [_verdict_finding(r["verdict"], r["evidence"], o)]
    if r["has_gpu"] and o["kernels"] > TINY_KERNEL_MIN_COUNT and o["tiny_kernels"] > TINY_KERNEL_SHARE * o["kernels"]:
        out.append(Finding(
            "medium", f"{o['tiny_kernel_pct']:.0f}% of {int(o['kernels']):,} kernels run under {r['tiny_kernel_us']:g} us",
            {"tiny_kernels": int(o["tiny_kernels"]), "kernels": int(o["kernels"]),
             "launches_per_step": o["launches_per_step"], "mean_launch_us": o["mean_launch_us"]},
            "Fuse the small ops (torch.compile, foreach/fused optimizers, batched tensors) so each launch does more work.",
            f"more than {TINY_KERNEL_SHARE:.0%} of more than {TINY_KERNEL_MIN_COUNT} kernels are short "
            "(torch-tb-profiler short-kernel rule)"))
    out += _dataloader_finding(r["verdict"], o) + _copy_finding(r["ops"], copy_us, o)
    return out


def _verdict_finding(verdict: str, evidence: dict, o: dict) -> Finding:
    busy = o["gpu_busy_us"] / o["wall_us"] if o["wall_us"] else 0.0
    if verdict == "GPU-bound":
        severity = "info"
    elif evidence["gpu_busy_share"] is None:
        severity = "medium"   # no GPU events: the host-only verdict cannot say how idle the GPU was
    else:
        severity = "high" if busy < LOW_UTILIZATION else "medium"
    numbers = {k: v for k, v in evidence.items() if v is not None and not k.startswith("threshold_")}
    numbers.update(wall_us=o["wall_us"], gpu_busy_us=o["gpu_busy_us"], host_busy_us=o["host_busy_us"],
                   median_queue_delay_us=o["median_queue_delay_us"])
    return Finding(severity, f"{verdict}: GPU busy {o['gpu_busy_pct']:.0f}% of {o['steps']} step(s)", numbers,
                   _FIXES[verdict], f"{evidence['rule']}; thresholds GPU-bound>={evidence['threshold_gpu_bound_busy']:.0%} "
                   f"busy, input>={evidence['threshold_input_share']:.0%}, sync>={evidence['threshold_sync_share']:.0%} "
                   "of wall (perfkit rules, see cpu_bound.py); "
                   f"busy<{LOW_UTILIZATION:.0%} is 'low utilization' in torch-tb-profiler")


def _dataloader_finding(verdict: str, o: dict) -> list[Finding]:
    share = o["dataloader_us"] / o["wall_us"] if o["wall_us"] else 0.0
    if verdict == "input-bound" or share <= DATALOADER_NOTE_SHARE:
        return []
    return [Finding("low", f"DataLoader takes {share:.1%} of step time",
                    {"dataloader_us_per_step": o["dataloader_us"] / max(o["steps"], 1), "share": share},
                    _FIXES["input-bound"], f"> {DATALOADER_NOTE_SHARE:.0%} of step time (torch-tb-profiler)")]


def _copy_finding(ops: pd.DataFrame, copy_us: float, o: dict) -> list[Finding]:
    if not o["host_busy_us"] or copy_us < COPY_OPS_SHARE * o["host_busy_us"]:
        return []
    copies = ops[ops["name"].isin(COPY_OPS) & (ops["cat"] == "cpu_op")]
    return [Finding("low", f"copy/convert ops take {copy_us / o['host_busy_us']:.0%} of host busy time",
                    {f"{n}_count": int(c) for n, c in zip(copies["name"], copies["count"])} | {"time_us": copy_us},
                    "Create tensors on the target device and dtype (torch.zeros(..., device=...)) instead of "
                    "converting every step; convert once outside the loop.",
                    f">= {COPY_OPS_SHARE:.0%} of host busy time (perfkit rule)")]


def _warnings(trace, windows: pd.DataFrame, has_gpu: bool) -> tuple:
    out = list(trace.warnings)
    if not has_gpu:
        out.append("no GPU events (kernels, memcpy, memset): the verdict uses host time only; re-profile with "
                   "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    if windows.empty:
        out.append("no host events and no steps: nothing to break down; profile with prof.step() each step")
    elif len(trace.steps) == 0:
        out.append("no steps found: the whole trace is one window; call prof.step() once per training step")
    elif len(windows) < 3:
        out.append(f"only {len(windows)} step(s): per-step numbers are noisy; profile more active steps "
                   "(torch.profiler.schedule(active=5) or more)")
    return tuple(out)


def _short(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
