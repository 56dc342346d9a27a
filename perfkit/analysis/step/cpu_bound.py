"""``cpu_bound(trace)``: is a step limited by the GPU, by the host launching work, by input
loading, by host-device syncs, or by torch.compile compiling?

Per step window (``trace.steps``; per rank) the step's wall time is split into what the GPU and
the host did in it (all in microseconds):

* ``gpu_busy_us``: union of kernel, memcpy and memset intervals of the rank's GPUs inside the window;
* ``dataloader_us``: union of ``enumerate(DataLoader)...`` annotations (the loader's ``__next__``);
* ``compile_us``: union of compile spans (``compile.compile_spans``: Dynamo/AOTAutograd/Inductor/
  Triton compile work, not the run-time wrappers of compiled code) outside data loading;
* ``sync_us``: union of blocking calls (``syncs.blocking_calls``: synchronize calls and copies that
  wait for the GPU) outside data loading and compiling; ``sync_idle_us``: the GPU idle in them and in the refill
  after each (from the sync's return until the host issues new work, ``layers.refills``);
* ``host_other_us``: the rest of the host's busy time (ops and runtime calls of any thread, union);
* ``host_busy_us`` = dataloader + compile + sync + other; ``cpu_gpu_ratio`` = host_busy / gpu_busy;
* ``launches`` / ``launch_us``: kernel launch calls (runtime and driver, cudaGraphLaunch included)
  and their summed duration; ``queue_delay_us``: median launch-to-GPU-start delay of the step's
  kernels (small when the GPU waits for the host, large when work is queued ahead of it);
* ``queued_gpu_us``: GPU time (union of kernel, memcpy and memset intervals) of the work the step's
  launches queued, wherever it ran: above ``wall_us`` when the host ran ahead of the GPU, and then the
  window is how fast the host issues work, not how long a step takes (a warning says so).

The verdict is the cause whose fix saves most when each step is replayed from its dependency graph
(``whatif``); where no replay is possible (no GPU events, no full step) ``rules.decide`` (where every threshold
is defined with its source) compares these shares of the wall time instead. ``findings`` turns it into a fix.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...results import findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from ...text import jsonable
from ...trace.ancestry import nest
from ...trace.names import starts_with
from ...trace.recorded import recorded_machine
from ...trace.schema import LAUNCH_CATEGORIES
from ...trace.steps import STEP_PREFIX, before_window, listed_steps, step_rows, step_windows, stub_steps, window_index
from ..classify import launch_mask
from ..compile import compile_facts
from ..host_ops import COPY_OPS, HOST_CATEGORIES, host_events, op_table
from ..queued import queued_gpu_us
from .findings import findings as _findings
from .layers import LAYER_COLUMNS, host_compute_ops, host_work, step_layers
from .queued import host_ahead_warning
from .rules import (COMPILE_SHARE, GPU_BOUND_BUSY, HOST_AHEAD_SHARE, INPUT_SHARE, SYNC_SHARE, VERDICTS, decide,
                    no_fix_verdict)
from .warmup import warmup_events
from .whatif import whatif

__all__ = ["CPUBoundResult", "VERDICTS", "cpu_bound", "decide", "overall_numbers"]

STEP_COLUMNS = [
    "rank", "step", "start_us", "end_us", "wall_us", "warmup_us", "gpu_busy_us", "gpu_busy_warmup_us", "gpu_busy_pct",
    "gpu_idle_pct", "comm_us", "comm_exposed_us", "comm_exposed_warmup_us", "host_busy_us", "cpu_gpu_ratio", "dataloader_us", "compile_us", "sync_us",
    "sync_blocked_us", "sync_comm_us", "sync_idle_us", "host_other_us", "launch_side_us", "host_compute_us", "python_us", "untraced_us",
    "dataloader_idle_us", "launch_side_idle_us", "host_compute_idle_us", "python_idle_us", "python_launch_idle_us",
    "untraced_launch_idle_us", "copy_busy_us", "launches", "launch_us", "queue_delay_us", "kernels", "tiny_kernels", "tiny_kernel_pct", "median_kernel_us",
    "queued_gpu_us", "verdict",
]
# The per-step verdict of a step the profiler window cut short (``trace.steps.stub_steps``).
PARTIAL_STEP = "partial step"
PARTIAL_NOTE = "cut short at the edge of the profiler window"  # in the warning that names them
_SUMMED = ["wall_us", "warmup_us", "gpu_busy_us", "gpu_busy_warmup_us", "comm_us", "comm_exposed_us",
           "comm_exposed_warmup_us", "host_busy_us", "dataloader_us",
           "compile_us", "sync_us", "sync_blocked_us", "sync_comm_us", "sync_idle_us", "host_other_us", "launch_side_us", "host_compute_us",
           "python_us", "untraced_us", "dataloader_idle_us", "launch_side_idle_us", "host_compute_idle_us",
           "python_idle_us", "python_launch_idle_us", "untraced_launch_idle_us", "copy_busy_us", "launches",
           "launch_us", "kernels", "tiny_kernels"]


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
    compile: dict | None = None
    warmup: pd.DataFrame | None = None
    host_ops: pd.DataFrame | None = None
    devices: tuple = ()
    stacks: bool = False

    def to_frame(self) -> pd.DataFrame:
        return self.steps.copy()

    @property
    def full_steps(self) -> pd.DataFrame:
        """``steps`` without the partial ones the profiler window cut short."""
        return self.steps[self.steps["verdict"] != PARTIAL_STEP]

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
                         "compile": self.compile,
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
              input_share: float = INPUT_SHARE, sync_share: float = SYNC_SHARE,
              compile_share: float = COMPILE_SHARE, host_ahead_share: float = HOST_AHEAD_SHARE) -> CPUBoundResult:
    """Classify each step (and the whole trace) as one of ``VERDICTS`` from the trace's timeline.

    ``tiny_kernel_us``: kernels shorter than this (us) count as tiny. ``gpu_bound_busy``,
    ``input_share``, ``sync_share``, ``compile_share``, ``host_ahead_share``: verdict thresholds as
    fractions of step wall time (defaults and their sources are the module constants). Never raises
    on a trace lacking GPU events or steps: those become warnings. Computed once per trace and
    arguments (diagnose, summary and step_anatomy all ask for it): the result is shared, so copy a
    table before changing it in place.
    """
    thresholds = {"compile_share": compile_share, "gpu_bound_busy": gpu_bound_busy, "input_share": input_share,
                  "host_ahead_share": host_ahead_share, "sync_share": sync_share}
    key = ("cpu_bound", float(tiny_kernel_us), *sorted(thresholds.items()))
    return trace.derived(key, lambda t: _cpu_bound(t, float(tiny_kernel_us), thresholds))


def _cpu_bound(trace, tiny_kernel_us: float, thresholds: dict) -> CPUBoundResult:
    windows, host, nested, links, work, launches, warmup = _inputs(trace)
    steps = _step_table(trace, host, nested, windows, launches, tiny_kernel_us, warmup, links, work)
    has_gpu = trace.has_gpu_events
    kind = recording_kind(trace, host)
    decided = [decide(row, thresholds, kind) for row in steps.to_dict("records")]
    steps["verdict"] = [v for v, _ in decided]
    stub = stub_steps(windows)
    steps.loc[stub, "verdict"] = PARTIAL_STEP
    overall = overall_numbers(steps[~stub] if (~stub).any() else steps, launches)
    verdict, evidence = _by_saving(trace, steps, [e for _, e in decided], *decide(overall, thresholds, kind),
                                   thresholds, kind)
    in_steps = np.isin(step_rows(windows, host), np.flatnonzero(~stub))
    result = dict(steps=steps[STEP_COLUMNS], ops=op_table(host, nested), annotations=_annotations(host, len(windows)),
                  launches=launches, verdict=verdict, evidence=evidence, has_gpu=has_gpu,
                  tiny_kernel_us=float(tiny_kernel_us), compile=compile_facts(trace), warmup=warmup,
                  host_ops=host_compute_ops(trace, host, nested, in_steps, work=work), devices=tuple(trace.devices), stacks=trace.has_python_stacks)
    findings = _findings(result, overall, copy_us=_outer_copy_us(host, nested), machine=recorded_machine(trace))
    warnings = (_warnings(trace, windows, steps, has_gpu, stub) + partial_gpu_warning(launches, has_gpu)
                + before_window_warning(trace, links))
    return CPUBoundResult(findings=rank_findings(findings), warnings=warnings, **result)


def _by_saving(trace, steps: pd.DataFrame, step_evidence: list, shares_verdict: str, evidence: dict,
               thresholds: dict, kind: str) -> tuple[str, dict]:
    """The verdict the saving decides (``whatif``), per step as overall, where the trace can be replayed
    (``rules.no_fix_verdict`` where nothing saves enough); the share rules' verdict (``rules.decide``) where it
    cannot (no GPU events, no full step launching GPU work). ``evidence["decided_by"]`` says which ("replay" or
    "shares"); ``share_verdict`` keeps the share rules' answer."""
    wi = whatif(trace) if kind == "gpu" else None
    if wi is None or wi.replay.steps.empty:
        return shares_verdict, dict(evidence, decided_by="shares")
    by_step = wi.step_verdicts()
    rows = zip(steps["rank"].astype(int), steps["step"].astype(int), steps["verdict"], step_evidence)
    steps["verdict"] = [v if v == PARTIAL_STEP else by_step.get((r, s)) or no_fix_verdict(e, thresholds)[0]
                        for r, s, v, e in rows]
    verdict, rule = (wi.verdict, wi.rule) if wi.verdict else no_fix_verdict(evidence, thresholds)
    out = dict(evidence, rule=rule, decided_by="replay", share_verdict=shares_verdict)
    if verdict == "warm-up":
        out["behind_warmup"] = wi.behind_warmup
    return verdict, out


