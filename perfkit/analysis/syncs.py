"""``syncs(trace)``: every point where the host waits for the GPU, where it comes from, and how
long it blocks.

Candidates (host side):

* blocking runtime calls (``classify.SYNC_RUNTIME``: stream/device/event synchronize, cudaMemcpy);
* device-to-host copy launches that block the host: synchronous launches, or copies into pageable
  memory (cudaMemcpyAsync to pageable memory returns only when the copy is done);
* ops that read device data on the host (``ops.SYNC_OPS``: aten::item / _local_scalar_dense,
  nonzero, is_nonzero, masked_select, unique, repeat_interleave).

One sync point is counted once. Candidates nested in a sync op belong to its outermost sync op
(aten::is_nonzero -> aten::item -> aten::_local_scalar_dense -> cudaStreamSynchronize is one
``is_nonzero``); a blocking call or copy inside an op that launched a device-to-host copy belongs
to that op (``memcpy_dtoh``: ``.cpu()`` is one sync, not a copy plus a stream sync). Blocked time is
the host duration of that outermost event. ``gpu_confirmed`` says a blocking runtime call or copy
was seen inside it (an aten::item on a CPU tensor is listed, but not confirmed). On a trace with no
CUDA runtime events at all, an aten::item issued from inside another op that is not a sync op
(aten::std, fused Adam, aten::multinomial's aten::_assert_async) is that op's CPU implementation and
is left out, with a warning: the op's CUDA kernel does not read the value on the host.

``cuda_sync`` events are the GPU timeline's view of the same synchronize calls (same correlation
id): they are never added to the totals, only listed in ``gpu_side`` with how many match a host
call. "Stream Wait Event" is a GPU-side wait between streams and does not block the host.

Source lines come from ``stacks.user_frames``: the innermost user function running when the sync
point started, as ``file``, ``line`` (the function's first line, as Kineto records it) and ``func``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from ..trace.schema import LAUNCH_CATEGORIES
from .classify import SYNC_RUNTIME, copies_frame
from .ops import SYNC_OPS, host_events, jsonable, nest, step_index, step_windows
from .stacks import user_frames

# Severity of a sync site by its blocked time as a share of step wall time: "high" from 10% (the
# sync-bound threshold of cpu_bound), "medium" from 2%, else "low" (perfkit rule).
HIGH_SHARE, MEDIUM_SHARE = 0.10, 0.02
MAX_SITE_FINDINGS = 5

FIXES = {
    "stream_sync": "A stream synchronize inside {op}: usually a blocking copy (.to(device) without non_blocking, "
                   ".cpu()); copy non_blocking=True from pinned memory, or move the read out of the step.",
    "device_sync": "torch.cuda.synchronize(): keep it only around timed regions, never inside the training step.",
    "event_sync": "event.synchronize()/elapsed_time() waits for the GPU: read timings every N steps or poll "
                  "event.query().",
    "memcpy_sync": "A synchronous cudaMemcpy: use tensor.to(device, non_blocking=True) with pinned host memory.",
    "memcpy_dtoh": "A device-to-host copy (.cpu(), .numpy(), .tolist()) waits for the GPU: keep the data on the "
                   "GPU, or copy non_blocking into pinned memory and read it a step later.",
    "item": ".item() reads a GPU scalar: accumulate on the GPU (total += loss.detach()) and read it every N steps; "
            "replace Python branches on tensors with torch.where.",
    "nonzero": "nonzero()/boolean-mask indexing sizes its output from GPU data: use torch.where or masked "
               "arithmetic, or nonzero_static(size=...).",
    "is_nonzero": "`if tensor:` / bool(tensor) reads a GPU value: use torch.where, or torch._assert_async for checks.",
    "dynamic_shape": "The output size depends on GPU data (masked_select, unique, repeat_interleave): pass "
                     "output_size / fixed sizes, or use masks.",
}
EPISODE_COLUMNS = ["kind", "name", "op", "top_op", "rank", "step", "ts_us", "blocked_us", "gpu_confirmed",
                   "frame", "file", "line", "func"]
SITE_COLUMNS = ["kind", "op", "file", "line", "count", "blocked_us", "per_step", "steps_seen", "gpu_confirmed",
                "top_op", "func"]


@dataclass(frozen=True, eq=False, repr=False)
class SyncResult:
    """``events``: one row per sync point (columns ``EPISODE_COLUMNS``; times in us).
    ``to_frame()``: sites (kind, op, source line) ranked by blocked time. ``gpu_side``: the
    cuda_sync events, not counted in totals."""

    events: pd.DataFrame
    gpu_side: pd.DataFrame
    n_steps: int
    wall_us: float
    findings: tuple
    warnings: tuple

    def to_frame(self) -> pd.DataFrame:
        return site_table(self.events, self.n_steps)

    @property
    def by_kind(self) -> pd.DataFrame:
        """count, blocked_us and per_step per kind, most blocked first."""
        g = self.events.groupby("kind", sort=False).agg(count=("blocked_us", "size"), blocked_us=("blocked_us", "sum"))
        g["per_step"] = g["count"] / self.n_steps
        return g.sort_values("blocked_us", ascending=False).reset_index()

    @property
    def total(self) -> dict:
        ev = self.events
        return {"count": int(len(ev)), "blocked_us": float(ev["blocked_us"].sum()),
                "per_step": len(ev) / self.n_steps, "gpu_confirmed": int(ev["gpu_confirmed"].sum()),
                "steps": self.n_steps, "wall_us": self.wall_us}

    def to_json(self) -> dict:
        """JSON-ready dict: total, by_kind, sites (file/line null without Python stacks), gpu_side."""
        sites = self.to_frame()
        return jsonable({
            "total": self.total,
            "by_kind": {r["kind"]: {"count": int(r["count"]), "blocked_us": float(r["blocked_us"]),
                                    "per_step": float(r["per_step"])} for r in self.by_kind.to_dict("records")},
            "sites": [_site_json(r) for r in sites.to_dict("records")],
            "gpu_side": self.gpu_side.to_dict("records"),
            "findings": [dict(f.__dict__) for f in self.findings],
            "warnings": list(self.warnings),
        })

    def __repr__(self) -> str:
        t = self.total
        return (f"<SyncResult {t['count']} sync points ({t['per_step']:.3g}/step), {t['blocked_us'] / 1e3:.3f} ms "
                f"blocked, {len(self.to_frame())} sites, {len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        t = self.total
        head = html_text(f"{t['count']} sync points, {t['blocked_us'] / 1e3:.3f} ms blocked over {t['steps']} steps")
        return html_section("Host-device syncs", head, html_table(findings_frame(self.findings)),
                            html_table(self.by_kind), html_table(self.to_frame()), html_table(self.gpu_side),
                            html_warnings(self.warnings))


def syncs(trace) -> SyncResult:
    """Find every host-blocking event of ``trace`` (see the module doc for the rules), with its
    blocked time (us), step, enclosing op and user source line. Never raises for traces without GPU
    events, steps or Python stacks: those become warnings."""
    host = host_events(trace)
    nested = nest(host)
    dtoh = _dtoh_launches(trace)
    candidates = _candidates(host, dtoh)
    anchors = _anchors(candidates, host, nested, dtoh_ops=set(nested["op"].reindex(dtoh.index).dropna()) - {-1})
    windows = step_windows(trace)
    cpu_only = not host["cat"].isin(LAUNCH_CATEGORIES).any()
    events, internal = _drop_cpu_internal(_episodes(trace, anchors, host, nested, windows), cpu_only)
    n_steps, wall_us = max(len(windows), 1), float(windows["dur_us"].sum())
    gpu_side = _gpu_side(trace, candidates)
    findings = _findings(events, n_steps, wall_us)
    return SyncResult(events=events, gpu_side=gpu_side, n_steps=n_steps, wall_us=wall_us,
                      findings=rank_findings(findings), warnings=_warnings(trace, cpu_only, gpu_side) + internal)


# --- candidates and anchors ----------------------------------------------------------------------

def blocking_calls(trace, host: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``host`` (host events of ``trace``) that block the calling thread: blocking runtime
    calls and blocking device-to-host copy launches (the runtime side of the rules above)."""
    candidates = _candidates(host, _dtoh_launches(trace))
    return host.loc[candidates.index[candidates["source"] != "op"]]


