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

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from ...errors import TraceError
from ...limits import SNAPSHOT_MAX_ITEMS
from ...results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from .reader import SnapshotReader, describe, frame_site, is_optimizer_site, read_bytes, unpickle

# torch/profiler/_memory_profiler.py: Action enum values and _CATEGORY_TO_INDEX order.
TIMELINE_ACTIONS = {1: "preexisting", 2: "create", 3: "increment_version", 4: "destroy"}
TIMELINE_CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
                       "autograd_detail", "unknown")
_FREE_ACTIONS = ("free_completed", "free_requested", "free")
_GIB = 2**30
_BEFORE_HISTORY = "(allocated before the history)"
# Growth in one snapshot's history above this is reported, as growth within the window: a single
# window (one step, often the first, where optimizer state is created) cannot tell a leak from
# memory a step keeps on purpose (perfkit rule; 1 MiB ignores allocator rounding and tiny caches).
GROWTH_NOTE_BYTES = 2**20


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

    Raises TraceError when the file is missing or unreadable, is not a pickle (a profiler memory
    timeline export gets a message naming ``load_profiler_memory_timeline``), tries to construct
    any object, expands past ``PERFKIT_SNAPSHOT_MAX_ITEMS`` or ``PERFKIT_MAX_DECOMPRESSED_BYTES``,
    or does not have the snapshot's structure and types (see :mod:`perfkit.analysis.memory_leak.reader`).
    """
    path = Path(path)
    data = read_bytes(path)
    if data[:1] in (b"[", b"{"):
        raise TraceError(path, "this is JSON, not a CUDA memory snapshot pickle: it looks like a "
                         "torch.profiler memory timeline export (export_memory_timeline)",
                         "read it with perfkit.analysis.memory_leak.memory_snapshot.load_profiler_memory_timeline(path)")
    return _build_snapshot(path, unpickle(path, data))


def _build_snapshot(path: Path, raw) -> MemorySnapshot:
    if isinstance(raw, list):  # torch.cuda.memory_snapshot(): segments only, no history
        raw = {"segments": raw, "device_traces": []}
    if not isinstance(raw, dict) or not isinstance(raw.get("segments"), list):
        keys = ", ".join(sorted(describe(k) for k in list(raw)[:8])) if isinstance(raw, dict) else ""
        raise TraceError(path, f"not a CUDA memory snapshot: top level is {describe(raw)} [{keys}]",
                         "expected a dict with 'segments' and 'device_traces' (torch.cuda.memory._snapshot())")
    reader = SnapshotReader(path)
    traces = reader.items(raw.get("device_traces") or [], list, "device_traces")
    blocks, events = reader.check_expansion(raw["segments"], traces)
    warnings = []
    settings = raw.get("allocator_settings") or {}
    if not isinstance(settings, dict) or not all(isinstance(k, str) for k in settings):
        warnings.append(f"allocator_settings is {describe(settings)}, not a dict of named settings: ignored")
        settings = {}
    if not events:
        warnings.append("no allocation history in this snapshot: call "
                        "torch.cuda.memory._record_memory_history() before the code you snapshot")
    return MemorySnapshot(str(path), _segments_frame(reader, raw["segments"]), _blocks_frame(reader, blocks),
                          _events_frame(reader, events), dict(settings), tuple(warnings))


_SEGMENT_INTS = ("device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream")


def _segments_frame(reader: SnapshotReader, segments: list) -> pd.DataFrame:
    where = "segments[{}]".format
    cols = {f"{k}_bytes" if k.endswith("size") else k: reader.ints(segments, k, where, _required(k, "address", "total_size"))
            for k in _SEGMENT_INTS}
    cols["segment_type"] = reader.strings(segments, "segment_type", where)
    cols["blocks"] = [len(s.get("blocks") or ()) for s in segments]
    return pd.DataFrame(cols, columns=["device", "address", "total_size_bytes", "allocated_size_bytes",
                                       "active_size_bytes", "requested_size_bytes", "stream",
                                       "segment_type", "blocks"])


def _blocks_frame(reader: SnapshotReader, pairs: list) -> pd.DataFrame:
    segments, blocks = [s for s, _ in pairs], [b for _, b in pairs]
    where, segment = reader.block_at, lambda i: reader.block_at(i).split(".")[0]
    return pd.DataFrame({
        "device": reader.ints(segments, "device", segment), "segment_address": reader.ints(segments, "address", segment, None),
        "address": reader.ints(blocks, "address", where, None), "size_bytes": reader.ints(blocks, "size", where, None),
        "requested_size_bytes": reader.ints(blocks, "requested_size", where),
        "state": reader.strings(blocks, "state", where, None), "stream": reader.ints(segments, "stream", segment),
        "frame": [frame_site(b.get("frames", [])) for b in blocks],
    }, columns=["device", "segment_address", "address", "size_bytes", "requested_size_bytes", "state", "stream", "frame"])


def _events_frame(reader: SnapshotReader, pairs: list) -> pd.DataFrame:
    rows, where = [e for _, e in pairs], reader.event_at
    frame = pd.DataFrame({
        "device": np.array([d for d, _ in pairs], dtype=np.int64), "time_us": reader.ints(rows, "time_us", where),
        "action": reader.strings(rows, "action", where, None), "address": reader.ints(rows, "addr", where),
        "size_bytes": reader.ints(rows, "size", where), "stream": reader.ints(rows, "stream", where),
        "frame": [frame_site(e.get("frames", [])) for e in rows],
    }, columns=["device", "time_us", "action", "address", "size_bytes", "stream", "frame"])
    return frame.sort_values(["device", "time_us"], kind="stable").reset_index(drop=True)


def _required(key: str, *required: str):
    """The default of a segment field: None (so a missing one is an error) for the required ones."""
    return None if key in required else 0


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
    [time_ns, action, bytes, category_index] integer rows. Raises TraceError for anything else
    (including more rows than ``PERFKIT_SNAPSHOT_MAX_ITEMS``)."""
    path = Path(path)
    try:
        rows = orjson.loads(read_bytes(path))
    except orjson.JSONDecodeError as exc:
        raise TraceError(path, f"not a profiler memory timeline (JSON): {exc}",
                         "CUDA memory snapshot pickles are read with load_memory_snapshot") from None
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 4 for r in rows):
        raise TraceError(path, "not a raw profiler memory timeline: expected a list of "
                         "[time_ns, action, bytes, category] rows",
                         "export it with prof.export_memory_timeline('x.raw.gz')")
    if len(rows) > SNAPSHOT_MAX_ITEMS.value():
        raise TraceError(path, SNAPSHOT_MAX_ITEMS.refusal(f"its {len(rows):,} rows"))
    reader = SnapshotReader(path, "memory timeline", "export it with prof.export_memory_timeline('x.raw.gz')")
    columns = ["time_ns", "action", "bytes", "category"]
    frame = pd.DataFrame({c: reader.ints(rows, i, "rows[{}]".format) for i, c in enumerate(columns)})
    frame["action"] = frame["action"].map(TIMELINE_ACTIONS).fillna("unknown")
    frame["category"] = frame["category"].map(dict(enumerate(TIMELINE_CATEGORIES))).fillna("unknown")
    return ProfilerMemoryTimeline(str(path), frame.sort_values("time_ns", kind="stable").reset_index(drop=True))
