"""Where to look in a trace viewer: the step_anatomy notebook's tables of GPU gaps, critical-path
stretches and findings, each with the time range to open in Perfetto or chrome://tracing, and the
annotated trace (``perfkit annotate``) that marks them.

Times are given two ways: milliseconds from the start of the rank's trace file (the earliest
event: the clock Perfetto UI shows by default) and the raw ``ts`` in microseconds as the file
holds it (what chrome://tracing and Perfetto's "raw" timestamp format show).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..analysis.host_ops import HOST_CATEGORIES
from ..analysis.memory import memory_timeline
from ..analysis.step.gaps import CLASSES, FIXES, MOST
from ..results import findings_frame, html_table, html_text, html_warnings, rank_findings
from ..workbook import relative_name
from .plots import memory_over_time
from .rows import live_note, finite_rows
from .rows import mean_row
from .sections import show

TOP = 10


def origins(trace) -> dict:
    """The earliest event time (us) of each rank's trace file: the zero of the viewers' clock."""
    return {int(r): float(t) for r, t in trace.events.groupby("rank")["ts_us"].min().items()}


def _ms_from(origin: dict, ranks, ts_us) -> list[float]:
    return [round((float(t) - origin.get(int(r), float(t))) / 1e3, 3) for r, t in zip(ranks, ts_us)]


def _range_columns(frame: pd.DataFrame, origin: dict, start: str, end: str) -> dict:
    return {"from (ms)": _ms_from(origin, frame["rank"], frame[start]),
            "to (ms)": _ms_from(origin, frame["rank"], frame[end]),
            "raw ts (us)": [f"{t:.0f}" for t in frame[start]]}


def hotspot_table(spots, n: int = 15) -> pd.DataFrame:
    """The ``n`` functions with the most self time of a ``hotspots`` result (waiting primitives
    included, flagged): self and total time (ms), calls, self time per step (ms), % of the
    thread's covered time, and where the function starts (file:line)."""
    top = spots.top(n)
    return pd.DataFrame({"function": top["function"], "where": [_where(f, ln) for f, ln in zip(top["file"], top["line"])],
                         "thread": top["thread"], "self (ms)": (top["self_us"] / 1e3).round(3),
                         "total (ms)": (top["total_us"] / 1e3).round(3), "calls": top["calls"],
                         "self per step (ms)": (top["self_per_step_us"] / 1e3).round(3),
                         "% of thread": top["self_pct"].round(1), "waiting": top["waiting"]})


def gap_classes(gaps) -> pd.DataFrame:
    """Per gap class with idle time: gaps, idle time (ms, % of all idle, ms per step), the longest
    gap (ms) and the fix (``gaps.FIXES``), most idle first. Empty without a GPU timeline."""
    columns = ["class", "gaps", "idle (ms)", "% of idle", "ms per step", "longest (ms)", "fix"]
    if not gaps.has_gpu or gaps.gaps.empty:
        return pd.DataFrame(columns=columns)
    steps = max(len(gaps.steps), 1)
    longest = gaps.gaps.groupby("class")["dur_us"].max()
    rows = [{"class": c, "gaps": t["count"], "idle (ms)": round(t["dur_us"] / 1e3, 3),
             "% of idle": round(100 * t["share"], 1), "ms per step": round(t["dur_us"] / steps / 1e3, 3),
             "longest (ms)": round(float(longest[c]) / 1e3, 3), "fix": FIXES[c]}
            for c, t in gaps.totals.items() if t["count"]]
    return pd.DataFrame(rows, columns=columns).sort_values("idle (ms)", ascending=False, ignore_index=True)


def gap_note(gaps) -> str:
    """What the empty gap tables mean: no GPU timeline, or a GPU that never idled inside a step."""
    if not gaps.has_gpu:
        return ("No GPU timeline in this trace (no kernels, copies or memsets), so there are no GPU gaps to "
                "explain; the critical path and the hotspots above are the whole story.")
    return "The GPU never sat idle inside a profiled step."


def top_gaps(gaps, trace, n: int = TOP) -> pd.DataFrame:
    """The ``n`` longest GPU gaps: step, class, idle (ms), the range to look at, and the function
    the launching thread was busy with (file:line when it has a Python frame)."""
    top = gaps.top(n)
    if top.empty:
        return pd.DataFrame(columns=["rank", "step", "class", "idle (ms)", "from (ms)", "to (ms)", "raw ts (us)",
                                     "function", "where"])
    top = top.assign(end_us=top["start_us"] + top["dur_us"])
    return pd.DataFrame({"rank": top["rank"], "step": top["step"], "class": top["class"],
                         "idle (ms)": (top["dur_us"] / 1e3).round(3), **_range_columns(top, origins(trace), "start_us", "end_us"),
                         "function": top["function"], "where": [_where(f, ln) for f, ln in zip(top["file"], top["line"])]})


