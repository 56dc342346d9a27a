"""The ranks investigation as a report shows it: perf-log rows (median rank, straggler), the prose,
the table of rank files and the devices they were recorded on."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.ranks.bandwidth import NO_SIZES
from ..results import html_table
from ..stats import exact, step_ci
from .rows import finite_rows, mean_row, row
from .tables import in_ms


def ranks_recorded_on(result) -> str:
    """The device a ``ranks`` result's traces were recorded on: the GPU name the rank files share
    ("cpu" without GPU events), or the names joined by " / " when they differ."""
    names = list(dict.fromkeys(d or "cpu" for d in result.devices.values()))
    return " / ".join(names) if names else "cpu"


def ranks_rows(result, subject: str) -> list[dict]:
    """Perf-log rows of a ``ranks`` result (investigation "ranks"), device the ranks' GPU:

    * ``median_step_ms``: median over steps of the median rank's step time, CI over steps;
    * ``peer_wait_ms_per_step``: time the median rank's collectives waited for peers per step
      (mean over steps), CI over steps;
    * ``straggler_excess_pct``: the worst straggling rank's median excess over the median rank's
      own step time (0 with none), CI over its flagged steps;
    * ``straggling_ranks``: how many rank files straggle in at least one step (exact);
    * ``comm_overlap_pct`` (with NCCL/RCCL kernels): communication time hidden under compute,
      % of communication time, CI over steps; higher is better."""
    steps = result.steps
    if steps.empty:
        return []

    base = dict(subject=subject, device=ranks_recorded_on(result))
    by_step = steps.groupby("step")
    wall, wait = median_rank(result, "wall_us") / 1e3, median_rank(result, "wait_us") / 1e3
    rows = [row("ranks", "median_step_ms", float(wall.median()), "ms", ci=step_ci(wall), **base),
            mean_row("ranks", "peer_wait_ms_per_step", wait, **base), _straggler_row(result, base),
            row("ranks", "straggling_ranks", float(len(result.straggling_ranks)), "ranks",
                ci=exact(len(result.straggling_ranks)), **base)]
    comm = by_step["comm_us"].sum()
    if comm.sum() > 0:
        share = 100.0 * by_step["overlap_us"].sum() / comm.where(comm > 0)
        overlap = 100.0 * float(steps["overlap_us"].sum() / steps["comm_us"].sum())
        rows.append(row("ranks", "comm_overlap_pct", overlap, "%", ci=step_ci(share.dropna(), np.mean),
                        higher_is_better=True, **base))
    return finite_rows(rows)


def median_rank(result, column: str) -> pd.Series:
    """``column`` of a ``ranks`` result's median rank, per step: the median over rank files."""
    return result.steps.groupby("step")[column].median()


def _straggler_row(result, base: dict) -> dict:
    worst = result.straggling_ranks.sort_values("excess_pct", ascending=False).head(1)
    if worst.empty:
        return row("ranks", "straggler_excess_pct", 0.0, "%", ci=exact(0.0), **base)
    flagged = result.stragglers[result.stragglers["file"] == worst["file"].iloc[0]]["excess_pct"]
    return row("ranks", "straggler_excess_pct", float(worst["excess_pct"].iloc[0]), "%", ci=step_ci(flagged),
               **base)


def ranks_text(result) -> str:
    """A ``ranks`` result read back in one paragraph: ranks and steps, the median step, time
    waiting for peers, comm/compute overlap, the largest arrival skew and the stragglers."""
    table = result.ranks
    if table.empty:
        return "These traces have no profiler steps, so no rank could be compared."
    step, wait = median_rank(result, "wall_us").median() / 1e3, median_rank(result, "wait_us").mean() / 1e3
    text = (f"{len(table)} rank file(s), {result.steps['step'].nunique()} profiled step(s). The median rank's step "
            f"takes {step:,.2f} ms (median over steps), of which it waits {wait:,.2f} ms for peers in collectives "
            "(mean per step).")
    comm = float(table["comm_us"].sum())
    if comm > 0:
        worst = result.collectives.loc[result.collectives["skew_us"].idxmax()] if len(result.collectives) else None
        text += f" {100 * float(table['overlap_us'].sum()) / comm:.0f}% of communication time runs under compute."
        if worst is not None:
            text += (f" The largest arrival skew is {worst['skew_us'] / 1e3:,.2f} ms (step {worst['step']}, "
                     f"rank {worst['last_rank']} last).")
    text += _bandwidth_sentence(result.bandwidth)
    late = result.straggling_ranks
    names = "; ".join(f"rank {r['rank']} (+{r['excess_pct']:.0f}% in {r['steps']} of {r['of_steps']} steps, "
                      f"cause: {r['cause']})" for r in late.to_dict("records"))
    return text + (f" Stragglers: {names}." if names else " No rank is a straggler by the rule below.")


