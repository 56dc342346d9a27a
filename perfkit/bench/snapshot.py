"""Safe readers for CUDA memory snapshots and profiler memory timelines.

``load_memory_snapshot(path)`` reads what ``torch.cuda.memory._dump_snapshot()`` writes
(a pickle of ``torch.cuda.memory._snapshot()``, optionally gzipped) with a restricted
unpickler. Those pickles hold only dicts, lists, tuples, strings, numbers, booleans and
None (checked on the shared corpus: no GLOBAL/REDUCE opcodes at all), so the unpickler
allows no class or function: any pickle that tries to construct an object (e.g. ``os.system``
through ``__reduce__``) is refused with a TraceError before anything runs.

``load_profiler_memory_timeline(path)`` reads the other format,
``torch.profiler.profile.export_memory_timeline("x.raw.gz")``: a JSON list of
``[time_ns, action, bytes, category]`` rows.
"""
from __future__ import annotations

import gzip
import io
import json
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceError
from ..results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings

# torch/profiler/_memory_profiler.py: Action enum values and _CATEGORY_TO_INDEX order.
TIMELINE_ACTIONS = {1: "preexisting", 2: "create", 3: "increment_version", 4: "destroy"}
TIMELINE_CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
                       "autograd_detail", "unknown")
_FREE_ACTIONS = ("free_completed", "free_requested", "free")
_NOT_USER = ("/torch/", "\\torch\\", "/site-packages/", "\\site-packages\\", "/dist-packages/")
_OPTIM = ("/torch/optim/", "\\torch\\optim\\")
# C++ frames that say nothing about who allocated: the unwinder that records the stack, the caching
# allocator, tensor creation and resizing helpers, the dispatcher, CPython and libc (checked on the
# frames of the cs336 snapshots in ../shared/traces/memory, which start with torch::unwind::unwind()).
_MACHINERY = re.compile(
    r"torch::unwind|CapturedTraceback|gather_with_cpp|CachingAllocator|c10::Allocator|allocate|malloc"
    r"|at::detail::empty|_empty_generic|at::empty|at::native::empty|resize_|create_out|set_output"
    r"|allocate_or_resize_outputs|TensorIteratorBase|c10::impl::|c10::Dispatcher|c10::KernelFunction"
    r"|c10::BoxedKernel|at::_ops::|wrap_kernel_functor|redispatch|^_?Py|^PyEval|cfunction_call|slot_tp_call"
    r"|^__libc|^_start$|^start_thread|^clone|^std::")
_AUTOGRAD_NODE = re.compile(r"\w+Backward\w*::apply")
_GIB = 2**30
_BEFORE_HISTORY = "(allocated before the history)"
# Growth in one snapshot's history above this is reported, as growth within the window: a single
# window (one step, often the first, where optimizer state is created) cannot tell a leak from
# memory a step keeps on purpose (perfkit rule; 1 MiB ignores allocator rounding and tiny caches).
GROWTH_NOTE_BYTES = 2**20


class _RestrictedUnpickler(pickle.Unpickler):
    """Refuses every global: memory snapshots are built from plain containers only."""

    def __init__(self, file, path):
        super().__init__(file)
        self._path = path

    def find_class(self, module, name):
        raise TraceError(self._path, f"the file tries to construct `{module}.{name}` and was refused",
                         "CUDA memory snapshots contain only dicts, lists, strings and numbers; "
                         "this file is not one (or was tampered with): do not load it with pickle")


