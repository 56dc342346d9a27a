"""``htod(trace)``: host<->device copies by direction and host-memory kind, who issued them, and
whether they stall the host.

Every GPU-side copy (``gpu_memcpy``) gets: direction and memory kind from its name
(``classify.copy_direction`` / ``copy_memory``: pageable, pinned, or unknown on ROCm, which writes
only "Host"), bytes, time, the launch call that issued it (correlation id, or the ``ac2g`` flow),
the launch call's own duration (``launch_us``: host time blocked for a pageable copy), the innermost
and outermost ``cpu_op`` around that launch, the user Python line with stacks, the
time it overlapped kernels on *other* streams of the same GPU, and whether the host blocked right
after launching it: the launch is itself synchronous (``cudaMemcpy``) or the next runtime call on
the same thread is a blocking one (``classify.SYNC_RUNTIME``) starting within ``sync_gap_us``
(``sync_name``, ``sync_us``: its duration).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..results import Finding, findings_frame, html_section, html_table, html_warnings, rank_findings
from ..text import jsonable
from ..trace.ancestry import nest
from ..trace.intervals import Coverage
from ..trace.schema import LAUNCH_CATEGORIES
from ..trace.steps import full_step_windows
from .classify import SYNC_RUNTIME, copies_frame
from .host_ops import host_events
from .stacks import user_frames

# A blocking copy (non_blocking=False) issues its cudaStreamSynchronize within microseconds of the
# cudaMemcpyAsync (0-9 us in the AlexNet and ResNet traces of ../shared); 100 us leaves room for a
# slow host while not pairing a copy with an unrelated sync later in the step.
SYNC_GAP_US = 100.0
# Severity of copy findings by their time as a share of step wall time: "high" from 5%, "medium"
# from 1%, else "low" (perfkit rule: a few percent of a step is worth a one-line fix).
HIGH_SHARE, MEDIUM_SHARE = 0.05, 0.01

SUMMARY_COLUMNS = ["direction", "memory", "count", "bytes", "time_us", "gb_per_s", "host_blocked_us",
                   "effective_gb_per_s", "overlap_pct", "followed_by_sync", "per_step"]
SITE_KEYS = ["direction", "memory", "op", "top_op", "file", "line"]


@dataclass(frozen=True, eq=False, repr=False)
class HtoDResult:
    """``copies``: one row per GPU copy (see module doc). ``to_frame()``: count, bytes, time (us),
    GB/s, overlap % and synced count per (direction, memory kind). ``sites``: the same per issuing
    op and source line."""

    copies: pd.DataFrame
    n_steps: int
    wall_us: float
    findings: tuple
    warnings: tuple

    def to_frame(self) -> pd.DataFrame:
        return summarize_copies(self.copies, self.n_steps)

    @property
    def sites(self) -> pd.DataFrame:
        if self.copies.empty:
            return pd.DataFrame(columns=SITE_KEYS + ["count", "bytes", "time_us", "followed_by_sync"])
        keyed = self.copies.assign(**{k: self.copies[k].astype(object).where(self.copies[k].notna(), "")
                                      for k in ("op", "top_op", "file")},
                                   line=self.copies["line"].fillna(-1).astype(np.int64))
        table = keyed.groupby(SITE_KEYS, sort=False).agg(
            count=("dur_us", "size"), bytes=("bytes", lambda b: int(b.clip(lower=0).sum())),
            time_us=("dur_us", "sum"), followed_by_sync=("followed_by_sync", "sum")).reset_index()
        return table.sort_values("time_us", ascending=False, ignore_index=True)

    @property
    def htod_overlap_pct(self) -> float:
        """Share of HtoD copy time that overlapped kernels on other streams (percent; NaN if none)."""
        h = self.copies[self.copies["direction"] == "HtoD"]
        return 100.0 * h["overlap_us"].sum() / h["dur_us"].sum() if h["dur_us"].sum() > 0 else float("nan")

    def to_json(self) -> dict:
        return jsonable({"summary": self.to_frame().to_dict("records"), "sites": self.sites.head(50).to_dict("records"),
                         "htod_overlap_pct": self.htod_overlap_pct, "findings": [dict(f.__dict__) for f in self.findings],
                         "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        h = self.copies[self.copies["direction"] == "HtoD"]
        return (f"<HtoDResult {len(self.copies)} copies ({len(h)} HtoD, {int((h['memory'] == 'pageable').sum())} "
                f"pageable, {int(h['followed_by_sync'].sum())} followed by a sync), {len(self.findings)} findings>")

    def _repr_html_(self) -> str:
        return html_section("Host-device copies", html_table(findings_frame(self.findings)),
                            html_table(self.to_frame()), html_table(self.sites), html_warnings(self.warnings))


def htod(trace, *, sync_gap_us: float = SYNC_GAP_US) -> HtoDResult:
    """Copies of ``trace`` with their issuing op, source line, overlap and following sync.

    ``sync_gap_us``: the most time (us) between the end of a copy's launch call and the start of the
    blocking call that counts as "followed by a sync". Never raises for traces without copies,
    GPU events or Python stacks: those become warnings.
    """
    host = host_events(trace)
    copies = _attach_launch(trace, copies_frame(trace.events))
    copies = _attach_ops(copies, host)
    copies["followed_by_sync"], copies["sync_name"], copies["sync_us"] = _followed_by_sync(copies, host, sync_gap_us)
    copies["overlap_us"] = _overlap_other_streams(trace, copies)
    frames = user_frames(trace, host.reindex(copies["launch"][copies["launch"] >= 0].unique()))
    copies = _attach_frames(copies, frames)
    windows, stubs = full_step_windows(trace)
    n_steps, wall_us = max(len(windows), 1), float(windows["dur_us"].sum())
    table = copies[_COPY_COLUMNS].reset_index(drop=True)
    return HtoDResult(copies=table, n_steps=n_steps, wall_us=wall_us,
                      findings=rank_findings(_findings(table, n_steps, wall_us, sync_gap_us)),
                      warnings=_warnings(trace, table) + stubs)


_COPY_COLUMNS = ["rank", "direction", "memory", "name", "ts_us", "dur_us", "bytes", "device", "stream", "launch",
                 "launch_name", "launch_us", "op", "top_op", "frame", "file", "line", "followed_by_sync", "sync_name", "sync_us",
                 "overlap_us"]


def _attach_launch(trace, copies: pd.DataFrame) -> pd.DataFrame:
    links = trace.launches()
    links = links[links["gpu_cat"] == "gpu_memcpy"].drop_duplicates("gpu_index").set_index("gpu_index")
    launch = links["cpu_index"].reindex(copies.index)
    return copies.assign(launch=launch.fillna(-1).astype(np.int64).to_numpy(),
                         launch_name=links["launch_name"].reindex(copies.index).to_numpy(),
                         launch_us=links["launch_dur_us"].reindex(copies.index).to_numpy(),
                         name=copies["name"].astype(str).to_numpy())


def _attach_ops(copies: pd.DataFrame, host: pd.DataFrame) -> pd.DataFrame:
    nested = nest(host)
    launch = copies["launch"].to_numpy()
    known = launch >= 0
    op_label = np.full(len(copies), -1, dtype=np.int64)
    top_label = np.full(len(copies), -1, dtype=np.int64)
    op_label[known] = nested["op"].reindex(launch[known]).fillna(-1).to_numpy()
    top_label[known] = nested["top"].reindex(launch[known]).fillna(-1).to_numpy()
    names = host["name"]
    return copies.assign(op=_names(names, op_label), top_op=_names(names, top_label))


def _names(names: pd.Series, labels: np.ndarray) -> np.ndarray:
    found = names.reindex(labels[labels >= 0]).to_numpy()
    out = np.full(len(labels), None, dtype=object)
    out[labels >= 0] = found
    return out


def _followed_by_sync(copies: pd.DataFrame, host: pd.DataFrame, gap_us: float):
    """(bool array, name of the blocking call or None, its duration in us or 0) per copy; a synchronous
    launch (cudaMemcpy) is its own blocking call and gets 0 here (its time is ``launch_us``)."""
    calls = host[host["cat"].isin(LAUNCH_CATEGORIES)]
    calls = calls.assign(pid=calls["pid"].astype(str), tid=calls["tid"].astype(str))
    calls = calls.sort_values(["file_id", "pid", "tid", "ts_us"], kind="stable")
    same_thread = (calls[["file_id", "pid", "tid"]].shift(-1) == calls[["file_id", "pid", "tid"]]).all(axis=1)
    next_name = calls["name"].shift(-1).where(same_thread)
    gap = (calls["ts_us"].shift(-1) - calls["ts_us"] - calls["dur_us"]).where(same_thread)
    launch = copies["launch"]
    own = copies["launch_name"].isin(list(SYNC_RUNTIME)).to_numpy()
    nxt = next_name.reindex(launch).to_numpy()
    close = (gap.reindex(launch) <= gap_us).to_numpy()
    after = pd.Series(nxt).isin(list(SYNC_RUNTIME)).to_numpy() & close
    name = np.where(own, copies["launch_name"].to_numpy(), np.where(after, nxt, None))
    next_us = calls["dur_us"].shift(-1).where(same_thread).reindex(launch).to_numpy(dtype=float)
    return own | after, name, np.where(after & ~own, next_us, 0.0)


def _overlap_other_streams(trace, copies: pd.DataFrame) -> np.ndarray:
    """Per copy: time (us) it overlapped kernels of the same file and device on another stream."""
    out = np.zeros(len(copies))
    kernels = trace.kernels()
    if copies.empty or kernels.empty:
        return out
    keys = copies[["file_id", "device", "stream"]].drop_duplicates().itertuples(index=False)
    for file_id, device, stream in keys:
        mask = ((copies["file_id"] == file_id) & (copies["device"] == device) & (copies["stream"] == stream)).to_numpy()
        other = kernels[(kernels["file_id"] == file_id) & (kernels["device"] == device) & (kernels["stream"] != stream)]
        start = other["ts_us"].to_numpy()
        cover = Coverage.of(start, start + other["dur_us"].to_numpy())
        cs = copies["ts_us"].to_numpy()[mask]
        out[mask] = cover.within(cs, cs + copies["dur_us"].to_numpy()[mask])
    return out


def _attach_frames(copies: pd.DataFrame, frames: pd.DataFrame) -> pd.DataFrame:
    launch = copies["launch"].to_numpy()
    cols = {}
    for col in ("frame", "file", "line", "func"):
        values = frames[col].reindex(launch).to_numpy() if len(frames) else np.full(len(copies), None)
        cols[col] = values
    cols["line"] = pd.array([int(v) if v is not None and not pd.isna(v) else None for v in cols["line"]],
                            dtype="Int64")
    return copies.assign(**cols)


def summarize_copies(copies: pd.DataFrame, n_steps: int) -> pd.DataFrame:
    """Count, bytes, time (us), achieved GB/s, host time blocked (us), effective GB/s, % overlapped
    with other-stream kernels and copies followed by a sync, per (direction, memory kind). GB/s uses
    only copies whose size is known.

    ``gb_per_s`` is the GPU side's rate; ``effective_gb_per_s`` divides the bytes by the longer of each
    copy's GPU time and the host time blocked in its launch call and the sync after it
    (``host_blocked_us``). A pageable copy is staged through a bounce buffer by the host before the
    DMA, so its GPU-side rate hides that cost: on an H100 (data/traces/gpu/replay_host_normalize)
    pageable copies ran 43.5 GB/s on the GPU side but 7.4 GB/s effective, where the bandwidth sweep
    measured pageable at 7.3 GB/s and pinned at 52.3 GB/s."""
    if copies.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    known = copies["bytes"] >= 0
    blocked = copies["launch_us"].fillna(0.0) + copies["sync_us"].fillna(0.0)
    effective = np.maximum(copies["dur_us"].to_numpy(dtype=np.float64), blocked.to_numpy(dtype=np.float64))
    g = copies.assign(known_bytes=copies["bytes"].where(known, 0), known_us=copies["dur_us"].where(known, 0.0),
                      blocked_us=blocked, effective_us=np.where(known, effective, 0.0))
    table = g.groupby(["direction", "memory"], sort=True).agg(
        count=("dur_us", "size"), bytes=("known_bytes", "sum"), time_us=("dur_us", "sum"),
        known_us=("known_us", "sum"), host_blocked_us=("blocked_us", "sum"), effective_us=("effective_us", "sum"),
        overlap_us=("overlap_us", "sum"), followed_by_sync=("followed_by_sync", "sum")).reset_index()
    table["gb_per_s"] = table["bytes"] / (table["known_us"].where(table["known_us"] > 0) * 1e3)
    table["effective_gb_per_s"] = table["bytes"] / (table["effective_us"].where(table["effective_us"] > 0) * 1e3)
    table["overlap_pct"] = 100.0 * table["overlap_us"] / table["time_us"].where(table["time_us"] > 0)
    table["per_step"] = table["count"] / n_steps
    return table[SUMMARY_COLUMNS]


def _severity(time_us: float, wall_us: float) -> str:
    share = time_us / wall_us if wall_us > 0 else 1.0
    return "high" if share >= HIGH_SHARE else "medium" if share >= MEDIUM_SHARE else "low"


_SEVERITY_RULE = f"'high' from {HIGH_SHARE:.0%}, 'medium' from {MEDIUM_SHARE:.0%} of step wall time (perfkit rule)"


def _findings(copies: pd.DataFrame, n_steps: int, wall_us: float, gap_us: float) -> list[Finding]:
    out = []
    h = copies[copies["direction"] == "HtoD"]
    pageable = h[h["memory"] == "pageable"]
    if len(pageable):
        # A pageable cudaMemcpyAsync returns only once the data is staged, and a blocking .to(device) then
        # synchronizes the stream: the call and that sync are host time blocked, usually far longer than
        # the GPU-side copy (DLRM rank 0: 1.25 ms blocked for 8 us of copies).
        blocked = float(pageable["launch_us"].fillna(0.0).sum() + pageable["sync_us"].sum())
        gpu_us = float(pageable["dur_us"].sum())
        out.append(Finding(
            _severity(max(blocked, gpu_us), wall_us),
            f"{len(pageable)} HtoD copies from pageable memory: host blocked {blocked / 1e3:.2f} ms in their copy "
            f"calls and the syncs after them (GPU copy time {gpu_us / 1e3:.2f} ms)",
            # the wall time of all the steps (the severity's denominator, as the copy times are totals), named so
            {"count": len(pageable), "steps": n_steps, "per_step": len(pageable) / n_steps,
             "all_steps_wall_us": wall_us,
             "bytes": int(pageable["bytes"].clip(lower=0).sum()), "time_us": gpu_us, "host_blocked_us": blocked,
             "gb_per_s": _gbps(pageable), "pinned_gb_per_s": _gbps(h[h["memory"] == "pinned"]),
             "top_site": _top_site(pageable)},
            "Pin the host memory: DataLoader(pin_memory=True), or tensor.pin_memory() once for buffers reused "
            "every step, and copy with non_blocking=True; pageable copies go through a staging buffer and "
            "block the host.",
            f"any pageable HtoD copy; severity from the larger of host blocked and GPU copy time; {_SEVERITY_RULE}"))
    synced = copies[copies["followed_by_sync"] & (copies["direction"] == "HtoD")]
    if len(synced):
        out.append(Finding(
            _severity(float(synced["sync_us"].sum()), wall_us),
            f"{len(synced)} HtoD copies are each followed by a host sync ({synced['sync_us'].sum() / 1e3:.2f} ms blocked)",
            {"count": len(synced), "per_step": len(synced) / n_steps, "time_us": float(synced["dur_us"].sum()),
             "sync_us": float(synced["sync_us"].sum()),
             "sync_calls": ", ".join(sorted(set(synced["sync_name"].dropna()))), "top_site": _top_site(synced)},
            "Use tensor.to(device, non_blocking=True) from pinned memory so the host does not wait for each copy.",
            f"blocking call within {gap_us:g} us after the copy's launch on the same thread; {_SEVERITY_RULE}"))
    return out


def _gbps(frame: pd.DataFrame) -> float:
    known = frame[frame["bytes"] >= 0]
    return float(known["bytes"].sum() / (known["dur_us"].sum() * 1e3)) if known["dur_us"].sum() > 0 else float("nan")


def _top_site(frame: pd.DataFrame) -> str:
    """The source line (else the outermost op, else "?") of the most copy time. A missing op may be None or NaN (a
    column of op names with some missing is a string column), and a NaN key would leave groupby nothing."""
    site = frame.assign(where=[f"{f}:{int(ln)}" if isinstance(f, str) and not pd.isna(ln)
                               else op if isinstance(op, str) else "?"
                               for f, ln, op in zip(frame["file"], frame["line"], frame["top_op"])])
    return str(site.groupby("where")["dur_us"].sum().idxmax())


def _warnings(trace, copies: pd.DataFrame) -> tuple:
    out = []
    if not trace.has_gpu_events:
        out.append("no GPU events: copies cannot be seen; re-profile with "
                   "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]")
    elif copies.empty:
        out.append("no memcpy events in the trace")
    if len(copies) and (copies["memory"] == "unknown").any():
        out.append(f"{int((copies['memory'] == 'unknown').sum())} copies have no pageable/pinned label "
                   "(ROCm writes only 'Host'): memory kind unknown")
    if len(copies) and (copies["launch"] < 0).any():
        out.append(f"{int((copies['launch'] < 0).sum())} copies have no launch call in the trace: "
                   "no issuing op or sync check for them")
    if len(copies) and not trace.has_python_stacks:
        out.append("no Python stacks: copies cannot be tied to source lines; re-profile with with_stack=True")
    return tuple(out)