def _candidates(host: pd.DataFrame, dtoh: pd.DataFrame) -> pd.DataFrame:
    """Host events that may block: index = event label; ``kind`` and ``source`` (runtime/copy/op)."""
    calls = host[host["cat"].isin(LAUNCH_CATEGORIES)]
    runtime = calls[calls["name"].isin(list(SYNC_RUNTIME))]
    frame = pd.DataFrame({"kind": runtime["name"].map(SYNC_RUNTIME), "source": "runtime"}, index=runtime.index)
    blocking_copy = dtoh[(dtoh["memory"] != "pinned") | dtoh["launch_name"].isin(list(SYNC_RUNTIME))].index
    extra = blocking_copy.difference(frame.index)
    frame = pd.concat([frame, pd.DataFrame({"kind": "memcpy_dtoh", "source": "copy"}, index=extra)])
    frame.loc[frame.index.intersection(blocking_copy), "kind"] = "memcpy_dtoh"
    ops = host[(host["cat"] == "cpu_op") & host["name"].isin(list(SYNC_OPS))]
    return pd.concat([frame, pd.DataFrame({"kind": ops["name"].map(SYNC_OPS), "source": "op"}, index=ops.index)])


def _dtoh_launches(trace) -> pd.DataFrame:
    """Launch calls of device-to-host copies: index = launch label; ``memory``, ``launch_name``."""
    copies = copies_frame(trace.events)
    copies = copies[copies["direction"] == "DtoH"]
    links = trace.launches()
    links = links[links["gpu_index"].isin(copies.index)]
    out = pd.DataFrame({"memory": copies["memory"].reindex(links["gpu_index"]).to_numpy(),
                        "launch_name": links["launch_name"].to_numpy()}, index=links["cpu_index"].to_numpy())
    return out[~out.index.duplicated()]


