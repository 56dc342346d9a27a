"""``ranks(source)``: the cross-rank view of a multi-rank run: per rank and step, step time, GPU
busy, compute vs communication and their overlap, DataLoader and sync time, the time spent
waiting for other ranks in collectives, the stragglers (and what made them late) and the skew of
collective arrival.

Two halves, so an engine can run the first where the files are:

1. ``tables.reduce_file``: one file -> small per-step tables (numbers of ``cpu_bound``);
2. ``combine``: the per-rank tables -> :class:`RanksResult` (``collectives`` for arrival and
   waits, ``stragglers`` for the straggler rule and causes).

Every file is one member, keyed by its position in the source (``file_id``). Files that are not the ranks
of one job (:mod:`perfkit.trace.loader.jobs`: a rank claimed twice, none claimed, another world size, other
times) are refused with the runs they hold, or one run is picked (``run=``). All times in microseconds.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ParameterError
from ...results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from ...text import jsonable
from ...trace import Trace
from ...trace.loader.load import resolve_paths
from ...trace.loader.jobs import one_job
from .bandwidth import bandwidth_findings, bandwidth_table, link_for, size_warnings
from .collectives import LAST_P, arrivals, clock_warning, collective_table, last_arrivals, lateness, step_waits
from .engines import map_paths
from .stragglers import CONSISTENT_PCT, FIXES, MIN_NOISE_STEPS, STRAGGLER_PCT, by_rank, find_stragglers
from .tables import RankTables, reduce_file

STEP_COLUMNS = ["rank", "file", "step", "start_us", "wall_us", "own_us", "wait_us", "late_us", "start_late_us",
                "first_launch_us", "gpu_busy_us", "gpu_busy_pct",
                "compute_us", "comm_us", "overlap_us", "overlap_pct", "dataloader_us", "sync_us", "host_other_us",
                "late_arrivals"]
RANK_COLUMNS = ["rank", "file", "device", "steps", "median_step_us", "median_own_us", "wall_us", "wait_us",
                "gpu_busy_us", "gpu_busy_pct", "compute_us", "comm_us", "overlap_us", "overlap_pct", "dataloader_us",
                "sync_us", "host_other_us", "late_arrivals"]
_SUMMED = ["wall_us", "wait_us", "gpu_busy_us", "compute_us", "comm_us", "overlap_us", "dataloader_us", "sync_us",
           "host_other_us", "late_arrivals"]
# Median share of step time the ranks spend waiting for peers in collectives above which the
# skew itself is a finding: a tenth of the step, the same bar as a straggler's excess.
WAIT_SHARE = 0.10


@dataclass(frozen=True, eq=False, repr=False)
class RanksResult:
    """Per rank-file and step (``steps``, ``STEP_COLUMNS``), per rank (``ranks``, ``RANK_COLUMNS``),
    per communication kernel and rank (``arrivals``), per collective (``collectives``), per rank how often it
    arrived last against chance (``last_arrivals``, ``collectives.LAST_COLUMNS`` and ``file``), per collective of
    known size its bytes and bus bandwidth (``bandwidth``, ``bandwidth.BANDWIDTH_COLUMNS``), the
    straggling (rank, step) rows (``stragglers``), the step-to-step noise (us, NaN when unknown),
    devices, findings and warnings. ``to_frame()`` is the per-rank table."""

    steps: pd.DataFrame
    arrivals: pd.DataFrame
    collectives: pd.DataFrame
    last_arrivals: pd.DataFrame
    bandwidth: pd.DataFrame
    stragglers: pd.DataFrame
    noise_us: float
    straggler_pct: float
    devices: dict
    findings: tuple
    warnings: tuple

    @property
    def ranks(self) -> pd.DataFrame:
        """Per rank file: median step and own step time, the step columns summed over its steps,
        and the percentages recomputed from the sums (GPU busy of wall, overlap of comm)."""
        grouped = self.steps.groupby("file", sort=False)
        table = grouped[_SUMMED].sum()
        table["rank"] = grouped["rank"].first()
        table["steps"] = grouped.size()
        table["median_step_us"] = grouped["wall_us"].median()
        table["median_own_us"] = grouped["own_us"].median()
        table = table.reset_index()
        table["device"] = table["file"].map(self.devices)
        _add_ratios(table)
        return table[RANK_COLUMNS]

    @property
    def straggling_ranks(self) -> pd.DataFrame:
        """One row per straggling rank file (see ``stragglers.by_rank``)."""
        return by_rank(self.stragglers, self.steps.groupby("file").size())

    def to_frame(self) -> pd.DataFrame:
        return self.ranks

    def to_json(self) -> dict:
        """``{ranks, stragglers: [{rank, file, step, excess_pct, cause, ...}], steps, collectives,
        bandwidth, noise_us, straggler_pct, last_arrivals, findings, warnings}`` (JSON-ready)."""
        return jsonable({
            "ranks": self.ranks.to_dict("records"), "stragglers": self.stragglers.to_dict("records"),
            "steps": self.steps.to_dict("records"), "collectives": self.collectives.to_dict("records"),
            "bandwidth": self.bandwidth.to_dict("records"), "noise_us": self.noise_us, "straggler_pct": 100.0 * self.straggler_pct,
            "last_arrivals": self.last_arrivals.drop(columns="file_id").to_dict("records"),
            "findings": [dict(f.__dict__) for f in self.findings], "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        names = ", ".join(f"rank {r['rank']} +{r['excess_pct']:.0f}%" for r in self.straggling_ranks.to_dict("records"))
        return (f"<RanksResult {self.steps['file'].nunique()} ranks, {self.steps['step'].nunique()} steps, "
                f"stragglers: {names or 'none'}, {len(self.findings)} findings, {len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        return html_section(f"Ranks: {self.steps['file'].nunique()} files",
                            html_table(findings_frame(self.findings)), html_table(self.ranks, max_rows=64),
                            html_text("Stragglers (rank, step)"), html_table(self.stragglers),
                            html_text("Collectives by arrival skew"),
                            html_table(self.collectives.sort_values("skew_us", ascending=False)),
                            html_text("Collectives by bytes: bus bandwidth over the transfer"),
                            html_table(self.bandwidth.sort_values("bytes", ascending=False), max_rows=32),
                            html_warnings(self.warnings))


def ranks(source, *, engine: str = "local", scheduler: str | None = None, workers: int | None = None,
          use_cache: bool = True, progress: bool = False, straggler_pct: float = STRAGGLER_PCT,
          run: int | None = None) -> RanksResult:
    """Cross-rank analysis of a directory of per-rank traces or a list of trace files.

    Each file is loaded and reduced by ``engine`` (see ``perfkit.analysis.ranks.engines``): "local"
    (``workers`` processes, default one per core; 1 = in this process) or "dask" (``scheduler``
    address, default ``$DASK_SCHEDULER_ADDRESS``); both give the same result. ``straggler_pct``:
    excess over the median rank's own step time (fraction) from which a rank is a straggler.
    Files that are not the ranks of one job are refused with the runs they hold, as ``load_trace`` does;
    ``run`` (1 = the newest) picks one (:mod:`perfkit.trace.loader.jobs`).
    Raises TraceError for unreadable files and files of several runs, ParameterError for a loaded Trace
    (pass its paths), a ``run`` that is not one of them or bad engine settings, MissingDependencyError when
    the dask engine lacks Dask.
    """
    if isinstance(source, Trace):
        raise ParameterError("ranks() loads each rank where its engine runs: pass the directory or the list of "
                             "files, e.g. perfkit.ranks([f.path for f in trace.files])")
    if not 0 < straggler_pct < 10:
        raise ParameterError(f"straggler_pct is a fraction of the median step (0.10 = 10%), got {straggler_pct!r}")
    paths = [str(p) for p in resolve_paths(source)]
    repeated = sorted({p for p in paths if paths.count(p) > 1})
    if repeated:
        raise ParameterError(f"{repeated[0]} is listed more than once: give each rank's file once")
    tables = map_paths(reduce_file, paths, engine=engine, scheduler=scheduler, workers=workers,
                       progress=progress, use_cache=use_cache)
    keep, notes = one_job(source, [t.facts for t in tables], run)
    result = combine([tables[i] for i in keep], straggler_pct=straggler_pct)
    return replace(result, warnings=(*notes, *result.warnings)) if notes else result


def combine(tables: list[RankTables], *, straggler_pct: float = STRAGGLER_PCT) -> RanksResult:
    """The per-rank tables of every file (in source order) -> :class:`RanksResult`."""
    ids, warnings = _identify(tables)
    kernels = pd.concat([t.collectives.assign(file_id=i, rank=ids[i]) for i, t in enumerate(tables)],
                        ignore_index=True)
    arrived, match_warnings = arrivals(kernels)
    collectives = collective_table(arrived)
    steps = _step_rows(tables, ids, arrived)
    last = last_arrivals(arrived).assign(file=lambda t: [tables[int(i)].path for i in t["file_id"]])
    stragglers, noise = find_stragglers(steps, straggler_pct=straggler_pct,
                                        consistent=frozenset(last.loc[last["consistent"].astype(bool), "file_id"]))
    result = dict(steps=steps[STEP_COLUMNS], arrivals=arrived, collectives=collectives, last_arrivals=last,
                  bandwidth=bandwidth_table(kernels, arrived, nodes_of(tables)), stragglers=stragglers,
                  noise_us=noise, straggler_pct=float(straggler_pct), devices={t.path: t.device for t in tables})
    warnings += match_warnings + size_warnings(kernels) + clock_warning(collectives) + _quality_warnings(steps, noise, straggler_pct)
    return RanksResult(findings=rank_findings(_findings(result)), warnings=tuple(warnings), **result)


def nodes_of(tables: list[RankTables]) -> tuple:
    """(ranks per node, world size) as the traces tell, each None where they disagree or do not say: ranks per
    node is the GPUs each process sees (``RankTables.gpus``) when every trace lists the same number, two or more."""
    gpus = {t.gpus for t in tables}
    worlds = {t.world_size for t in tables} - {None}
    return (gpus.pop() if len(gpus) == 1 and min(gpus) >= 2 else None), (worlds.pop() if len(worlds) == 1 else None)


def _identify(tables: list[RankTables]) -> tuple[list[int], list[str]]:
    """Rank of each file (claimed, else its position: a lone file that claims none) and the loads' warnings.
    ``ranks`` has refused files that are not one job's ranks (:mod:`perfkit.trace.loader.jobs`)."""
    ids = [t.claimed_rank if t.claimed_rank is not None else i for i, t in enumerate(tables)]
    return ids, [f"{Path(t.path).name}: {w}" for t in tables for w in t.warnings]


