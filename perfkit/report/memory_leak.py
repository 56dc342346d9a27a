"""CUDA memory snapshots in the memory_leak investigation (its ``mode="snapshot"``).

``load_snapshots(paths)`` reads the snapshots a user took (``torch.cuda.memory._dump_snapshot``),
in the order taken. What they can show depends on how many there are:

* **one** snapshot shows what its recorded window allocated and kept ("growth within the
  window", ``MemorySnapshot.findings``): activations, outputs, and on a first step the optimizer
  state. It can never show a leak, and nothing here calls it one;
* **several**, taken at the same point of successive steps, are compared by
  ``snapshot_growth``: a leak is growth in every interval after the first.

``show_snapshots`` displays either, ``snapshot_verdict`` is the card's verdict line and
``snapshot_rows`` logs the figures.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..analysis.memory import grows, memory_timeline
from ..analysis.memory_leak.growth import snapshot_growth
from ..analysis.memory_leak.memory_snapshot import load_memory_snapshot
from ..errors import ParameterError, require
from ..results import Finding, html_table
from ..stats import exact
from ..workbook import find_trace
from . import plots
from .prose import prose
from .rows import finite_rows, row

MODES = ("trace", "live", "snapshot")
_MIB = 2**20


def check_mode(mode: str) -> str:
    """``mode`` if it is one of the memory_leak notebook's ``MODES``; ParameterError otherwise."""
    if mode not in MODES:
        raise ParameterError(f"mode={mode!r}: use 'live' (hunt a leak now), 'trace' (diff trace_path against "
                             "trace_path_b) or 'snapshot' (read the CUDA memory snapshots in snapshot_paths)")
    if mode == "live":
        require("torch", "mode='live' (it hunts a leak in a running workload)")
    return mode


@dataclass(frozen=True)
class Snapshots:
    """What ``load_snapshots`` read: ``snapshots`` (``MemorySnapshot``, in the order given),
    ``result`` (the one snapshot, or ``SnapshotGrowth`` over several), ``subject`` (for the perf
    log) and ``device`` ("cuda:N" from the snapshot's segments)."""

    snapshots: tuple
    result: object
    subject: str
    device: str

    @property
    def single(self) -> bool:
        return len(self.snapshots) == 1


