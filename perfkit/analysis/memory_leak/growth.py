"""``snapshot_growth(snapshots)``: is GPU memory leaking across steps? Compares several CUDA memory
snapshots taken at the same point of successive steps (or every N steps).

One snapshot only shows what a window allocated and kept (``MemorySnapshot.findings`` says
"growth within the window"); a leak is memory that keeps growing from step to step. The first
interval is set apart: the first step creates state that stays (optimizer state: Adam keeps two
buffers the size of the parameters; cuDNN/cuBLAS workspaces; caches), so growth there alone is
expected. The rule (perfkit):

* **leak**: at least 3 snapshots and allocated bytes grow by more than ``min_growth_bytes`` in
  every interval after the first;
* **first-step growth**: growth in the first interval only, later ones flat (within the margin);
* **growth between two snapshots**: only two snapshots, which cannot tell the two apart;
* **no growth** / **no steady growth** (changes up and down).

Allocated bytes are what the caching allocator had handed out at snapshot time (``active_bytes``),
history or not. Growing sites compare allocated blocks per allocation site (``frame_site``)
between the snapshot after the first step and the last one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...errors import ParameterError
from ...results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from .memory_snapshot import MemorySnapshot, load_memory_snapshot

MIN_GROWTH_BYTES = 2**20
VERDICTS = ("leak", "first-step growth", "growth between two snapshots", "no steady growth", "no growth")
_MIB = 2**20


@dataclass(frozen=True, eq=False, repr=False)
class SnapshotGrowth:
    """``table``: one row per snapshot (``snapshot``, ``path``, ``allocated_bytes``,
    ``reserved_bytes``, ``growth_bytes`` since the previous one). ``sites``: allocation sites whose
    allocated bytes grew (``frame``, ``bytes_before``, ``bytes_after``, ``growth_bytes``)."""

    table: pd.DataFrame
    sites: pd.DataFrame
    verdict: str
    findings: tuple
    warnings: tuple

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def __repr__(self) -> str:
        return (f"<SnapshotGrowth {self.verdict}: {len(self.table)} snapshots, "
                f"{self.table['allocated_bytes'].iloc[-1] / _MIB:,.1f} MiB allocated at the last>")

    def _repr_html_(self) -> str:
        return html_section(f"Memory across snapshots: {self.verdict}", html_text(repr(self)),
                            html_table(findings_frame(self.findings)), html_table(self.table),
                            html_table(self.sites.head(10)), html_warnings(self.warnings))


def snapshot_growth(snapshots, *, min_growth_bytes: int = MIN_GROWTH_BYTES) -> SnapshotGrowth:
    """Compare snapshots (``MemorySnapshot`` objects or paths, in the order they were taken).

    Raises ParameterError for fewer than two snapshots; TraceError for a path that is not a snapshot.
    """
    snaps = [s if isinstance(s, MemorySnapshot) else load_memory_snapshot(s) for s in snapshots]
    if len(snaps) < 2:
        raise ParameterError(f"snapshot_growth needs at least two snapshots taken after successive steps, "
                             f"got {len(snaps)}")
    table = pd.DataFrame({"snapshot": range(len(snaps)), "path": [s.path for s in snaps],
                          "allocated_bytes": [s.active_bytes for s in snaps],
                          "reserved_bytes": [s.reserved_bytes for s in snaps]})
    table["growth_bytes"] = table["allocated_bytes"].diff().fillna(0).astype(np.int64)
    verdict = _verdict(table["growth_bytes"].to_numpy()[1:], min_growth_bytes)
    sites = _growing_sites(snaps[1 if len(snaps) > 2 else 0], snaps[-1])
    return SnapshotGrowth(table, sites, verdict, rank_findings(_findings(verdict, table, sites, min_growth_bytes)),
                          _warnings(snaps))


def _verdict(growth: np.ndarray, margin: int) -> str:
    later = growth[1:]
    if len(later) and (later > margin).all():
        return "leak"
    if (np.abs(growth) <= margin).all():
        return "no growth"
    if not len(later):
        return "growth between two snapshots" if growth[0] > margin else "no steady growth"
    return "first-step growth" if growth[0] > margin and (np.abs(later) <= margin).all() else "no steady growth"


def _growing_sites(before: MemorySnapshot, after: MemorySnapshot) -> pd.DataFrame:
    def allocated(s: MemorySnapshot) -> pd.Series:
        b = s.blocks[s.blocks["state"] == "active_allocated"]
        return b.assign(frame=b["frame"].replace("", "(no stack recorded)")).groupby("frame")["size_bytes"].sum()

    table = pd.concat({"bytes_before": allocated(before), "bytes_after": allocated(after)}, axis=1).fillna(0)
    table["growth_bytes"] = table["bytes_after"] - table["bytes_before"]
    table = table[table["growth_bytes"] > 0].sort_values("growth_bytes", ascending=False)
    return table.astype(np.int64).rename_axis("frame").reset_index()


def _findings(verdict: str, table: pd.DataFrame, sites: pd.DataFrame, margin: int) -> list[Finding]:
    g = table["growth_bytes"].to_numpy()[1:]
    n = len(table)
    rule = (f"perfkit rule: a leak grows > {margin / _MIB:g} MiB in every interval after the first, over >= 3 "
            "snapshots; the first interval may create state that stays")
    where = "; ".join(f"{f} +{b / _MIB:,.1f} MiB" for f, b in zip(sites["frame"].head(3), sites["growth_bytes"]))
    evidence = {"snapshots": n, "growth_mib": [round(x / _MIB, 1) for x in g], "top_site": where}
    if verdict == "leak":
        per = float(np.median(g[1:]))
        return [Finding("high", f"leak: allocated memory grows {per / _MIB:,.1f} MiB per interval after the first, "
                                f"in all {n - 2} later interval(s) of {n} snapshots", evidence,
                        f"Memory kept across steps grows at: {where or 'sites unknown (record history with stacks)'}. "
                        "Look for tensors stored every step (losses or outputs appended to a list without .detach() "
                        "or .item(), growing buffers, caches keyed by step).", rule)]
    if verdict == "first-step growth":
        return [Finding("info", f"allocated memory grew {g[0] / _MIB:,.1f} MiB between the first two snapshots, then "
                                "stayed flat: state created once (optimizer state, workspaces, caches), not a leak",
                        evidence, "", rule)]
    if verdict == "growth between two snapshots":
        return [Finding("low", f"allocated memory grew {g[0] / _MIB:,.1f} MiB between the two snapshots", evidence,
                        "Two snapshots cannot tell state created once (first step: optimizer state) from a leak: "
                        "take a third snapshot after another step.", rule)]
    if verdict == "no steady growth":
        return [Finding("info", "allocated memory changed between snapshots but did not grow in every interval: "
                                "no steady growth", evidence, "", rule)]
    return []


def _warnings(snaps: list[MemorySnapshot]) -> tuple:
    out = []
    devices = [sorted(set(s.segments["device"])) for s in snaps]
    if any(d != devices[0] for d in devices):
        out.append(f"the snapshots cover different devices ({devices}): compare snapshots of the same process")
    if all(s.blocks["frame"].eq("").all() for s in snaps):
        out.append("no allocation stacks in the snapshots: growing sites are unknown; call "
                   "torch.cuda.memory._record_memory_history() before the steps you snapshot")
    return tuple(out)