def _step_rows(tables: list[RankTables], ids: list[int], arrived: pd.DataFrame) -> pd.DataFrame:
    steps = pd.concat([t.steps.assign(file_id=i, rank=ids[i], file=t.path) for i, t in enumerate(tables)],
                      ignore_index=True)
    per_step = arrived.groupby(["file_id", "step"]).agg(late_arrivals=("last", "sum"))
    keyed = per_step.reindex(pd.MultiIndex.from_frame(steps[["file_id", "step"]]), fill_value=0)
    steps["wait_us"] = step_waits(arrived).reindex(pd.MultiIndex.from_frame(steps[["file_id", "step"]]),
                                                   fill_value=0.0).to_numpy(dtype=np.float64)
    steps["late_arrivals"] = keyed["late_arrivals"].to_numpy(dtype=np.int64)
    steps["own_us"] = steps["wall_us"] - steps["wait_us"]
    steps["late_us"] = lateness(arrived).reindex(pd.MultiIndex.from_frame(steps[["file_id", "step"]])).to_numpy()
    steps["start_late_us"] = steps["start_us"] - steps.groupby("step")["start_us"].transform("median")
    _add_ratios(steps)
    return steps


def _add_ratios(frame: pd.DataFrame) -> None:
    frame["gpu_busy_pct"] = (100.0 * frame["gpu_busy_us"] / frame["wall_us"].where(frame["wall_us"] > 0)).fillna(0.0)
    frame["overlap_pct"] = 100.0 * frame["overlap_us"] / frame["comm_us"].where(frame["comm_us"] > 0)