def _where(file: str, line: int) -> str:
    return f"{file}:{int(line)}" if file and line >= 0 else ""


def path_stretches(path, trace, n: int = TOP, kinds=("host", "sync_wait", "launch", "idle")) -> pd.DataFrame:
    """The ``n`` longest stretches of the critical path of the given kinds (adjacent segments of one
    kind on one lane merged): step, kind, length (ms), the range to look at, the lane and what it
    runs through: the path's event, else the innermost host event on that thread covering at least
    half of the stretch (``MOST``: the rule of ``gaps``)."""
    seg = path.segments
    seg = seg[seg["kind"].isin(kinds)].sort_values(["rank", "step", "lane", "start_us"], kind="stable")
    if seg.empty:
        return pd.DataFrame(columns=["rank", "step", "kind", "ms", "from (ms)", "to (ms)", "raw ts (us)", "lane",
                                     "through"])
    new = ((seg["kind"] != seg["kind"].shift()) | (seg["lane"] != seg["lane"].shift())
           | (seg["step"] != seg["step"].shift()) | (seg["start_us"] > seg["end_us"].shift() + 1.0))
    seg = seg.assign(dur=seg["end_us"] - seg["start_us"], group=new.cumsum())
    merged = seg.groupby("group").agg(rank=("rank", "first"), step=("step", "first"), kind=("kind", "first"),
                                      lane=("lane", "first"), start_us=("start_us", "min"), end_us=("end_us", "max"),
                                      dur=("dur", "sum"), label=("label", lambda s: _longest(s, seg)))
    top = merged.nlargest(n, "dur")
    return pd.DataFrame({"rank": top["rank"], "step": top["step"], "kind": top["kind"],
                         "ms": (top["dur"] / 1e3).round(3), **_range_columns(top, origins(trace), "start_us", "end_us"),
                         "lane": top["lane"], "through": [_through(trace, r) for r in top.to_dict("records")]}
                        ).reset_index(drop=True)


def _longest(labels: pd.Series, seg: pd.DataFrame) -> int:
    durations = seg.loc[labels.index, "dur"]
    return int(labels[durations.idxmax()])


def _through(trace, stretch: dict) -> str:
    """The event a path stretch runs through (see ``path_stretches``); "" when none is found."""
    ev = trace.events
    if stretch["label"] >= 0 and stretch["label"] in ev.index:
        return str(ev.at[stretch["label"], "name"])
    tid = str(stretch["lane"]).rsplit(":", 1)[-1].rsplit("/", 1)[-1]  # "rank1:pid/tid" -> "tid"
    start, end = stretch["start_us"], stretch["end_us"]
    near = ev[(ev["rank"] == stretch["rank"]) & (ev["ph"] == "X") & (ev["ts_us"] < end)
              & (ev["ts_us"] + ev["dur_us"] > start) & ev["cat"].isin(HOST_CATEGORIES)]
    near = near[(near["tid"].astype(str) == tid) & ~near["name"].astype(str).str.startswith("ProfilerStep#")]
    cover = (near["ts_us"] + near["dur_us"]).clip(upper=end) - near["ts_us"].clip(lower=start)
    inner = near[cover >= MOST * (end - start)]
    return str(inner.loc[inner["dur_us"].idxmin(), "name"]) if len(inner) else ""


def findings_table(findings, trace) -> pd.DataFrame:
    """``findings_frame`` of ``findings`` with a "look at" column: the range of the longest gap
    behind a gap finding (``longest_start_us``/``longest_us`` in its evidence), in ms from the
    trace start and raw ts; empty for findings without one."""
    findings = rank_findings(findings)
    frame = findings_frame(findings)
    origin = min(origins(trace).values(), default=0.0)
    frame.insert(2, "look at", [_look_at(f.evidence, origin) for f in findings])
    return frame


def _look_at(evidence: dict, origin: float) -> str:
    start, dur = evidence.get("longest_start_us"), evidence.get("longest_us")
    if start is None or dur is None:
        return ""
    at = (float(start) - origin) / 1e3
    return f"{at:,.3f}-{at + float(dur) / 1e3:,.3f} ms from trace start (raw ts {float(start):.0f} us)"


_TRACKS = ("perfkit's tracks are in the process named \"perfkit\": \"critical path\", \"GPU gaps (GPU n)\", "
           "\"findings\" (an instant per step and per finding) and the counters \"GPU busy %\" and \"GPU queue "
           "length\"; the tables above give each range in ms from the trace start.")