# Host ops only a GPU runs: with no GPU event beside them, the GPU was not recorded (NCCL collectives, cuDNN, cuBLAS).
GPU_ONLY_OPS = re.compile(r"nccl|cudnn|cublas|miopen", re.IGNORECASE)


def recording_kind(trace, host: pd.DataFrame) -> str:
    """What the profiler recorded (``rules.decide``'s ``kind``): "gpu" (GPU events and host events), "nohost" (GPU
    events only), "unrecorded" (launch calls or GPU-only ops, no GPU event), "cpu" (neither: runtime calls that
    launch nothing, beside CPU kernels such as ``aten::mkldnn_convolution``, are a model run on the CPU)."""
    if trace.has_gpu_events:
        return "gpu" if not host.empty else "nohost"
    calls = host[host["cat"].isin(LAUNCH_CATEGORIES)]
    launched = bool(launch_mask(calls["name"]).any()) if len(calls) else False
    gpu_only = bool(host["name"].astype(str).str.contains(GPU_ONLY_OPS).any()) if len(host) else False
    return "unrecorded" if (launched and trace.devices) or gpu_only else "cpu"


def step_table(trace, *, tiny_kernel_us: float = 10.0) -> pd.DataFrame:
    """The per-step table of ``cpu_bound`` (``STEP_COLUMNS`` less ``verdict``, same numbers) without
    the op tables, call nesting and verdicts: for analyses that need only the per-step split
    (``perfkit.ranks`` reduces each rank to it)."""
    windows, host, nested, links, work, launches, warmup = _inputs(trace)
    steps = _step_table(trace, host, nested, windows, launches, tiny_kernel_us, warmup, links, work)
    return steps[STEP_COLUMNS[:-1]]