def _anchors(candidates: pd.DataFrame, host: pd.DataFrame, nested: pd.DataFrame, dtoh_ops: set) -> pd.DataFrame:
    """Per candidate: ``anchor`` (label of the event the sync point is counted on) and its ``kind``.
    ``dtoh_ops``: labels of the innermost ops around device-to-host copy launches."""
    parent = nested["parent"].to_dict()
    sync_ops = set(candidates.index[candidates["source"] == "op"])
    anchor, kind = [], []
    names = host["name"]
    for label, row in zip(candidates.index, candidates.itertuples(index=False)):
        outer_op = _outermost(label, parent, sync_ops)
        if outer_op >= 0:
            anchor.append(outer_op)
            kind.append(SYNC_OPS[names[outer_op]])
            continue
        op = int(nested.at[label, "op"])
        if row.source != "op" and op in dtoh_ops:
            anchor.append(op)
            kind.append("memcpy_dtoh")
        else:
            anchor.append(label)
            kind.append(row.kind)
    return candidates.assign(anchor=np.asarray(anchor, dtype=np.int64), anchor_kind=kind)


def _outermost(label: int, parent: dict, members: set) -> int:
    best, cur = -1, label
    while cur >= 0:
        if cur in members:
            best = cur
        cur = parent.get(cur, -1)
    return best


# --- sync points ---------------------------------------------------------------------------------