@dataclass(frozen=True, eq=False)
class MemorySnapshot:
    """A CUDA caching-allocator snapshot.

    ``segments``: device, address, total_size_bytes, allocated_size_bytes, active_size_bytes,
    requested_size_bytes, stream, segment_type, blocks. ``blocks``: device, segment_address,
    address, size_bytes, requested_size_bytes, state, stream, frame (top user frame
    "file:line:name"). ``events``: device, time_us, action, address, size_bytes, stream,
    frame, from the allocation history (``device_traces``); empty when history was not
    recorded.
    """

    path: str
    segments: pd.DataFrame
    blocks: pd.DataFrame
    events: pd.DataFrame
    allocator_settings: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def live_bytes(self) -> pd.DataFrame:
        """Bytes allocated by the traced allocs and not yet freed, after each alloc/free
        event: device, time_us, elapsed_ms, action, size_bytes, live_bytes. Relative to the
        start of the history (memory allocated earlier is not in it)."""
        ev = self.events[self.events["action"].isin(("alloc", _free_action(self.events)))].copy()
        sign = np.where(ev["action"] == "alloc", 1, -1)
        ev["live_bytes"] = (ev["size_bytes"] * sign).groupby(ev["device"]).cumsum()
        ev["elapsed_ms"] = (ev["time_us"] - ev["time_us"].min()) / 1e3 if len(ev) else []
        return ev[["device", "time_us", "elapsed_ms", "action", "size_bytes", "live_bytes"]].reset_index(drop=True)

    def to_frame(self) -> pd.DataFrame:
        """The live-bytes-over-time series (see ``live_bytes``)."""
        return self.live_bytes()

    @property
    def peak_bytes(self) -> int:
        """Highest live bytes over the history (0 without history)."""
        live = self.live_bytes()["live_bytes"]
        return int(live.max()) if len(live) else 0

    @property
    def allocated_bytes(self) -> int:
        """Sum of alloc sizes in the history."""
        return int(self.events.loc[self.events["action"] == "alloc", "size_bytes"].sum())

    @property
    def freed_bytes(self) -> int:
        return int(self.events.loc[self.events["action"] == _free_action(self.events), "size_bytes"].sum())

    @property
    def net_growth_bytes(self) -> int:
        """Allocated minus freed bytes over the history: 0 when every alloc was freed."""
        return self.allocated_bytes - self.freed_bytes

    @property
    def reserved_bytes(self) -> int:
        return int(self.segments["total_size_bytes"].sum())

    @property
    def active_bytes(self) -> int:
        return int(self.segments["allocated_size_bytes"].sum())

    def top_sites(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` allocation sites with most bytes: frame, allocs, allocated_bytes,
        live_bytes (allocated here and not freed by the end of the history). A free is charged
        to the alloc at the same address; frees of blocks allocated before the history began
        form a last row "(allocated before the history)" with negative live_bytes."""
        return _top_sites(self.events, _free_action(self.events), n)

    @property
    def findings(self) -> tuple[Finding, ...]:
        return rank_findings(_snapshot_findings(self))

    def __repr__(self) -> str:
        return (f"MemorySnapshot({Path(self.path).name!r}, segments={len(self.segments)}, "
                f"events={len(self.events)}, peak={self.peak_bytes / _GIB:.3f} GiB, "
                f"net_growth={self.net_growth_bytes:,} B)")

    def _repr_html_(self) -> str:
        head = html_text(f"{len(self.segments)} segments, {len(self.events)} history events, "
                         f"peak {self.peak_bytes / _GIB:.3f} GiB, net growth {self.net_growth_bytes:,} B")
        return html_section(f"CUDA memory snapshot {Path(self.path).name}", f"<p>{head}</p>",
                            html_table(self.top_sites()), html_table(findings_frame(self.findings)),
                            html_warnings(self.warnings))


def load_memory_snapshot(path) -> MemorySnapshot:
    """Read a ``torch.cuda.memory._dump_snapshot`` pickle (``.pickle`` or ``.pickle.gz``).

    Raises TraceError when the file is missing, is not a pickle (a profiler memory timeline
    export gets a message naming ``load_profiler_memory_timeline``), tries to construct any
    object, or does not have the snapshot's structure.
    """
    path = Path(path)
    data = _read_bytes(path)
    if data[:1] in (b"[", b"{"):
        raise TraceError(path, "this is JSON, not a CUDA memory snapshot pickle: it looks like a "
                         "torch.profiler memory timeline export (export_memory_timeline)",
                         "read it with perfkit.bench.snapshot.load_profiler_memory_timeline(path)")
    try:
        raw = _RestrictedUnpickler(io.BytesIO(data), path).load()
    except TraceError:
        raise
    except Exception as exc:
        raise TraceError(path, f"cannot unpickle: {type(exc).__name__}: {exc}",
                         "the file is truncated or not a memory snapshot") from exc
    return _build_snapshot(path, raw)


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        raise TraceError(path, "file not found")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise TraceError(path, f"gzip data is damaged: {exc}", "re-copy the file") from exc
    return data


def _build_snapshot(path: Path, raw) -> MemorySnapshot:
    if isinstance(raw, list):  # torch.cuda.memory_snapshot(): segments only, no history
        raw = {"segments": raw, "device_traces": []}
    if not isinstance(raw, dict) or not isinstance(raw.get("segments"), list):
        kind = type(raw).__name__
        keys = sorted(raw)[:8] if isinstance(raw, dict) else []
        raise TraceError(path, f"not a CUDA memory snapshot: top level is a {kind} {keys}",
                         "expected a dict with 'segments' and 'device_traces' (torch.cuda.memory._snapshot())")
    try:
        segments, blocks = _segments_frame(raw["segments"]), _blocks_frame(raw["segments"])
        events = _events_frame(raw.get("device_traces") or [])
    except (KeyError, TypeError, AttributeError) as exc:
        raise TraceError(path, f"malformed snapshot: {type(exc).__name__}: {exc}") from exc
    warnings = []
    if events.empty:
        warnings.append("no allocation history in this snapshot: call "
                        "torch.cuda.memory._record_memory_history() before the code you snapshot")
    return MemorySnapshot(str(path), segments, blocks, events, dict(raw.get("allocator_settings") or {}),
                          tuple(warnings))


def _segments_frame(segments: list) -> pd.DataFrame:
    rows = [{"device": s.get("device", 0), "address": s["address"], "total_size_bytes": s["total_size"],
             "allocated_size_bytes": s.get("allocated_size", 0), "active_size_bytes": s.get("active_size", 0),
             "requested_size_bytes": s.get("requested_size", 0), "stream": s.get("stream", 0),
             "segment_type": s.get("segment_type", ""), "blocks": len(s.get("blocks", []))}
            for s in segments]
    return pd.DataFrame(rows, columns=["device", "address", "total_size_bytes", "allocated_size_bytes",
                                       "active_size_bytes", "requested_size_bytes", "stream",
                                       "segment_type", "blocks"])


def _blocks_frame(segments: list) -> pd.DataFrame:
    rows = [{"device": s.get("device", 0), "segment_address": s["address"], "address": b["address"],
             "size_bytes": b["size"], "requested_size_bytes": b.get("requested_size", 0),
             "state": b["state"], "stream": s.get("stream", 0), "frame": frame_site(b.get("frames", []))}
            for s in segments for b in s.get("blocks", [])]
    return pd.DataFrame(rows, columns=["device", "segment_address", "address", "size_bytes",
                                       "requested_size_bytes", "state", "stream", "frame"])


def _events_frame(device_traces: list) -> pd.DataFrame:
    rows = [{"device": dev, "time_us": e.get("time_us", 0), "action": e["action"], "address": e.get("addr", 0),
             "size_bytes": e.get("size", 0), "stream": e.get("stream", 0),
             "frame": frame_site(e.get("frames", []))}
            for dev, trace in enumerate(device_traces) for e in trace]
    frame = pd.DataFrame(rows, columns=["device", "time_us", "action", "address", "size_bytes", "stream", "frame"])
    frame = frame.astype({"device": "int64", "time_us": "int64", "size_bytes": "int64", "stream": "int64"})
    return frame.sort_values(["device", "time_us"], kind="stable").reset_index(drop=True)


def frame_site(frames: list) -> str:
    """"file:line:name" of the frame that best says who allocated (frames innermost first):

    1. a Python frame in ``torch/optim/``: optimizer state or its step's temporaries, named so
       (the user frame above it is only the ``optimizer.step()`` line);
    2. the first Python frame outside torch and site-packages (the user code that allocated);
    3. the first Python frame;
    4. backward allocations have no Python frame: the autograd node that ran
       (``torch::autograd::generated::MmBackward0::apply``);
    5. the first C++ frame that is not the unwinder, the allocator, tensor creation, the dispatcher,
       the interpreter or an unnamed ``??`` frame; then any frame.
    """
    py = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    optim = [f for f in py if any(part in f["filename"] for part in _OPTIM)]
    user = [f for f in py if not any(part in f["filename"] for part in _NOT_USER)]
    native = [f for f in frames if not str(f.get("filename", "")).endswith(".py") and _meaningful(f)]
    node = [f for f in native if _AUTOGRAD_NODE.search(str(f.get("name", "")))]
    pick = (optim or user or py or node or native or frames or [None])[0]
    if pick is None:
        return ""
    if str(pick.get("filename", "")) in ("", "??") and pick is not frames[0]:
        return str(pick.get("name", "?"))   # a C++ frame without debug info: its function says it all
    return f"{pick.get('filename', '?')}:{pick.get('line', 0)}:{pick.get('name', '?')}"


def _meaningful(frame: dict) -> bool:
    name = str(frame.get("name", ""))
    return bool(name) and name != "??" and _MACHINERY.search(name) is None


def is_optimizer_site(site: str) -> bool:
    """Whether an allocation site (``frame_site``) is in torch.optim: optimizer state."""
    return any(part in site for part in _OPTIM)


def _free_action(events: pd.DataFrame) -> str:
    present = set(events["action"])
    return next((a for a in _FREE_ACTIONS if a in present), "free_completed")


def _top_sites(events: pd.DataFrame, free_action: str, n: int) -> pd.DataFrame:
    site_of: dict[tuple, str] = {}
    live: dict[str, int] = {}
    cols = ["device", "action", "address", "size_bytes", "frame"]
    for dev, action, addr, size, frame in events[cols].itertuples(index=False):
        if action == "alloc":
            site_of[(dev, addr)] = frame
            live[frame] = live.get(frame, 0) + size
        elif action == free_action:
            site = site_of.pop((dev, addr), _BEFORE_HISTORY)
            live[site] = live.get(site, 0) - size
    allocs = events[events["action"] == "alloc"].groupby("frame")["size_bytes"].agg(["count", "sum"])
    out = pd.DataFrame({"frame": allocs.index, "allocs": allocs["count"].to_numpy(),
                        "allocated_bytes": allocs["sum"].to_numpy()})
    out["live_bytes"] = out["frame"].map(live).fillna(0).astype("int64")
    out = out.sort_values("allocated_bytes", ascending=False, kind="stable").head(n)
    if _BEFORE_HISTORY in live:  # frees of blocks allocated before recording started
        row = pd.DataFrame([{"frame": _BEFORE_HISTORY, "allocs": 0, "allocated_bytes": 0,
                             "live_bytes": live[_BEFORE_HISTORY]}])
        out = pd.concat([out, row], ignore_index=True)
    out["frame"] = out["frame"].replace("", "(no stack recorded)")
    return out.reset_index(drop=True)


def _snapshot_findings(s: MemorySnapshot) -> list[Finding]:
    out = [_growth_finding(s)] if s.net_growth_bytes > GROWTH_NOTE_BYTES else []
    idle = s.reserved_bytes - s.active_bytes
    if idle > _GIB and idle > 0.3 * max(s.reserved_bytes, 1):
        out.append(Finding("medium", f"{idle / _GIB:,.2f} GiB reserved by the caching allocator but not allocated",
                           {"reserved_bytes": s.reserved_bytes, "allocated_bytes": s.active_bytes},
                           "fragmentation or a past peak: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                           "> 1 GiB and > 30% of reserved memory unallocated at snapshot time"))
    return out


def _growth_finding(s: MemorySnapshot) -> Finding:
    """Growth inside one snapshot's history, hedged: one window cannot show a leak (see GROWTH_NOTE_BYTES)."""
    growth = s.net_growth_bytes
    held = s.top_sites(n=len(s.events) + 1)
    held = held[held["live_bytes"] > 0].sort_values("live_bytes", ascending=False, kind="stable")
    optim = int(held.loc[held["frame"].map(is_optimizer_site), "live_bytes"].sum())
    sites = "; ".join(f"{f} {b / 2**20:,.1f} MiB" for f, b in zip(held["frame"].head(3), held["live_bytes"]))
    evidence = {"allocated_bytes": s.allocated_bytes, "freed_bytes": s.freed_bytes, "growth_bytes": growth,
                "optimizer_state_bytes": optim, "top_site": held["frame"].iloc[0] if len(held) else ""}
    rule = (f"net growth > {GROWTH_NOTE_BYTES / 2**20:g} MiB in one snapshot's history; a leak needs growth "
            "that repeats across steps (several snapshots: snapshot_growth)")
    if optim >= 0.5 * growth:
        return Finding("info", f"live memory grew by {growth / 2**20:,.1f} MiB within the recorded window, "
                               f"{optim / 2**20:,.1f} MiB of it optimizer state",
                       evidence, "torch.optim creates its state on the first step and keeps it (Adam: exp_avg and "
                       "exp_avg_sq, twice the size of the parameters): expected once, not a leak. To test for a "
                       "leak, snapshot after later steps and compare them with perfkit.snapshot_growth([...]).", rule)
    return Finding("low", f"live memory grew by {growth / 2**20:,.1f} MiB within the recorded window "
                          "(one snapshot: growth, not evidence of a leak)", evidence,
                   f"Still held at the end of the window: {sites}. Inside a step this is normal (activations "
                   "kept for backward, outputs, caches; optimizer state on the first step); it is a leak only if "
                   "it repeats every step: snapshot after two or more later steps and compare them with "
                   "perfkit.snapshot_growth([...]).", rule)


@dataclass(frozen=True, eq=False)
class ProfilerMemoryTimeline:
    """A ``torch.profiler`` memory timeline (raw export). ``events``: time_ns (-1 for memory
    that existed before profiling), action, bytes (signed: + created, - destroyed), category."""

    path: str
    events: pd.DataFrame
    warnings: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        """Live bytes per category after each timestamp: time_ns, one column per category, total."""
        wide = self.events.pivot_table(index="time_ns", columns="category", values="bytes", aggfunc="sum",
                                       fill_value=0).cumsum()
        wide = wide.reindex(columns=[c for c in TIMELINE_CATEGORIES if c in wide.columns])
        wide["total"] = wide.sum(axis=1)
        return wide.reset_index().rename_axis(columns=None)

    @property
    def peak_bytes(self) -> int:
        return int(self.to_frame()["total"].max()) if len(self.events) else 0

    @property
    def net_growth_bytes(self) -> int:
        """Live bytes at the end minus at the start of profiling (pre-existing memory)."""
        ev = self.events
        return int(ev.loc[ev["time_ns"] >= 0, "bytes"].sum())

    def __repr__(self) -> str:
        return (f"ProfilerMemoryTimeline({Path(self.path).name!r}, events={len(self.events)}, "
                f"peak={self.peak_bytes / _GIB:.3f} GiB)")

    def _repr_html_(self) -> str:
        peak = self.to_frame().sort_values("total").tail(1)
        return html_section(f"Profiler memory timeline {Path(self.path).name}", html_table(peak),
                            html_warnings(self.warnings))


def load_profiler_memory_timeline(path) -> ProfilerMemoryTimeline:
    """Read ``export_memory_timeline("....raw.gz")`` output: JSON list of
    [time_ns, action, bytes, category_index]. Raises TraceError for anything else."""
    path = Path(path)
    data = _read_bytes(path)
    try:
        rows = json.loads(data)
    except ValueError as exc:
        raise TraceError(path, f"not a profiler memory timeline (JSON): {exc}",
                         "CUDA memory snapshot pickles are read with load_memory_snapshot") from exc
    ok = isinstance(rows, list) and all(isinstance(r, list) and len(r) == 4 for r in rows[:100])
    if not ok:
        raise TraceError(path, "not a raw profiler memory timeline: expected a list of "
                         "[time_ns, action, bytes, category] rows",
                         "export it with prof.export_memory_timeline('x.raw.gz')")
    frame = pd.DataFrame(rows, columns=["time_ns", "action", "bytes", "category"])
    frame["action"] = frame["action"].map(TIMELINE_ACTIONS).fillna("unknown")
    frame["category"] = frame["category"].map(dict(enumerate(TIMELINE_CATEGORIES))).fillna("unknown")
    return ProfilerMemoryTimeline(str(path), frame.sort_values("time_ns", kind="stable").reset_index(drop=True))
