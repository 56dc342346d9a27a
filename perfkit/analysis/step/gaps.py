"""``gpu_gaps(trace)``: every interval in which a GPU sat idle, per step, with why and in which code.

Per device, the compute stream is the stream with the most busy time. Inside each step window, each interval in
which the compute stream runs nothing is one gap (times in microseconds), split where other streams start or stop:
a piece during which another stream of the device works is ``other_stream`` (the compute stream waits for a copy
or a collective); a piece during which the whole device is idle is classified by what the host thread that
launches the next GPU work (the rank's main thread when nothing follows in the step) did during it, each rule
needing at least half of the gap (``MOST``):

``input``      inside a DataLoader ``__next__`` (the annotation, or Python frames in torch/utils/data);
``compile``    inside torch.compile (Dynamo's frame conversion, Inductor/AOTAutograd compilation);
``sync_wait``  blocked in a call that waits (``syncs.blocking_calls``, and copies from pageable memory, which stage
               through a pinned buffer before returning);
``launch``     inside kernel/copy launch calls;
``tail``       none of those, and no GPU work follows in the step: the end of the step;
``host_python`` none of those: the host runs Python or ops (or code the profiler did not record).

Each gap names the function the thread was busy with during it: the frame with the most self time inside the gap,
reported as its nearest caller in user code (``stacks.is_library``; else the first caller outside torch) or,
without Python stacks, as its outermost host op.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from ...text import jsonable
from ...trace import intervals
from ...trace.intervals import Coverage
from ...trace.names import starts_with
from ...trace.steps import full_step_windows
from ...trace.threads import event_threads
from ..frames import dominant_frames, frame_table, innermost_segments, subset
from ..host_ops import DATALOADER_PREFIX
from ..stacks import TORCH_PACKAGES, is_library
from .lanes import rank_timelines

CLASSES = ("input", "launch", "sync_wait", "host_python", "compile", "other_stream", "tail")
# A host activity explains a gap when it covers at least half of it (perfkit rule: "most of").
MOST = 0.5
INPUT_FILES = ("torch/utils/data/",)
# Compilation entry points: file -> functions (None: any). Only code that runs while compiling:
# Dynamo calls convert_frame only on a cache miss; the runtime halves of these packages
# (torch/_inductor/runtime, eval_frame wrappers, AOTAutograd's forward, Triton's launcher) run on
# every call and are left out.
COMPILE_FRAMES = {
    "torch/_dynamo/convert_frame.py": None,
    "torch/_inductor/compile_fx.py": {"compile_fx", "compile_fx_inner", "_compile_fx_inner", "fx_codegen_and_compile",
                                      "fw_compiler_base", "bw_compiler", "codegen_and_compile"},
    "torch/_functorch/aot_autograd.py": {"aot_module_simplified", "create_aot_dispatcher_function",
                                         "_create_aot_dispatcher_function", "aot_function"},
    "triton/compiler/compiler.py": {"compile"},
}
COMPILE_NAMES = ("compile_inner", "call_user_compiler", "compile_fx", "compile_to_module", "async_compile")
GAP_COLUMNS = ["rank", "device", "step", "start_us", "dur_us", "class", "thread", "function", "file", "line",
               "input_us", "compile_us", "sync_us", "launch_us"]
TOP_GAPS = 10
FIXES = {
    "input": "Load batches in worker processes (DataLoader num_workers>0, persistent_workers=True, pin_memory=True) "
             "or prefetch the next batch to the GPU while this one trains.",
    "launch": "Many small kernels: fuse them (torch.compile), replay them as a CUDA graph (mode='reduce-overhead', "
              "torch.cuda.graphs) or batch the work into fewer, larger ops.",
    "sync_wait": "The host blocked in a waiting call while the GPU idled: copy from pinned memory with "
                 "non_blocking=True and keep synchronize/.item() out of the step (perfkit sync-points lists them).",
    "host_python": "The GPU waited for the host's Python and the framework code it runs, which includes issuing "
                   "each kernel: with many small kernels issue fewer, larger ones (the launch-bound fix); else "
                   "vectorize or move per-step host work (logging, environment steps, indexing) off the step; "
                   "perfkit hotspots shows where the host time goes.",
    "compile": "torch.compile compiled inside the step: warm up before profiling, and stop recompiles "
               "(dynamic=True or torch._dynamo.mark_dynamic; TORCH_LOGS=recompiles says why they happen).",
    "other_stream": "The compute stream waited for another stream (a copy or a collective): start copies earlier "
                    "and overlap communication with compute.",
    "tail": "The GPU finished before the step did: end-of-step host work (optimizer bookkeeping, logging, "
            "checkpoints) ran with the GPU idle; move it off the step or start the next step's GPU work first.",
}
# Severity of a class by its idle time as a share of step wall time, the thresholds of syncs.
HIGH_SHARE, MEDIUM_SHARE = 0.10, 0.02


@dataclass(frozen=True, eq=False, repr=False)
class GapsResult:
    """``gaps``: one row per idle interval (``GAP_COLUMNS``; ``*_us`` columns: how much of it the
    thread spent in input loading, compilation, blocking calls and launch calls). ``steps``: per
    step window, wall time, GPU busy time (device union: ``gpu_busy_us`` + the idle classes other than
    ``other_stream`` = ``wall_us``), the compute stream's busy time (``compute_busy_us`` + every idle
    class = ``wall_us``) and idle time per class (one GPU per rank; with several, per device summed). ``has_gpu``:
    False for a trace without GPU activity (then nothing else is filled)."""

    gaps: pd.DataFrame
    steps: pd.DataFrame
    has_gpu: bool
    findings: tuple
    warnings: tuple

    def to_frame(self) -> pd.DataFrame:
        return self.gaps.copy()

    @property
    def totals(self) -> dict:
        """Per class: ``count``, ``dur_us`` and ``share`` of all idle time."""
        total = float(self.gaps["dur_us"].sum())
        by = self.gaps.groupby("class")["dur_us"].agg(["size", "sum"])
        return {c: {"count": int(by.at[c, "size"]) if c in by.index else 0,
                    "dur_us": float(by.at[c, "sum"]) if c in by.index else 0.0,
                    "share": float(by.at[c, "sum"]) / total if c in by.index and total > 0 else 0.0}
                for c in CLASSES}

    def top(self, n: int = TOP_GAPS) -> pd.DataFrame:
        """The ``n`` longest gaps with their class and function."""
        return self.gaps.sort_values("dur_us", ascending=False, kind="stable").head(n).reset_index(drop=True)

    def to_json(self) -> dict:
        # The rows are plain values already (``_rows_json``): walking a hundred thousand of them
        # again through ``jsonable`` took longer than building them.
        head = jsonable({"has_gpu": self.has_gpu, "totals": self.totals, "top": _rows_json(self.top())})
        tail = jsonable({"steps": self.steps.to_dict("records"), "findings": [dict(f.__dict__) for f in self.findings],
                         "warnings": list(self.warnings)})
        return {**head, "rows": _rows_json(self.gaps), **tail}

    def __repr__(self) -> str:
        if not self.has_gpu:
            return "<GapsResult: no GPU timeline>"
        idle = self.gaps["dur_us"].sum() / 1e3
        main = max(self.totals.items(), key=lambda kv: kv[1]["dur_us"])[0] if len(self.gaps) else "-"
        return f"<GapsResult {len(self.gaps)} gaps, {idle:.3f} ms idle, mostly {main}, {len(self.warnings)} warnings>"

    def _repr_html_(self) -> str:
        totals = pd.DataFrame(self.totals).T.reset_index(names="class")
        return html_section("GPU idle gaps", html_text(repr(self)), html_table(findings_frame(self.findings)),
                            html_table(totals), html_table(self.top()), html_table(self.steps),
                            html_warnings(self.warnings))


def _rows_json(gaps: pd.DataFrame) -> list[dict]:
    """One dict per gap of plain JSON values (a float that is not finite is None), built column by
    column (``to_dict("records")`` boxes each cell: ~1 s on 70k gaps)."""
    columns = [gaps[c].tolist() for c in ("rank", "device", "step")]
    columns += [_finite(gaps[c]) for c in ("start_us", "dur_us")]
    columns += [gaps[c].tolist() for c in ("class", "thread")]
    columns += [[v or None for v in gaps[c].tolist()] for c in ("function", "file")]
    columns.append([line if line >= 0 else None for line in gaps["line"].tolist()])
    return [dict(zip(_ROW_KEYS, values)) for values in zip(*columns)]


def _finite(column: pd.Series) -> list:
    values = column.to_numpy(dtype=np.float64)
    finite = np.isfinite(values)
    return values.tolist() if finite.all() else [v if ok else None for v, ok in zip(values.tolist(), finite.tolist())]


_ROW_KEYS = ("rank", "device", "step", "start_us", "dur_us", "class", "thread", "function", "file", "line")


def gpu_gaps(trace) -> GapsResult:
    """Every GPU idle interval of every full step window (partial steps at the profiler window's
    edge left out, with a warning: ``trace.steps.stub_steps``), classified (see the module doc). Never raises
    for a trace without GPU events: the result has ``has_gpu=False`` and says so in its warnings.
    Computed once per trace: the result is shared."""
    return trace.derived("gpu_gaps", _gpu_gaps)


def _gpu_gaps(trace) -> GapsResult:
    if not trace.has_gpu_events:
        return GapsResult(gaps=pd.DataFrame(columns=GAP_COLUMNS), steps=pd.DataFrame(), has_gpu=False, findings=(),
                          warnings=("no GPU timeline: the trace has no kernels, copies or memsets, so the GPU never "
                                    "ran and there are no gaps to explain; profile with "
                                    "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a GPU run",))
    windows, stubs = full_step_windows(trace)
    result = gaps_over(trace, windows, rank_timelines(trace))
    return replace(result, warnings=result.warnings + stubs)


def gaps_over(trace, windows: pd.DataFrame, timelines: dict) -> GapsResult:
    """:func:`gpu_gaps` of a trace with GPU events, with its step windows and timelines already built."""
    parts = [_rank_pieces(tl, windows[windows["rank"] == rank], rank) for rank, tl in timelines.items()]
    pieces = pd.concat(parts, ignore_index=True) if parts else _empty_pieces()
    frames, keys = frame_table(trace)
    pieces = _host_cover(trace, frames, keys, timelines, pieces)
    pieces["class"] = _classify(pieces)
    gaps = _with_functions(frames, keys, pieces, timelines)
    steps = _step_table(timelines, windows, gaps)
    return GapsResult(gaps=gaps, steps=steps, has_gpu=True, findings=rank_findings(_findings(gaps, steps)),
                      warnings=_warnings(trace))


# --- idle pieces ---------------------------------------------------------------------------------

def _rank_pieces(tl, windows: pd.DataFrame, rank: int) -> pd.DataFrame:
    g = tl.gpu
    device_of = ((g["lane"] >> 32) & 0xFFFF) - 1
    parts = []
    for device in np.unique(device_of):
        rows = np.flatnonzero(device_of == device)
        compute = _busiest_lane(g, rows)
        on_lane = rows[g["lane"][rows] == compute]
        busy_c = Coverage.of(g["start"][on_lane], g["end"][on_lane])
        busy_d = Coverage.of(g["start"][rows], g["end"][rows])
        starts = np.sort(g["start"][rows])
        for win in windows.itertuples(index=False):
            parts.append(_window_pieces(tl, g, rows, starts, busy_c, busy_d, win, rank, int(device)))
    return pd.concat(parts, ignore_index=True) if parts else _empty_pieces()


def _busiest_lane(g: dict, rows: np.ndarray) -> int:
    lanes = g["lane"][rows]
    busy = {int(lane): Coverage.of(g["start"][rows[lanes == lane]], g["end"][rows[lanes == lane]]).prefix[-1]
            for lane in np.unique(lanes)}
    return max(busy, key=busy.get)


def _window_pieces(tl, g, rows, starts, busy_c, busy_d, win, rank: int, device: int) -> pd.DataFrame:
    cs, ce = busy_c.gaps(win.start_us, win.end_us)
    ds, de = busy_d.gaps(win.start_us, win.end_us)
    os_, oe = intervals.subtract(cs, ce, ds, de)
    a, b = np.concatenate([ds, os_]), np.concatenate([de, oe])
    other = np.concatenate([np.zeros(len(ds), bool), np.ones(len(os_), bool)])
    order = np.argsort(a, kind="stable")
    a, b, other = a[order], b[order], other[order]
    by_start = rows[np.argsort(g["start"][rows], kind="stable")]
    nxt = np.searchsorted(starts, b, side="left")
    launcher = np.where(nxt < len(starts), g["launch_thread"][by_start[np.clip(nxt, 0, len(starts) - 1)]], -1)
    tail = b >= win.end_us
    thread = np.where(tail | (launcher < 0), tl.main, launcher)
    return pd.DataFrame({"rank": rank, "device": device, "step": win.step, "start_us": a, "end_us": b,
                         "other": other, "tail": tail, "thread_code": thread.astype(np.int64)})


def _empty_pieces() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in (
        ("rank", np.int64), ("device", np.int64), ("step", np.int64), ("start_us", float), ("end_us", float),
        ("other", bool), ("tail", bool), ("thread_code", np.int64))})





# --- host activity during each piece -------------------------------------------------------------

def _host_cover(trace, frames, keys, timelines, pieces: pd.DataFrame) -> pd.DataFrame:
    """Add ``input_us``, ``compile_us``, ``sync_us`` and ``launch_us``: how much of each piece its
    thread spent in DataLoader loading, compilation, blocking calls and launch calls."""
    out = {c: np.zeros(len(pieces)) for c in ("input_us", "compile_us", "sync_us", "launch_us")}
    marked = _marked_intervals(trace, frames, keys)
    a, b = pieces["start_us"].to_numpy(), pieces["end_us"].to_numpy()
    for (rank, code), rows in pieces.groupby(["rank", "thread_code"]).indices.items():
        lane = timelines[rank].hosts.get(int(code))
        for what in ("input", "compile"):
            iv = marked[(marked["thread"] == code) & (marked["what"] == what)]
            out[f"{what}_us"][rows] = Coverage.of(iv["start"], iv["end"]).within(a[rows], b[rows])
        if lane is not None:
            out["sync_us"][rows] = lane.blocking.within(a[rows], b[rows])
            out["launch_us"][rows] = lane.calls.within(a[rows], b[rows]) - out["sync_us"][rows]
    return pieces.assign(**out)


def _marked_intervals(trace, frames: pd.DataFrame, keys: pd.DataFrame) -> pd.DataFrame:
    """Intervals of input loading and of compilation per thread (``thread``, ``what``, ``start``, ``end``)."""
    file, function = keys["file"].to_numpy(), keys["function"].to_numpy()
    is_input = np.array([any(x in f for x in INPUT_FILES) for f in file], dtype=bool)
    is_compile = np.array([_compiling(f, fn) for f, fn in zip(file, function)], dtype=bool)
    parts = []
    for what, flag in (("input", is_input), ("compile", is_compile)):
        hit = frames[flag[frames["key"].to_numpy()]]
        parts.append(pd.DataFrame({"thread": hit["thread"], "what": what, "start": hit["start_us"], "end": hit["end_us"]}))
    ev = trace.events
    names = ev["name"]
    compile_name = np.asarray(names.cat.categories.str.contains("|".join(COMPILE_NAMES)), dtype=bool)
    codes = names.cat.codes.to_numpy()
    complete = (ev["ph"] == "X").to_numpy()
    for what, mask in (("input", starts_with(names, DATALOADER_PREFIX)), ("compile", compile_name[codes] & (codes >= 0))):
        rows = np.flatnonzero(mask & complete)
        start = ev["ts_us"].to_numpy()[rows]
        parts.append(pd.DataFrame({"thread": event_threads(trace)[rows], "what": what, "start": start,
                                   "end": start + ev["dur_us"].to_numpy()[rows]}))
    return pd.concat(parts, ignore_index=True)


def _compiling(file: str, function: str) -> bool:
    for suffix, functions in COMPILE_FRAMES.items():
        if file.endswith(suffix) and (functions is None or function in functions):
            return True
    return False


def _classify(p: pd.DataFrame) -> np.ndarray:
    most = MOST * (p["end_us"] - p["start_us"]).to_numpy()
    conditions = [p["other"].to_numpy(), p["compile_us"].to_numpy() >= most, p["input_us"].to_numpy() >= most,
                  p["sync_us"].to_numpy() >= most, p["launch_us"].to_numpy() >= most, p["tail"].to_numpy()]
    return np.select(conditions, ["other_stream", "compile", "input", "sync_wait", "launch", "tail"],
                     default="host_python")


# --- the function behind each gap ----------------------------------------------------------------

def _with_functions(frames, keys, pieces: pd.DataFrame, timelines: dict) -> pd.DataFrame:
    code = pieces["thread_code"].to_numpy()
    mine = subset(frames, np.isin(frames["thread"].to_numpy(), np.unique(code)))
    pos = dominant_frames(mine, innermost_segments(mine), code, pieces["start_us"].to_numpy(),
                          pieces["end_us"].to_numpy())
    key = _reported_keys(mine, keys, pos)
    hit = key >= 0
    safe = np.clip(key, 0, None)
    labels = {c: lbl for tl in timelines.values() for c, lbl in tl.thread_labels.items()}
    out = pieces.assign(
        dur_us=pieces["end_us"] - pieces["start_us"],
        thread=[labels.get(int(c), str(c)) for c in code],
        function=np.where(hit, keys["function"].to_numpy()[safe], ""),
        file=np.where(hit, keys["file"].to_numpy()[safe], ""),
        line=np.where(hit, keys["line"].to_numpy()[safe], -1))
    return out[GAP_COLUMNS].sort_values(["rank", "start_us"], kind="stable").reset_index(drop=True)


def _reported_keys(frames: pd.DataFrame, keys: pd.DataFrame, pos: np.ndarray) -> np.ndarray:
    """Key of the frame to report for each dominant frame: its nearest user-code caller (else the
    first caller outside torch, else itself); for host ops, the outermost op (record_function
    ranges other than DataLoader's are regions, not ops). All dominant frames walk up together."""
    parent, key, python = frames["parent"].to_numpy(), frames["key"].to_numpy(), frames["python"].to_numpy()
    region = frames["region"].to_numpy()
    file = keys["file"].to_numpy()
    user = np.array([bool(f) and not is_library(f) for f in file], dtype=bool)
    non_torch = np.array([bool(f) and not is_library(f, TORCH_PACKAGES) for f in file], dtype=bool)
    valid = pos >= 0
    start, inverse = np.unique(pos[valid], return_inverse=True)
    py = python[start]
    found = np.where(py, -1, start)  # host ops: the outermost non-region frame so far
    outside_torch = np.full(len(start), -1, dtype=np.int64)
    cur = start.copy()
    live = np.arange(len(start))
    while len(live):
        at, live_py = cur[live], py[live]
        hit = live_py & user[key[at]]
        found[live[hit]] = at[hit]
        first = live_py & (outside_torch[live] < 0) & non_torch[key[at]]
        outside_torch[live[first]] = at[first]
        op = ~live_py & ~region[at]
        found[live[op]] = at[op]
        cur[live] = np.where(hit, -1, parent[at])
        live = live[cur[live] >= 0]
    chosen = np.where(py & (found < 0), np.where(outside_torch >= 0, outside_torch, start), found)
    out = np.full(len(pos), -1, dtype=np.int64)
    out[valid] = key[chosen][inverse.ravel()]
    return out


# --- per step, findings, warnings ----------------------------------------------------------------

def _step_table(timelines: dict, windows: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    steps = windows[["rank", "step", "start_us", "end_us"]].copy()
    steps["wall_us"] = steps["end_us"] - steps["start_us"]
    steps["gpu_busy_us"] = 0.0
    steps["compute_busy_us"] = 0.0
    for rank, tl in timelines.items():
        rows = (steps["rank"] == rank).to_numpy()
        a, b = steps["start_us"].to_numpy()[rows], steps["end_us"].to_numpy()[rows]
        steps.loc[rows, "gpu_busy_us"] = Coverage.of(tl.gpu["start"], tl.gpu["end"]).within(a, b)
        g = tl.gpu
        device_of = ((g["lane"] >> 32) & 0xFFFF) - 1
        for device in np.unique(device_of):
            lane_rows = np.flatnonzero(device_of == device)
            on = lane_rows[g["lane"][lane_rows] == _busiest_lane(g, lane_rows)]
            steps.loc[rows, "compute_busy_us"] += Coverage.of(g["start"][on], g["end"][on]).within(a, b)
    by = gaps.pivot_table(index=["rank", "step"], columns="class", values="dur_us", aggfunc="sum", fill_value=0.0)
    by = by.reindex(columns=list(CLASSES), fill_value=0.0).add_suffix("_us").reset_index()
    steps = steps.merge(by, on=["rank", "step"], how="left").fillna({f"{c}_us": 0.0 for c in CLASSES})
    return steps


def _findings(gaps: pd.DataFrame, steps: pd.DataFrame) -> list[Finding]:
    wall = float(steps["wall_us"].sum())
    idle = float(gaps["dur_us"].sum())
    out = []
    for cls, grp in gaps.groupby("class"):
        share = float(grp["dur_us"].sum()) / wall if wall > 0 else 0.0
        if share < MEDIUM_SHARE:
            continue
        longest = grp.sort_values("dur_us", ascending=False).iloc[0]
        out.append(Finding(
            "high" if share >= HIGH_SHARE else "medium",
            f"GPU idle for {cls}: {grp['dur_us'].sum() / 1e3:,.3f} ms ({100 * share:.1f}% of step time) in "
            f"{len(grp):,} gaps; longest {longest['dur_us'] / 1e3:,.3f} ms at step {longest['step']}{_where(longest)}",
            {"idle_us": float(grp["dur_us"].sum()), "share_of_step_time": share,
             "share_of_idle": float(grp["dur_us"].sum()) / idle if idle > 0 else 0.0, "gaps": int(len(grp)),
             "longest_start_us": float(longest["start_us"]), "longest_us": float(longest["dur_us"])},
            FIXES[cls], f"'high' from {HIGH_SHARE:.0%}, 'medium' from {MEDIUM_SHARE:.0%} of step wall time (perfkit rule)"))
    return out


def _where(row) -> str:
    if not row["function"]:
        return ""
    return f" in {row['function']} ({row['file']}:{row['line']})" if row["file"] else f" in {row['function']}"


def _warnings(trace) -> tuple:
    if not trace.has_python_stacks:
        return ("no Python stacks: gaps name host ops, not Python functions; re-profile with with_stack=True",)
    return ()