def _episodes(trace, anchors: pd.DataFrame, host: pd.DataFrame, nested: pd.DataFrame, windows) -> pd.DataFrame:
    if anchors.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in EPISODE_COLUMNS}).astype(
            {"rank": np.int64, "step": np.int64, "ts_us": float, "blocked_us": float, "gpu_confirmed": bool})
    confirmed = anchors[anchors["source"] != "op"].groupby("anchor").size()
    first = anchors.drop_duplicates("anchor").set_index("anchor")
    ev = host.loc[first.index]
    names = host["name"]
    is_op = (ev["cat"] == "cpu_op").to_numpy()
    op_label = np.where(is_op, ev.index.to_numpy(), nested["op"].reindex(ev.index).to_numpy())
    row = step_index(windows, ev["ts_us"], ev["rank"])
    frame = pd.DataFrame({
        "kind": first["anchor_kind"].to_numpy(), "name": ev["name"].to_numpy(), "op": _name_of(names, op_label),
        "top_op": _name_of(names, nested["top"].reindex(ev.index).to_numpy()), "rank": ev["rank"].to_numpy(),
        "step": np.where(row >= 0, windows["step"].to_numpy()[np.clip(row, 0, None)], -1).astype(np.int64),
        "ts_us": ev["ts_us"].to_numpy(), "blocked_us": ev["dur_us"].to_numpy(),
        "gpu_confirmed": confirmed.reindex(ev.index, fill_value=0).to_numpy() > 0,
    }, index=ev.index)
    frame = frame.join(user_frames(trace, ev))
    return frame[EPISODE_COLUMNS].sort_values("ts_us", kind="stable")


def _drop_cpu_internal(events: pd.DataFrame, cpu_only: bool) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """On a trace without CUDA runtime events (``cpu_only``), drop ``item`` sync points issued from inside
    another op that is not a sync op (aten::std, aten::multinomial via aten::_assert_async):
    those are the op's CPU implementation reading a scalar, which its CUDA kernel does not do.
    A user's own ``.item()`` is an outermost op and stays. Returns the kept events and a warning."""
    if not cpu_only or events.empty:
        return events, ()
    internal = (events["kind"] == "item") & (events["top_op"] != events["op"]) & ~events["top_op"].isin(
        list(SYNC_OPS)) & (events["top_op"] != "")
    if not internal.any():
        return events, ()
    tops = events.loc[internal, "top_op"].value_counts()
    listed = ", ".join(f"{op} {n}x" for op, n in tops.head(5).items())
    return events[~internal], (
        f"{int(internal.sum())} aten::item calls inside other ops ({listed}) were not counted: on this CPU-only "
        "trace they are those ops' CPU implementation, and their CUDA kernels do not read the value on the host; "
        "a trace with CUDA activity confirms any that do sync",)


def _name_of(names: pd.Series, labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels, dtype=np.int64)
    out = np.full(len(labels), "", dtype=object)
    out[labels >= 0] = names.reindex(labels[labels >= 0]).to_numpy()
    return out


def site_table(events: pd.DataFrame, n_steps: int) -> pd.DataFrame:
    """Sync points grouped by (kind, op, file, line): count, blocked_us, per_step, steps_seen,
    gpu_confirmed count; ranked by blocked time."""
    if events.empty:
        return pd.DataFrame(columns=SITE_COLUMNS)
    keyed = events.assign(file=events["file"].astype(object).where(events["file"].notna(), ""),
                          line=events["line"].astype("Float64").fillna(-1).astype(np.int64),
                          func=events["func"].astype(object).where(events["func"].notna(), ""))
    table = keyed.groupby(["kind", "op", "file", "line"], sort=False).agg(
        count=("blocked_us", "size"), blocked_us=("blocked_us", "sum"), steps_seen=("step", "nunique"),
        gpu_confirmed=("gpu_confirmed", "sum"), top_op=("top_op", "first"), function=("func", "first"),
    ).reset_index().rename(columns={"function": "func"})
    table["per_step"] = table["count"] / n_steps
    return table.sort_values(["blocked_us", "count"], ascending=False, ignore_index=True)[SITE_COLUMNS]


def _site_json(r: dict) -> dict:
    return {"kind": r["kind"], "op": r["op"], "file": r["file"] or None,
            "line": int(r["line"]) if r["line"] >= 0 else None, "func": r["func"] or None,
            "count": int(r["count"]), "blocked_us": float(r["blocked_us"]), "per_step": float(r["per_step"]),
            "gpu_confirmed": int(r["gpu_confirmed"]), "top_op": r["top_op"]}