def load_snapshots(paths) -> Snapshots:
    """Read ``paths`` (one path or a list; each found like a trace: from the working directory,
    then the workbook). One snapshot is kept as it is; several are compared with
    ``snapshot_growth``. Raises ParameterError for no path or a missing file, TraceError for a
    file that is not a CUDA memory snapshot."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths or [])
    if not paths:
        raise ParameterError("mode='snapshot' needs snapshot_paths: one or more torch.cuda.memory._dump_snapshot() "
                             "files, in the order they were taken")
    snaps = tuple(load_memory_snapshot(_resolve(p, i)) for i, p in enumerate(paths))
    result = snaps[0] if len(snaps) == 1 else snapshot_growth(list(snaps))
    names = [Path(s.path).name for s in snaps]
    subject = f"snapshot {names[0]}" if len(names) == 1 else f"snapshots {names[0]} .. {names[-1]} ({len(names)})"
    devices = sorted({int(d) for s in snaps for d in s.segments["device"]})
    return Snapshots(snaps, result, subject, ", ".join(f"cuda:{d}" for d in devices) or "cuda")


def _resolve(path, index: int) -> Path:
    try:
        return find_trace(path)
    except ParameterError:
        raise ParameterError(f"snapshot_paths[{index}]={str(path)!r}: no such file (looked in the working directory "
                             f"{Path.cwd()} and the workbook)") from None


def snapshot_verdict(source: Snapshots) -> str:
    """The card's verdict: the growth verdict of several snapshots, or for one snapshot its
    growth within the window, worded as what it is (never "leak")."""
    if not source.single:
        return f"{source.result.verdict} across {len(source.snapshots)} snapshots"
    growth = source.result.net_growth_bytes
    if growth <= 0 and not len(source.result.events):
        return "one snapshot without allocation history: no growth can be read"
    return (f"one snapshot: live memory grew {growth / _MIB:,.1f} MiB within its window (not a leak test)"
            if growth > 0 else "one snapshot: no growth within its window")


def snapshot_text(source: Snapshots) -> str:
    """What the snapshot(s) show, in words."""
    if source.single:
        s = source.result
        return (f"{Path(s.path).name}: {s.active_bytes / _MIB:,.1f} MiB allocated and {s.reserved_bytes / _MIB:,.1f} "
                f"MiB reserved at snapshot time; its allocation history ({len(s.events):,} events) peaks at "
                f"{s.peak_bytes / _MIB:,.1f} MiB and ends {s.net_growth_bytes / _MIB:+,.1f} MiB from where it "
                "started. One snapshot shows what its window allocated and kept (activations, outputs, optimizer "
                "state on a first step), not whether that repeats every step: to test for a leak, snapshot at the "
                "same point of three or more later steps and pass them all in snapshot_paths.")
    g = source.result
    steps = ", ".join(f"{b / _MIB:+,.1f}" for b in g.table["growth_bytes"].iloc[1:])
    return (f"{len(g.table)} snapshots, allocated memory change between successive ones (MiB): {steps}. Verdict: "
            f"{g.verdict}. The first interval is set apart (the first step creates state that stays: optimizer "
            "state, workspaces); a leak grows in every interval after it.")


def show_snapshots(source: Snapshots) -> None:
    """The snapshot(s): the text, a figure (live bytes over one snapshot's history, or allocated
    and reserved memory per snapshot) and the allocation sites (top sites of one snapshot, the
    growing sites of several), sizes in MiB and files by name (no local paths in a shared report)."""
    from IPython.display import HTML, display

    display(HTML(prose(snapshot_text(source))))
    if source.single:
        display(plots.snapshot_history(source.result))
        display(HTML(html_table(in_mib(source.result.top_sites()))))
    else:
        table = source.result.to_frame()
        display(plots.snapshot_series(source.result))
        display(HTML(html_table(in_mib(table.assign(path=[Path(p).name for p in table["path"]])))))
        display(HTML(html_table(in_mib(source.result.sites.head(10)))))


def in_mib(frame):
    """``*_bytes`` / ``bytes_*`` columns as ``*_mib`` / ``mib_*`` (MiB, 2**20 bytes), for tables
    people read."""
    columns = {c: c.removesuffix("_bytes") + "_mib" if c.endswith("_bytes") else "mib_" + c.removeprefix("bytes_")
               for c in frame.columns if c.endswith("_bytes") or c.startswith("bytes_")}
    return frame.assign(**{c: frame[c] / _MIB for c in columns}).rename(columns=columns)


def leak_rows(result, subject: str) -> list[dict]:
    """1/0 for a "leak" verdict (exact) and the growth per 1,000 steps of the series that
    decided it, with the fit's CI."""
    d = result.decision
    leak = 1.0 if result.verdict == "leak" else 0.0
    rows = [row("memory_leak", "leak", leak, "flag", subject=subject, device=result.device, ci=exact(leak))]
    if d is not None:
        rows.append(row("memory_leak", f"{d.series}_per_1000_steps", d.per_1000, d.unit, subject=subject,
                        device=result.device, ci=(d.ci_low, d.ci_high)))
    return finite_rows(rows)


def snapshot_rows(source) -> list[dict]:
    """CUDA memory snapshots (``snapshots.load_snapshots``) as rows, exact (fixed by the files).
    One snapshot: its growth within the window and its history's peak (MiB), never a leak flag.
    Several: ``snapshot_leak`` (1/0 for a "leak" verdict of ``snapshot_growth``) and the median
    growth per interval after the first (MiB; the one interval of two snapshots)."""
    base = dict(subject=source.subject, device=source.device)
    if source.single:
        s = source.result
        growth, peak = s.net_growth_bytes / 2**20, s.peak_bytes / 2**20
        return finite_rows([row("memory_leak", "window_growth_mib", growth, "MiB", ci=exact(growth), **base),
                            row("memory_leak", "window_peak_mib", peak, "MiB", ci=exact(peak), **base)])
    g = source.result
    leak = 1.0 if g.verdict == "leak" else 0.0
    later = g.table["growth_bytes"].iloc[2:] if len(g.table) > 2 else g.table["growth_bytes"].iloc[1:]
    per = float(later.median()) / 2**20
    return finite_rows([row("memory_leak", "snapshot_leak", leak, "flag", ci=exact(leak), **base),
                        row("memory_leak", "growth_mib_per_interval", per, "MiB", ci=exact(per), **base)])