def _inputs(trace) -> tuple:
    """What the per-step table is built from: step windows, host events and their nesting, launch
    links, host work, the launch table and the warm-up calls."""
    windows = step_windows(trace)
    host = host_events(trace, HOST_CATEGORIES)
    nested = nest(host)
    links = trace.launches()
    work = host_work(trace, host, links)
    return (windows, host, nested, links, work, _launch_table(host, nested, windows, links),
            warmup_events(trace, host=host, links=links))


# --- per-step table ------------------------------------------------------------------------------

def _step_table(trace, host, nested, windows, launches, tiny_us, warmup, links, work) -> pd.DataFrame:
    """The window's layers of time (``layers.step_layers``) with its launch and kernel columns."""
    steps = windows.rename(columns={"dur_us": "wall_us"}).copy()
    layers = step_layers(trace, host, nested, windows, warmup, links=links, work=work)
    for column in LAYER_COLUMNS:
        steps[column] = layers[column].to_numpy()
    _add_launch_columns(steps, launches)
    _add_kernel_columns(steps, trace, windows, tiny_us)
    steps["queued_gpu_us"] = queued_gpu_us(trace, windows, links)
    _add_ratios(steps)
    return steps


def _launch_table(host, nested, windows, links) -> pd.DataFrame:
    """One row per launch call inside a step: rank, window row, name, ``top_op`` (the outermost op the
    user called around it, "" for none), call duration, queue delay (us). ``links``: ``trace.launches()``."""
    calls = host[host["cat"].isin(LAUNCH_CATEGORIES)]
    calls = calls[launch_mask(calls["name"])]
    top = nested["top"].reindex(calls.index).to_numpy()
    names = host["name"].astype(str)
    top_op = np.where(top >= 0, names.reindex(np.where(top >= 0, top, calls.index)).to_numpy(), "")
    out = pd.DataFrame({"rank": calls["rank"].to_numpy(), "window": step_rows(windows, calls),
                        "name": calls["name"].to_numpy(), "top_op": top_op,
                        "launch_us": calls["dur_us"].to_numpy()}, index=calls.index)
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
    frame = pd.DataFrame({"window": row, "tiny": (kernels["dur_us"] < tiny_us).to_numpy(),
                          "dur_us": kernels["dur_us"].to_numpy()})
    frame = frame[frame["window"] >= 0].groupby("window")
    steps["kernels"] = frame.size().reindex(steps.index, fill_value=0).astype(np.int64)
    steps["tiny_kernels"] = frame["tiny"].sum().reindex(steps.index, fill_value=0).astype(np.int64)
    steps["median_kernel_us"] = frame["dur_us"].median().reindex(steps.index)