@dataclass(frozen=True)
class Pointer:
    """How to open the trace with perfkit's tracks: the file written (None when only the
    ``commands`` are given), the commands to run, and a sentence around them."""

    path: Path | None
    commands: tuple
    text: str

    def _repr_html_(self) -> str:
        code = "".join(f"<p><code>{html_text(c)}</code></p>" for c in self.commands)
        return f"<p>{html_text(self.text)}</p>{code}<p>{html_text(_TRACKS)}</p>"


def annotated_pointer(trace, mode: str, written: Path | None = None) -> Pointer:
    """How to open the trace with perfkit's tracks: the file ``written`` by
    ``perfkit.export.annotate.write_annotated`` when there is one, else the commands that write it (for a
    live run, whose trace is not kept, how to record one first)."""
    if mode == "live":
        return Pointer(None, ("perfkit annotate run.json.gz -o run.annotated.json.gz",),
                       "This live run's trace is not kept. To open one in Perfetto, record it with "
                       "perfkit.record_trace(perfkit.make_workload(...), 'run.json.gz'), then write the annotated "
                       "trace and open it in ui.perfetto.dev:")
    if written is not None:
        return Pointer(written, (),
                       f"Wrote {relative_name(written)}: open it in ui.perfetto.dev (or chrome://tracing).")
    commands = tuple(f"perfkit annotate {relative_name(f)} -o {_annotated_name(f)}"
                     for f in (Path(f.path) for f in trace.files))
    return Pointer(None, commands, "To see these ranges on the timeline, write the annotated trace (or set "
                   "annotated_path) and open it in ui.perfetto.dev or chrome://tracing:")


def _annotated_name(path: Path) -> str:
    stem = path.name.removesuffix(".gz").removesuffix(".json")
    return f"{stem}.annotated.json.gz"


def table_or_note(frame: pd.DataFrame, note: str, max_rows: int = 20) -> str:
    """``frame`` as an HTML table, or ``note`` as a paragraph when it has no rows."""
    return html_table(frame, max_rows=max_rows) if len(frame) else f"<p><i>{html_text(note)}</i></p>"


def step_anatomy_rows(path, gaps, subject: str, device: str) -> list[dict]:
    """Mean step wall time (ms, the step of ``step_anatomy``'s sentence) of a ``critical_path``
    result and, with a GPU timeline (``gpu_gaps`` result), GPU busy (any stream) and idle time per
    step and the compute stream's idle time in each gap class that has any
    (``idle_<class>_ms_per_step``; ``other_stream`` idle overlaps the GPU's busy time, so the classes
    need not sum to the GPU's idle time). Means over the step windows, CIs over them. (Without a
    GPU the path is the main thread's host time, the step itself.)"""
    steps = path.steps
    if steps.empty:
        return []
    base = dict(subject=subject, device=device, quality=live_note(subject))
    rows = [mean_row("step_anatomy", "mean_step_ms", steps["wall_us"] / 1e3, **base)]
    if not gaps.has_gpu:
        return finite_rows(rows)
    g = gaps.steps
    idle = g["wall_us"] - g["gpu_busy_us"]
    rows += [mean_row("step_anatomy", "gpu_busy_ms_per_step", g["gpu_busy_us"] / 1e3, **base),
             mean_row("step_anatomy", "gpu_idle_ms_per_step", idle / 1e3, **base)]
    # Only classes with idle time: a class absent from both runs says nothing, and one that
    # appears is new ("no baseline"), not a regression from zero.
    rows += [mean_row("step_anatomy", f"idle_{c}_ms_per_step", g[f"{c}_us"] / 1e3, **base)
             for c in _gap_classes(g) if g[f"{c}_us"].sum() > 0]
    return finite_rows(rows)


def _gap_classes(steps: pd.DataFrame) -> list[str]:
    return [c for c in CLASSES if f"{c}_us" in steps]


def show_memory_timeline(trace) -> None:
    """Allocated and reserved memory over time per device, with the peak, growth per step and top
    allocating ops (``memory_timeline``), for a trace recorded with ``profile_memory=True``; else
    one line saying how to record it."""
    timeline = memory_timeline(trace)
    if not timeline.devices:
        show(html_text("No [memory] events in this trace: record with profile_memory=True "
                        "(perfkit profile --memory) to see memory over time."))
        return
    rows = [{"device": d["device"], "peak": f"{d['peak_bytes'] / 2**20:,.1f} MiB", "peak step": d["peak_step"],
             "peak op": d["peak_op"] or "-", "growth per step": f"{d['growth_per_step_bytes'] / 2**10:,.1f} KiB"
             if d["growth_per_step_bytes"] is not None else "-"} for d in timeline.devices]
    show(memory_over_time(timeline), html_table(pd.DataFrame(rows)), html_warnings(timeline.warnings))