def _gpu_side(trace, candidates: pd.DataFrame) -> pd.DataFrame:
    """cuda_sync events by name: count, GPU-side time (us), and how many have a blocking host call
    (``host_blocking``), a non-blocking one such as cudaEventQuery (``host_other``) or none in the
    trace (``unmatched``)."""
    gpu = trace.select("cuda_sync")
    if gpu.empty:
        return pd.DataFrame(columns=["name", "count", "gpu_us", "host_blocking", "host_other", "unmatched"])
    links = trace.launches()
    links = links[links["gpu_cat"] == "cuda_sync"].drop_duplicates("gpu_index").set_index("gpu_index")["cpu_index"]
    host = links.reindex(gpu.index)
    blocking = host.isin(candidates.index).to_numpy()
    frame = pd.DataFrame({"name": gpu["name"].astype(str), "dur_us": gpu["dur_us"], "blocking": blocking,
                          "other": host.notna().to_numpy() & ~blocking, "unmatched": host.isna().to_numpy()})
    return frame.groupby("name", sort=True).agg(
        count=("dur_us", "size"), gpu_us=("dur_us", "sum"), host_blocking=("blocking", "sum"),
        host_other=("other", "sum"), unmatched=("unmatched", "sum")).reset_index()


# --- findings and warnings -----------------------------------------------------------------------

def _findings(events: pd.DataFrame, n_steps: int, wall_us: float) -> list[Finding]:
    out = []
    for site in site_table(events, n_steps).head(MAX_SITE_FINDINGS).to_dict("records"):
        share = site["blocked_us"] / wall_us if wall_us > 0 else 0.0
        if not site["gpu_confirmed"] and site["kind"] in ("item", "nonzero", "is_nonzero", "dynamic_shape"):
            continue
        where = f"{site['file']}:{site['line']}" if site["file"] else _op_path(site["top_op"], site["op"])
        severity = "high" if share >= HIGH_SHARE else "medium" if share >= MEDIUM_SHARE else "low"
        out.append(Finding(
            severity, f"{site['kind']} at {where}: {site['count']}x, {site['blocked_us'] / 1e3:.3f} ms blocked",
            {"count": int(site["count"]), "per_step": site["per_step"], "blocked_us": site["blocked_us"],
             "share_of_step_time": share, "op": site["op"], "top_op": site["top_op"]},
            FIXES[site["kind"]].format(op=site["op"] or "an op"),
            f"'high' from {HIGH_SHARE:.0%}, 'medium' from {MEDIUM_SHARE:.0%} of step wall time blocked (perfkit rule)"))
    return out


def _op_path(top_op, op) -> str:
    """'aten::index (via aten::copy_)': the outermost op the user called, and the op that synced."""
    if top_op and op and top_op != op:
        return f"{top_op} (via {op})"
    return top_op or op or "?"


def _warnings(trace, cpu_only: bool, gpu_side: pd.DataFrame) -> tuple:
    out = []
    if cpu_only:
        out.append("no CUDA runtime events: only ops such as aten::item are listed, as possible syncs with their "
                   "host time as blocked time; re-profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    elif not trace.has_gpu_events:
        out.append("no GPU events: device-to-host copies cannot be identified; re-profile with "
                   "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    if not trace.has_python_stacks:
        out.append("no Python stacks: sync points have no source line; re-profile with with_stack=True")
    if len(trace.steps) == 0:
        out.append("no steps found: per-step counts are per trace; call prof.step() once per training step")
    host_waits = gpu_side[gpu_side["name"] != "Stream Wait Event"] if len(gpu_side) else gpu_side
    unmatched = int(host_waits["unmatched"].sum()) if len(host_waits) else 0
    if unmatched:
        out.append(f"{unmatched} cuda_sync events have no host call in the trace (not counted: the host side "
                   "of the wait is missing; was the profiler's CPU activity on?)")
    return tuple(out)
