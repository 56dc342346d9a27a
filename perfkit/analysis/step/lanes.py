"""Per-rank index of a trace's lanes (host threads and GPU streams) for walking the timeline.

Host thread: interval unions (``trace.intervals.Coverage``) of its work, of its launch and blocking
calls, and of its blocking calls alone, plus the blocking calls in time order. Host work is
cpu_op, runtime and driver calls, python_function frames and DataLoader ``__next__`` ranges (input
loading on the thread); other record_function ranges and ``ProfilerStep#`` windows mark regions,
they are not work. Blocking calls are ``host_blocking``; launch calls are runtime/driver calls with
a GPU event linked to them.

GPU: kernels, copies and memsets of the rank in (stream, start) order, each with the previous
event on its stream and the thread and times of its launch call; and the same events by end time
(all streams, and per stream) to find the work a blocking call waited for.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ...trace import intervals
from ...trace.intervals import Coverage
from ...trace.names import contains, starts_with
from ...trace.schema import GPU_CATEGORIES, LAUNCH_CATEGORIES
from ...trace.steps import before_window_events
from ...trace.threads import event_threads, thread_codes
from ..classify import is_comm
from ..host_ops import DATALOADER_PREFIX, HOST_WORK_CATEGORIES, host_events
from ..sync_points.find import blocking_calls
from ..timeline import thread_table
from .layers import working_frames


@dataclass(frozen=True)
class HostLane:
    """One host thread: coverages of its work, of its ops and runtime calls alone (``ops``: no
    Python frames, no DataLoader ranges), launch+blocking calls and blocking calls; its blocking
    calls sorted by start (``block_start``/``block_end``/``block_label``) and the GPU lane each
    waits on (``block_lane``, -1 when any stream of the rank). On the main thread ``work`` leaves
    out the time it waits for another thread (``WAIT_FRAMES``)."""

    work: Coverage
    ops: Coverage
    calls: Coverage
    blocking: Coverage
    block_start: np.ndarray
    block_end: np.ndarray
    block_label: np.ndarray
    block_lane: np.ndarray


@dataclass(frozen=True)
class RankTimeline:
    """Host lanes by thread code, the main thread, thread labels, and the GPU events of one rank:
    ``gpu`` columns ``GPU_COLUMNS`` as arrays, rows in (lane, start) order; ``lanes``: lane code ->
    (first row, end row) of its slice; ``by_end``/``by_end_rows``: all rows by end time;
    ``lane_by_end``: lane -> (ends, rows) by end time. ``handoff``: the times at which the main
    thread waits (no work of its own, or inside a ``WAIT_FRAMES`` frame) while another thread of the
    rank runs ops: there the step goes on on that thread (the autograd engine's backward pass)."""

    main: int
    hosts: dict
    thread_labels: dict
    gpu: dict
    lanes: dict = field(default_factory=dict)
    by_end: np.ndarray = field(default_factory=lambda: np.zeros(0))
    by_end_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    lane_by_end: dict = field(default_factory=dict)
    handoff: Coverage = field(default_factory=lambda: Coverage.of(np.zeros(0), np.zeros(0)))

    @property
    def unlaunched(self) -> int:
        return int((self.gpu["launch_thread"] < 0).sum())


# Python frames in which the calling thread waits for other threads to do the work: the autograd
# engine runs backward on its own device threads while ``loss.backward()`` waits in ``run_backward``
# ("<built-in method run_backward of torch._C._EngineBase object at 0x...>").
WAIT_FRAMES = ("run_backward",)
# Host and GPU clocks disagree by up to a microsecond in whole-microsecond traces: a kernel may
# appear to end 1 us after the synchronize call that waited for it returned.
CLOCK_SLACK_US = 1.0
# A kernel that starts more than this after both its launch returned and the previous work on its
# stream ended waited for something else: another stream (cudaStreamWaitEvent). Launch-to-start
# latency on an idle GPU is a few microseconds (NVIDIA quotes ~2-5 us per launch).
QUEUE_SLACK_US = 10.0
# GPU event kinds of ``RankTimeline.gpu["kind"]``: compute kernel, copy or memset, collective kernel.
GPU_KERNEL, GPU_COPY, GPU_COMM = 0, 1, 2

GPU_COLUMNS = ["start", "end", "lane", "kind", "label", "prev", "launch_thread", "launch_start", "launch_end",
               "launch_blocks", "early"]


def rank_timelines(trace) -> dict:
    """``{rank: RankTimeline}`` for every rank with host events, built once per trace (gaps, critical
    path and step anatomy all walk them; shared, so never modified)."""
    return trace.derived("rank_timelines", _rank_timelines)


def _rank_timelines(trace) -> dict:
    # Runtime and driver calls are the only host events a blocking call or a launch can be.
    host = host_events(trace, LAUNCH_CATEGORIES)
    links = trace.launches()
    blocking = host_blocking(trace, host)
    threads = thread_table(trace, links=links)
    gpu = _gpu_table(trace, links, blocking.index)
    block_lanes = _block_lanes(trace, links, blocking)
    work = _work_events(trace)
    out = {}
    for rank, info in threads.groupby("rank"):
        main = int(info.loc[info["main"], "thread"].iloc[0])
        hosts = _host_lanes(work[work["rank"] == rank], host[host["rank"] == rank], blocking, block_lanes, links,
                            main)
        labels = dict(zip(info["thread"], info["label"]))
        out[int(rank)] = _rank(main, hosts, gpu[gpu["rank"] == rank].drop(columns="rank"), labels,
                               _handoff(hosts, main))
    return out


def _handoff(hosts: dict, main: int) -> Coverage:
    """Ops of the other threads less the main thread's own work (see ``RankTimeline.handoff``)."""
    others = [h.ops for code, h in hosts.items() if code != main]
    if not others:
        return Coverage.of(np.zeros(0), np.zeros(0))
    starts = np.concatenate([c.starts for c in others])
    ends = np.concatenate([c.ends for c in others])
    own = hosts.get(main)
    if own is not None:
        starts, ends = intervals.subtract(starts, ends, own.work.starts, own.work.ends)
    return Coverage.of(starts, ends)


def host_blocking(trace, host: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``host`` (runtime and driver calls) that block their thread: ``syncs.blocking_calls``
    (synchronize calls, device-to-host copies and host-to-device copies from pageable memory)."""
    return blocking_calls(trace, host).sort_values("ts_us", kind="stable")


def _work_events(trace) -> pd.DataFrame:
    """Host work with ``op`` (a cpu_op or runtime call) and ``wait`` (a ``WAIT_FRAMES`` frame)."""
    ev = trace.events
    complete = (ev["ph"] == "X").to_numpy()
    ops = ev["cat"].isin(HOST_WORK_CATEGORIES).to_numpy()
    python = np.zeros(len(ev), dtype=bool)  # the loop's frames hold no work (layers.working_frames)
    python[ev.index.get_indexer(working_frames(trace).index)] = True
    loader = (ev["cat"] == "user_annotation").to_numpy() & starts_with(ev["name"], DATALOADER_PREFIX)
    rows = np.flatnonzero(complete & (ops | python | loader))
    start = ev["ts_us"].to_numpy()[rows]
    wait = np.zeros(len(rows), dtype=bool)
    for name in WAIT_FRAMES:
        wait |= contains(ev["name"], name)[rows]
    return pd.DataFrame({"thread": event_threads(trace)[rows], "rank": ev["rank"].to_numpy()[rows], "start": start,
                         "end": start + ev["dur_us"].to_numpy()[rows], "op": ops[rows],
                         "wait": wait & python[rows]})


def _host_lanes(work, host, blocking, block_lanes: pd.Series, links, main: int) -> dict:
    launch_labels = links.loc[links["gpu_cat"].isin(GPU_CATEGORIES), "cpu_index"].unique()
    calls = host[host.index.isin(launch_labels) | host.index.isin(blocking.index)]
    calls = calls[calls["cat"].isin(LAUNCH_CATEGORIES)]
    blocks = host.loc[host.index.intersection(blocking.index)].sort_values("ts_us")
    lanes = {}
    for code, w in work.groupby("thread"):
        c = calls[thread_codes(calls) == code] if len(calls) else calls
        b = blocks[thread_codes(blocks) == code] if len(blocks) else blocks
        c_start, b_start = c["ts_us"].to_numpy(), b["ts_us"].to_numpy()
        starts, ends = np.concatenate([w["start"], c_start]), np.concatenate([w["end"], c_start + c["dur_us"]])
        ops = w[w["op"].to_numpy()]
        lanes[int(code)] = HostLane(
            work=Coverage.of(starts, ends), ops=Coverage.of(ops["start"], ops["end"]),
            calls=Coverage.of(c_start, c_start + c["dur_us"].to_numpy()),
            blocking=Coverage.of(b_start, b_start + b["dur_us"].to_numpy()),
            block_start=b_start, block_end=b_start + b["dur_us"].to_numpy(), block_label=b.index.to_numpy(),
            block_lane=block_lanes.reindex(b.index, fill_value=-1).to_numpy(dtype=np.int64))
    if main in lanes:
        lanes[main] = _without_waits(lanes, main, work[work["thread"] == main])
    return lanes


def _without_waits(lanes: dict, main: int, work: pd.DataFrame) -> HostLane:
    """The main thread's lane less the time it waits in ``WAIT_FRAMES`` for another thread: the
    frames less the ops the thread ran inside them (backward of CPU tensors runs on the calling
    thread, as children of run_backward), and only where another thread runs ops meanwhile."""
    lane = lanes[main]
    frames = work[work["wait"].to_numpy()]
    others = [h.ops for code, h in lanes.items() if code != main]
    if frames.empty or not others:
        return lane
    inner = work[work["op"].to_numpy()]
    waiting = intervals.subtract(frames["start"], frames["end"], inner["start"], inner["end"])
    waiting = intervals.intersect(*waiting, np.concatenate([c.starts for c in others]),
                                  np.concatenate([c.ends for c in others]))
    starts, ends = intervals.subtract(lane.work.starts, lane.work.ends, *waiting)
    return replace(lane, work=Coverage.of(starts, ends))


def _gpu_table(trace, links: pd.DataFrame, blocking: pd.Index) -> pd.DataFrame:
    """GPU events with their lane code, kind (0 kernel, 1 memcpy/memset) and launch call
    (``launch_blocks``: the launch call is itself a blocking call, e.g. a copy from pageable memory); ``early``:
    launched before the profiler's window, the previous step's tail (``trace.steps.before_window``)."""
    gpu = trace.gpu_events()
    lane = _lane_codes(gpu)
    launch = links[links["gpu_cat"].isin(GPU_CATEGORIES)].drop_duplicates("gpu_index").set_index("gpu_index")
    launch = launch.reindex(gpu.index)
    calls = trace.events.loc[launch["cpu_index"].dropna().astype(np.int64)]
    launch_thread = pd.Series(thread_codes(calls), index=launch.index[launch["cpu_index"].notna()])
    frame = pd.DataFrame({
        "rank": gpu["rank"].to_numpy(), "start": gpu["ts_us"].to_numpy(), "end": (gpu["ts_us"] + gpu["dur_us"]).to_numpy(),
        "lane": lane, "kind": _gpu_kinds(gpu),
        "label": gpu.index.to_numpy(), "launch_thread": launch_thread.reindex(gpu.index, fill_value=-1).to_numpy(),
        "launch_start": launch["launch_ts_us"].to_numpy(),
        "launch_end": (launch["launch_ts_us"] + launch["launch_dur_us"]).to_numpy(),
        "launch_blocks": launch["cpu_index"].isin(blocking).to_numpy(),
        "early": gpu.index.isin(before_window_events(trace))})
    return frame.sort_values(["rank", "lane", "start", "end"], kind="stable").reset_index(drop=True)


def _gpu_kinds(gpu: pd.DataFrame) -> np.ndarray:
    """``GPU_KERNEL``, ``GPU_COPY`` or ``GPU_COMM`` (NCCL/RCCL kernels, ``classify.is_comm``) per GPU event."""
    kernel = gpu["cat"].astype(str).to_numpy() == "kernel"
    comm = kernel & is_comm(gpu["name"])
    return np.select([comm, kernel], [GPU_COMM, GPU_KERNEL], GPU_COPY).astype(np.int8)


def _lane_codes(events: pd.DataFrame) -> np.ndarray:
    """One int per (file, device, stream)."""
    device = events["device"].to_numpy(dtype=np.int64) + 1
    stream = events["stream"].to_numpy(dtype=np.int64) + 1
    return (events["file_id"].to_numpy(dtype=np.int64) << 48) | (device << 32) | (stream & 0xFFFFFFFF)


def _block_lanes(trace, links: pd.DataFrame, blocking: pd.DataFrame) -> pd.Series:
    """GPU lane each blocking call waits on, where the trace says: its linked copy, or the stream
    of its cuda_sync event ("Stream Sync" on stream 7; a "Context Sync" waits on every stream)."""
    linked = links[links["cpu_index"].isin(blocking.index)].drop_duplicates("cpu_index")
    gpu = trace.events.loc[linked["gpu_index"].to_numpy()]
    lanes = pd.Series(_lane_codes(gpu), index=linked["cpu_index"].to_numpy())
    return lanes[gpu["stream"].to_numpy() >= 0]


def _rank(main: int, hosts: dict, gpu: pd.DataFrame, labels: dict, handoff: Coverage) -> RankTimeline:
    arrays = {c: gpu[c].to_numpy() for c in GPU_COLUMNS if c != "prev"}
    lane = arrays["lane"]
    same = np.concatenate(([False], lane[1:] == lane[:-1])) if len(lane) else np.zeros(0, dtype=bool)
    arrays["prev"] = np.where(same, np.arange(len(lane)) - 1, -1)
    starts = np.flatnonzero(np.concatenate(([True], lane[1:] != lane[:-1]))) if len(lane) else np.zeros(0, int)
    bounds = np.append(starts, len(lane))
    lanes = {int(lane[a]): (int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])}
    order = np.argsort(arrays["end"], kind="stable")
    lane_by_end = {}
    for code, (a, b) in lanes.items():
        rows = a + np.argsort(arrays["end"][a:b], kind="stable")
        lane_by_end[code] = (arrays["end"][rows], rows)
    return RankTimeline(main=main, hosts=hosts, thread_labels=labels, gpu=arrays, lanes=lanes,
                        by_end=arrays["end"][order], by_end_rows=order, lane_by_end=lane_by_end, handoff=handoff)


def other_stream(tl: RankTimeline, row: int, ready: float) -> int:
    """The GPU event a late one waited for on another stream: the latest event on another stream that ended after
    ``ready`` (when its launch and the previous work on its stream let it start) and by the start of ``row``
    (``cudaStreamWaitEvent``, e.g. on a collective); -1 when its own stream's work ended later (stream order
    explains the wait) or none did. Work launched before the profiler's window (``early``) is no step's: never the
    one waited for."""
    g = tl.gpu
    k = np.searchsorted(tl.by_end, g["start"][row] + CLOCK_SLACK_US, side="right") - 1
    while k >= 0 and tl.by_end[k] > ready:
        cand = int(tl.by_end_rows[k])
        if g["lane"][cand] != g["lane"][row] and g["start"][cand] < g["start"][row] and not g["early"][cand]:
            return cand
        if g["lane"][cand] == g["lane"][row] and cand != row:
            return -1
        k -= 1
    return -1


def lane_name(lane: int) -> str:
    """"GPU 0 stream 7" for a lane code."""
    device, stream = ((lane >> 32) & 0xFFFF) - 1, (lane & 0xFFFFFFFF) - 1
    return f"GPU {device} stream {stream}"