def leak_text(result) -> str:
    lo, hi = result.ci
    d = result.decision
    unit = d.unit if d else ""
    return (f"Verdict: {result.verdict} after {result.steps} steps on {result.device} (decided by {result.decided_by}: "
            f"{result.per_1000:,.4g} {unit} per 1,000 steps, CI {lo:,.4g} to {hi:,.4g}).")


@dataclass(frozen=True)
class TraceLeak:
    """What the memory_leak report says in trace mode, from the two traces' memory timelines
    (``perfkit.memory_timeline``), never from their step times: ``verdict``, ``fix`` and ``severity``
    of the card, ``rows`` (the before trace's growth per step) and both ``timelines``; ``findings``
    (the verdict as one finding, so the card and the findings table say the same) and ``warnings``
    make it a result ``verdict_card`` and ``show_findings`` read."""

    verdict: str
    fix: str
    severity: str
    rows: list
    timelines: tuple
    warnings: tuple = ()

    @property
    def findings(self) -> tuple:
        return (Finding(self.severity, self.verdict, {}, self.fix, "memory held at step ends: growth whose 95% CI "
                        "stays above 0 (perfkit.memory_timeline)"),)


def trace_leak(pairing) -> TraceLeak:
    """The verdict of a trace pair (``trace_diff.compare_traces``) on memory: a leak when the memory
    the before (leaky) trace holds at step ends grows with a CI above zero, naming the line that
    allocated the blocks never freed; "cannot tell" when neither trace recorded ``[memory]`` events
    (step times cannot show a leak)."""
    timelines = tuple(memory_timeline(side.trace) for side in (pairing.before, pairing.after))
    names = [side.subject.removeprefix("trace ") for side in (pairing.before, pairing.after)]
    growing = [[d for d in t.devices if grows(d)] for t in timelines]
    rows = _growth_rows(timelines[0], pairing.subject, pairing.before.device)
    if not any(t.devices for t in timelines):
        return TraceLeak("no memory recorded in either trace: step times cannot show a leak", NO_MEMORY_FIX,
                         "medium", rows, timelines)
    if growing[0] or growing[1]:
        side = 0 if growing[0] else 1
        d = growing[side][0]
        other = ("; the fixed trace grows too" if side == 0 and growing[1] else
                 "; the fixed trace holds steady" if side == 0 and timelines[1].devices else "")
        who = f"leak inside {names[side]}" if side == 0 else f"the fix still leaks: {names[side]}"
        return TraceLeak(f"{who}: memory held at step ends grows {_growth_words(d)} on {d['device']}{other}",
                         held_fix(d), "high", rows, timelines)
    measured = [n for n, t in zip(names, timelines) if t.devices]
    return TraceLeak(f"no leak inside {' or '.join(measured)}: memory held at step ends does not grow", "",
                     "info", rows, timelines)


NO_MEMORY_FIX = ("Record both runs with `perfkit profile --memory` (profile_memory=True) and compare those, or run "
                 "this notebook with mode='live' to hunt the leak in the running loop")


def held_fix(d: dict) -> str:
    """The fix of a growing device: stop keeping what the top ``held_by`` line allocates every step."""
    if not d.get("held_by"):
        return ("Find what is kept every step (record with_stack=True to name the allocating line); keep "
                "`.item()` values or a bounded deque, not tensors")
    h = d["held_by"][0]
    return (f"Stop keeping what {h['function']} allocates ({h['op']}: {h['bytes']:,} B in {h['count']:,} block(s) "
            f"over {h['steps']} step(s), never freed): keep `.item()` values or a bounded deque, not the tensors")


def _growth_words(d: dict) -> str:
    lo, hi = d["growth_ci"]
    return f"{d['growth_per_step_bytes']:,.0f} B/step (95% CI {lo:,.0f} to {hi:,.0f})"


def _growth_rows(timeline, subject: str, device: str) -> list[dict]:
    if not timeline.devices or timeline.devices[0]["growth_per_step_bytes"] is None:
        return []
    d = timeline.devices[0]
    return finite_rows([row("memory_leak", "memory_growth_per_step_bytes", d["growth_per_step_bytes"], "B",
                            subject=subject, device=device, ci=d["growth_ci"])])
