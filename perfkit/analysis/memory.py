"""Memory timeline of a trace recorded with ``profile_memory=True``: allocated and reserved memory
over time per device, the peak with the op and Python function that allocated at it, what each step
still holds at its end and the growth per step (a leak inside one trace), and the top allocating ops.

The allocator's totals come from the ``[memory]`` events' ``Total Allocated`` / ``Total Reserved``
(:func:`perfkit.trace.loader.memory_events.memory_args`). On CPU torch counts only memory allocated
after profiling started, so CPU totals are relative to the start of the recording.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import TraceError
from ..results import html_section, html_table, html_warnings
from ..text import jsonable
from ..trace.ancestry import enclosing
from ..trace.loader.memory_events import memory_args
from ..trace.steps import step_windows, window_index
from .stacks import user_frames

EVENT_COLUMNS = ["rank", "device", "ts_us", "step", "bytes", "allocated", "reserved", "addr", "op", "function"]
CONFIDENCE = 0.95
MIN_GROWTH_STEPS = 3  # a slope and its CI need at least 3 step ends
_NOT_SHOWN = ("top_ops", "end_of_step_bytes", "held_by")


@dataclass(frozen=True)
class MemoryTimeline:
    """``events``: one row per [memory] event (``EVENT_COLUMNS``; bytes negative = freed, op and
    function that allocated); ``devices``: one dict per (rank, device) with ``peak_bytes``,
    ``peak_step``, ``peak_op``, ``peak_function``, ``end_of_step_bytes``, ``growth_per_step_bytes``,
    ``growth_ci`` (95% CI of the slope, None under 3 steps), ``top_ops`` and ``held_by`` (what holds the
    growth: the blocks allocated inside a step and never freed in the trace, by the function and op that
    allocated them, those held in the most steps first: ``function``, ``op``, ``bytes``, ``count``, ``steps``); ``warnings``; ``steps``: the
    step windows the per-step numbers were taken over (rank, step, start_us, end_us, dur_us; step -1: no
    steps, one window per rank)."""

    events: pd.DataFrame
    devices: tuple
    warnings: tuple = ()
    steps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["rank", "step", "start_us", "end_us"]))

    def to_frame(self) -> pd.DataFrame:
        return self.events

    def device(self, name: str) -> dict:
        """The summary of device ``name`` ("cpu", "cuda:0"); KeyError listing the devices if absent."""
        for d in self.devices:
            if d["device"] == name:
                return d
        raise KeyError(f"no device {name!r} in the timeline: it has {', '.join(d['device'] for d in self.devices)}")

    def to_json(self) -> dict:
        return jsonable({"devices": list(self.devices), "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        peaks = ", ".join(f"{d['device']} peak {d['peak_bytes'] / 2**20:.1f} MiB" for d in self.devices)
        return f"<MemoryTimeline {len(self.events)} events: {peaks or 'no memory events'}>"

    def _repr_html_(self) -> str:
        if not self.devices:  # no table over nothing: the warning says why and how to record memory
            return html_section("Memory timeline", html_warnings(self.warnings))
        table = pd.DataFrame([{**{k: v for k, v in d.items() if k not in _NOT_SHOWN},
                               "growth_ci": ci_text(d["growth_ci"])} for d in self.devices])
        held = pd.DataFrame([{"device": d["device"], **h} for d in self.devices for h in d["held_by"][:5]])
        parts = [html_table(table)]
        if len(held):
            parts += ["<p>Held at the trace's end: blocks allocated in a step and never freed, by allocating line "
                      "(held in the most steps first)</p>", html_table(held.rename(columns={"bytes": "bytes_held"}))]
        return html_section("Memory timeline", *parts, html_warnings(self.warnings))


def recorded_memory(trace, *, top: int = 10) -> MemoryTimeline:
    """:func:`memory_timeline` of a trace that recorded memory: ``perfkit memory`` and the MCP tool ``memory``
    refuse a trace without a timeline (an error, not an empty answer that exits 0), with how to record one.
    Raises :class:`~perfkit.errors.TraceError` naming the trace's file."""
    timeline = memory_timeline(trace, top=top)
    if not timeline.devices:
        problem = ("holds no [memory] events" if timeline.events.empty else
                   "has [memory] events but none with a usable Total Allocated")
        where = ", ".join(f.path for f in trace.files) or "the trace"
        raise TraceError(where, f"{problem}: there is no memory timeline to read",
                         "Record it with `perfkit profile --memory SCRIPT` (profile_memory=True in torch.profiler)")
    return timeline


def memory_timeline(trace, *, top: int = 10) -> MemoryTimeline:
    """The memory timeline of ``trace`` (see the module docstring); ``top``: allocating ops listed per
    device. A trace without [memory] events gives no devices and a warning saying how to record them.
    Raises TraceError when a source file can no longer be read."""
    events = _memory_events(trace)
    if events.empty:
        return MemoryTimeline(events, (), ("no [memory] events: record with profile_memory=True "
                                           "(perfkit profile --memory)",))
    windows = step_windows(trace)
    warnings = [] if len(trace.steps) else ["no profiler steps: peak step, end-of-step memory and growth need "
                                            "ProfilerStep spans (record on a schedule)"]
    usable = events[events["allocated"] >= 0]
    if len(usable) < len(events):
        warnings.append(f"{len(events) - len(usable)} [memory] event(s) carry no usable Total Allocated: the peak, "
                        "step ends and growth leave them out (they stay in events)")
    devices = tuple(_device_summary(group, windows, top) for _, group in usable.groupby(["rank", "device"], sort=True))
    warnings += [growth_text(d) for d in devices if grows(d)]
    return MemoryTimeline(events, devices, tuple(warnings), windows)