def _quality_warnings(steps: pd.DataFrame, noise: float, straggler_pct: float) -> list[str]:
    out = []
    if steps["file"].nunique() < 2:
        out.append("one rank file: nothing to compare across ranks; point at the directory of every rank's trace")
    elif not np.isfinite(noise):
        fewest = int(steps.groupby("file").size().min())
        out.append(f"{fewest} step(s) per rank: the step-to-step noise is unknown, so stragglers are named on the "
                   f"{straggler_pct:.0%} rule alone; profile at least {MIN_NOISE_STEPS} steps "
                   "(torch.profiler.schedule(active=5)) to tell a persistent straggler from a noisy step")
    if steps["comm_us"].sum() == 0 and steps["file"].nunique() > 1:
        out.append("no NCCL/RCCL kernels: arrival skew and peer waits are unknown, so own step time = step time; "
                   "profile with ProfilerActivity.CUDA on every rank")
    return out


def _findings(r: dict) -> list[Finding]:
    steps, stragglers, last = r["steps"], r["stragglers"], r["last_arrivals"]
    per_rank = by_rank(stragglers, steps.groupby("file").size())
    lasts = {f: row for f, row in zip(last["file"], last.to_dict("records"))}
    out = [_straggler_finding(row, r["noise_us"], r["straggler_pct"], lasts.get(row["file"]))
           for row in per_rank.to_dict("records")]
    out += _wait_finding(steps, r["collectives"], bool(len(stragglers)), last)
    return out + bandwidth_findings(r["bandwidth"], link_for(r["devices"].values()))