def _add_ratios(frame: pd.DataFrame) -> None:
    wall = frame["wall_us"].where(frame["wall_us"] > 0)
    steady = (frame["wall_us"] - frame["warmup_us"]).where(lambda w: w > 0)
    # over the step less its warm-up, as every verdict share is; a step that is warm-up whole: over its window
    frame["gpu_busy_pct"] = (100.0 * (frame["gpu_busy_us"] - frame["gpu_busy_warmup_us"]) / steady).fillna(
        100.0 * frame["gpu_busy_us"] / wall).fillna(0.0)
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
    kernels = steps["median_kernel_us"].dropna() if "median_kernel_us" in steps else pd.Series(dtype=float)
    out["median_kernel_us"] = float(kernels.median()) if len(kernels) else float("nan")
    return out


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

def _outer_copy_us(host: pd.DataFrame, nested: pd.DataFrame) -> float:
    """Time in copy/convert ops not nested in another copy op (aten::to -> _to_copy -> copy_ counted once)."""
    is_copy = host["name"].isin(COPY_OPS) & (host["cat"] == "cpu_op")
    parent_op = nested["op"]
    inside_copy = parent_op.isin(host.index[is_copy])
    return float(host.loc[is_copy & ~inside_copy, "dur_us"].sum())


# --- warnings ------------------------------------------------------------------------------------

def _warnings(trace, windows: pd.DataFrame, steps: pd.DataFrame, has_gpu: bool, stub: np.ndarray) -> tuple:
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
    if stub.any():
        out.append(f"{listed_steps(windows[stub])}: {PARTIAL_NOTE}; its row says {PARTIAL_STEP!r} "
                   "instead of a verdict and the overall verdict leaves it out")
    return tuple(out) + host_ahead_warning(steps[~stub] if (~stub).any() else steps)


# Launch calls with no GPU event recorded, from this share of the steps' launches (and at least
# PARTIAL_MIN_LAUNCHES of them): the GPU side of the recording is partial (CUPTI's buffer filled or the
# profiler stopped before the device flushed), so GPU busy and every kernel figure are understated. A
# trace with 378 of 530 launches unmatched read as an idle GPU with no word of it (perfkit rule).
PARTIAL_GPU_SHARE = 0.10
PARTIAL_MIN_LAUNCHES = 10


def partial_gpu_warning(launches: pd.DataFrame, has_gpu: bool) -> tuple:
    """One warning when the steps' launch calls often have no GPU event (``launches``: the launch table,
    whose ``queue_delay_us`` is NaN for a launch that matched no kernel)."""
    if not has_gpu or launches.empty:
        return ()
    missing = int(launches["queue_delay_us"].isna().sum())
    if missing < PARTIAL_MIN_LAUNCHES or missing < PARTIAL_GPU_SHARE * len(launches):
        return ()
    return (f"the GPU recording is partial: {missing:,} of {len(launches):,} launch calls in the steps have no kernel "
            "in the trace (CUPTI dropped them or the profiler stopped first), so GPU busy time and the kernel "
            "figures are understated; record fewer steps per trace or raise CUPTI's buffer "
            "(TORCH_CUPTI_BUFFER_SIZE) and profile again",)


def before_window_warning(trace, links: pd.DataFrame) -> tuple:
    """One warning naming the GPU work launched before the window (``trace.steps.before_window``): the GPU ran it
    inside the steps, so it is in GPU busy, but it is the previous step's, not these steps' own."""
    gpu = trace.gpu_events()
    early = before_window(gpu, gpu.index.isin(links["gpu_index"].to_numpy()))
    if not early.any():
        return ()
    return (f"{int(early.sum()):,} GPU events ({float(gpu['dur_us'].to_numpy()[early].sum()) / 1e3:,.2f} ms) were "
            "launched before the profiler's window (no launch call in the trace): they ran at the start of the "
            "recording, and where that is inside a step they are in its GPU busy time, but they are the previous "
            "step's work (perfkit gpu-kernels leaves them out)",)


def _short(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