def _memory_events(trace) -> pd.DataFrame:
    args = memory_args(trace)
    if args.empty:
        return pd.DataFrame({c: [] for c in EVENT_COLUMNS})
    rows = trace.events.loc[args.index]
    out = rows[["rank", "ts_us"]].join(args)
    ops = trace.select("cpu_op")
    op_label = enclosing(ops, rows)
    out["op"] = np.where(op_label >= 0, trace.events["name"].astype(str).reindex(op_label).to_numpy(), None)
    out["function"] = user_frames(trace, rows)["frame"].to_numpy()
    out["step"] = _steps(step_windows(trace), out)
    return out.sort_values("ts_us", kind="stable")[EVENT_COLUMNS]


def _steps(windows: pd.DataFrame, events: pd.DataFrame) -> np.ndarray:
    if windows.empty:  # no host event spans a window (a trace of [memory] events only)
        return np.full(len(events), -1, dtype=np.int64)
    where = window_index(windows, events["ts_us"], events["rank"])
    numbers = windows["step"].to_numpy()
    return np.where(where >= 0, numbers[np.clip(where, 0, None)], -1)


def _device_summary(ev: pd.DataFrame, windows: pd.DataFrame, top: int) -> dict:
    peak = ev.loc[ev["allocated"].idxmax()]
    ends = _end_of_step(ev, windows[windows["rank"] == ev["rank"].iloc[0]])
    slope, ci = _growth(ends)
    allocs = ev[ev["bytes"] > 0]
    top_ops = (allocs.groupby(allocs["op"].fillna("(no op)"), sort=False)["bytes"].agg(["sum", "count"])
               .sort_values("sum", ascending=False).head(top))
    return {"device": ev["device"].iloc[0], "rank": int(ev["rank"].iloc[0]), "peak_bytes": int(peak["allocated"]),
            "peak_reserved_bytes": int(ev["reserved"].max()), "peak_step": int(peak["step"]),
            "peak_op": peak["op"], "peak_function": peak["function"], "end_of_step_bytes": ends,
            "growth_per_step_bytes": slope, "growth_ci": ci,
            "top_ops": [{"op": op, "bytes": int(r["sum"]), "count": int(r["count"])} for op, r in top_ops.iterrows()],
            "held_by": _held_by(ev, top)}


def _held_by(ev: pd.DataFrame, top: int) -> list[dict]:
    """Blocks allocated inside a step whose address is not freed after it (the next event at that address
    is none), by allocating (function, op): held in the most steps first, then most bytes."""
    known = ev[ev["addr"] >= 0]
    following = known.groupby(["device", "addr"], sort=False)["bytes"].shift(-1)
    held = known[(known["bytes"] > 0) & (known["step"] >= 0) & following.isna()]
    if held.empty:
        return []
    keys = [held["function"].fillna("(no Python frame)"), held["op"].fillna("(no op)")]
    groups = held.groupby(keys, sort=False).agg(bytes=("bytes", "sum"), count=("bytes", "size"),
                                                steps=("step", "nunique"))
    groups = groups.sort_values(["steps", "bytes"], ascending=False, kind="stable").head(top)
    return [{"function": f, "op": op, "bytes": int(r["bytes"]), "count": int(r["count"]), "steps": int(r["steps"])}
            for (f, op), r in groups.iterrows()]


def growth_text(d: dict) -> str:
    """A device whose memory held at step ends grows, in one sentence naming what holds the growth."""
    text = (f"{d['device']}: memory held at step ends grows {d['growth_per_step_bytes']:,.0f} B/step "
            f"(95% CI {d['growth_ci'][0]:,.0f}..{d['growth_ci'][1]:,.0f}): a leak inside this trace")
    if d["held_by"]:
        h = d["held_by"][0]
        text += (f"; held by {h['bytes']:,} B allocated in {h['steps']} step(s) by {h['function']} ({h['op']}) "
                 "and never freed")
    return text


def _end_of_step(ev: pd.DataFrame, windows: pd.DataFrame) -> list[int]:
    """Allocated bytes after the last event before each step's end (steps with a real number only)."""
    windows = windows[windows["step"] >= 0].sort_values("start_us")
    ts, allocated = ev["ts_us"].to_numpy(), ev["allocated"].to_numpy()
    last = np.searchsorted(ts, windows["end_us"].to_numpy(), side="left") - 1
    return [int(allocated[i]) for i in last if i >= 0]


def _growth(ends: list[int]) -> tuple[float | None, tuple | None]:
    """Least-squares slope of end-of-step bytes over steps and its 95% CI (t distribution)."""
    if len(ends) < 2:
        return None, None
    x = np.arange(len(ends), dtype=np.float64)
    y = np.asarray(ends, dtype=np.float64)
    dx = x - x.mean()
    slope = float((dx * (y - y.mean())).sum() / (dx * dx).sum())
    if len(ends) < MIN_GROWTH_STEPS:
        return slope, None
    resid = y - (y.mean() + slope * dx)
    stderr = np.sqrt((resid * resid).sum() / (len(ends) - 2) / (dx * dx).sum())
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(ends) - 2) * stderr)
    return slope, (slope - half, slope + half)


def ci_text(ci) -> str:
    """A growth CI as people read it ("16,640 to 16,640 B"), "n/a" under 3 step ends: never a raw tuple."""
    return "n/a" if ci is None else f"{ci[0]:,.0f} to {ci[1]:,.0f} B"


def grows(d: dict) -> bool:
    """Whether device summary ``d`` grows: the CI of its growth per step stays above zero."""
    return d["growth_ci"] is not None and d["growth_ci"][0] > 0