_CAUSE_TEXT = {"first launch": "its first kernel launch of the step takes longer (a one-off cost on first use)",
               "late start": "it starts its steps late (it runs them no slower)", "input": "it runs longer: its DataLoader",
               "host": "it runs longer: its host ops", "sync": "it runs longer: its host-device syncs",
               "compute": "it runs longer: its GPU compute",
               "comm wait": "it runs longer: its collectives (beyond waiting for peers)",
               "unattributed": "it runs longer, in no measured part (untraced work)"}


def _straggler_finding(s: dict, noise: float, pct: float, last: dict | None) -> Finding:
    extra = f" (+{s['cause_us'] / 1e3:.2f} ms/step)" if np.isfinite(s["cause_us"]) else ""
    order = f"; last at {int(last['last'])} of {int(last['collectives'])} collectives" if last and last["last"] else ""
    severity = _severity(s["steps"], s["of_steps"], noise)
    return Finding(severity, f"rank {s['rank']} reaches the collectives {s['excess_us'] / 1e3:,.2f} ms after the median "
                   f"rank ({s['excess_pct']:.0f}% of a step) in {s['steps']} of {s['of_steps']} step(s){order}: "
                   f"{_CAUSE_TEXT[s['cause']]}{extra}",
                   {"rank": s["rank"], "file": Path(s["file"]).name, "excess_us": s["excess_us"],
                    "excess_pct": s["excess_pct"], "cause": s["cause"], "noise_us": noise,
                    **({"last_at": int(last["last"]), "collectives": int(last["collectives"]),
                        "last_p_value": float(last["p_value"])} if last else {})},
                   FIXES[s["cause"]], f"arrival at the collectives >= {pct:.0%} of the median step after the median "
                   f"rank's, or >= {CONSISTENT_PCT:.0%} for a rank last more often than chance (binomial p < {LAST_P}), "
                   "(own step time where no collective matches) and > 2x step-to-step noise (perfkit rule, see "
                   "stragglers.py)")


def _severity(flagged: int, of_steps: int, noise: float) -> str:
    """high: late in at least 3 steps and half of them; medium: fewer; low: the noise is unknown."""
    if not np.isfinite(noise):
        return "low"
    return "high" if flagged >= max(MIN_NOISE_STEPS, of_steps / 2) else "medium"


def _wait_finding(steps: pd.DataFrame, collectives: pd.DataFrame, named: bool, last: pd.DataFrame) -> list[Finding]:
    wall = steps.groupby("file")["wall_us"].sum()
    share = float((steps.groupby("file")["wait_us"].sum() / wall.where(wall > 0)).median())
    if not np.isfinite(share) or share < WAIT_SHARE or collectives.empty:
        return []
    worst_at = collectives["skew_us"].idxmax()
    worst = collectives.loc[worst_at]
    most = last.sort_values(["last", "rank"], ascending=[False, True]).iloc[0]
    consistent = last[last["consistent"].astype(bool)]
    if named:
        fix = "Fix the stragglers above: the others wait for them."
    elif len(consistent):
        c = consistent.sort_values("p_value").iloc[0]
        fix = (f"Rank {int(c['rank'])} arrives last at {int(c['last'])} of {int(c['collectives'])} collectives, more "
               f"often than chance, but under {CONSISTENT_PCT:.0%} of a step behind the median rank: look at what it "
               "does before each collective that the others do not.")
    else:
        fix = (f"No rank arrives last more often than chance (rank {int(most['rank'])} most often, {int(most['last'])} "
               f"of {int(most['collectives'])}), so the skew moves between ranks or was carried in: look for "
               "rank-specific pauses (checkpointing, logging, garbage collection) before the collectives.")
    if worst_at == collectives.index[collectives["step"] == worst["step"]][0]:
        fix += (" The largest skew is at its step's first collective: it was carried in from before the step (the "
                "previous step, or the profiler starting at a different time on each rank); profile more steps.")
    return [Finding("medium", f"ranks spend {share:.0%} of their step waiting for peers in collectives; "
                    f"largest arrival skew {worst['skew_us'] / 1e3:.2f} ms (step {worst['step']}, rank "
                    f"{worst['last_rank']} last)",
                    {"median_wait_share": share, "max_skew_us": float(worst["skew_us"]),
                     "most_often_last": int(most["rank"]), "last_at": int(most["last"]),
                     "collectives": int(len(collectives))}, fix,
                    f">= {WAIT_SHARE:.0%} of step time waiting in collectives (perfkit rule)")]
