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

from ..analysis.memory_leak.growth import snapshot_growth
from ..analysis.memory_leak.memory_snapshot import load_memory_snapshot
from ..errors import ParameterError, require
from ..results import html_table
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