def _bandwidth_sentence(table: pd.DataFrame) -> str:
    """The largest collective's bus bandwidth, and whether it is a floor (one rank's kernel holds its wait)."""
    if table.empty:
        return ""
    big = table.loc[table["bytes"].idxmax()]
    floor = big["measured"] != "transfer (last arrival to end)"
    article = "an" if big["collective"][0] in "aeiou" else "a"
    where = f" {big['scope']}" if big["scope"] else ""
    return (f" The largest collective, {article}{where} {big['collective']} of {big['bytes'] / 1e6:,.1f} MB ({big['dtype']}, "
            f"{big['group_size']:.0f} ranks), moves at {big['busbw_gbs']:,.1f} GB/s bus bandwidth over "
            f"{big['transfer_us'] / 1e3:,.2f} ms" + (" (one rank's kernel, which includes its wait for the others: "
                                                      "a floor)." if floor else ", from the last rank's arrival."))


def per_rank_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A ``RanksResult.ranks`` table as its section's prose says it, mean per step: each time summed over a rank's
    steps divided by its ``steps`` and named "... (ms/step)" (beside the median step and own time), late arrivals
    as the count of steps; then :func:`rank_files_table`'s cleaning."""
    summed = [c for c in frame.columns if c.endswith("_us") and not c.startswith("median_")]
    steps = frame["steps"].where(frame["steps"] > 0)
    out = frame.assign(**{c: frame[c] / steps for c in summed})
    out = rank_files_table(out.rename(columns={c: f"{c.removesuffix('_us')}/step_us" for c in summed}))
    out = out.rename(columns=lambda c: c.replace("/step (ms)", " (ms/step)"))
    return out.rename(columns={"late_arrivals": "steps last at a collective"})


def rank_files_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A ``ranks`` table (per rank or per step) as shown: the ``file`` column as the file's name
    (a report must not carry local paths), times in ms (``in_ms``), no ``device`` column when
    every rank has the same device (the report's card names it), ``start_late`` not below 0 (a rank that
    started its step before the median rank is not late), and no column that is zero in every
    row (no overlap, no late arrivals: the prose says so), so the table fits the page."""
    out = in_ms(frame)
    if "start_late (ms)" in out:  # a rank that started before the median rank is not late: 0, not -0.004 ms
        out["start_late (ms)"] = out["start_late (ms)"].clip(lower=0.0)
    if "file" in out:
        out["file"] = [Path(str(f)).name for f in out["file"]]
    if "device" in out and out["device"].nunique() <= 1:
        out = out.drop(columns="device")
    numeric = out.select_dtypes("number").columns.difference(["rank", "step", "steps"])
    empty = [c for c in numeric if len(out) and (out[c].fillna(0) == 0).all()]
    return out.drop(columns=empty)


def bandwidth_html(result, top: int) -> str:
    """The "Bandwidth of each collective" table (largest first), or the sentence saying why it is empty: no
    collective in the traces, or none that records its message size (``bandwidth.NO_SIZES``)."""
    why = NO_SIZES if len(result.collectives) else "no collective kernels in these traces: there is no bandwidth to read"
    return html_table(rank_files_table(result.bandwidth.sort_values("bytes", ascending=False).head(top)),
                      empty=why[0].upper() + why[1:])
