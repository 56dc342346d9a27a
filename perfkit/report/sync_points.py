"""The sync_points investigation as a report shows it: perf-log rows, the verdict and its prose,
the table of sync sites and the section that shows them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.sync_points.result import SOURCE_NOTE, reads_line
from ..results import format_number, html_table, html_text
from ..stats import exact, step_ci
from . import plots
from .prose import finite
from .rows import live_note, finite_rows, row
from .sections import show


def sync_rows(result, trace, subject: str, device: str, *, detected=None, detected_steps: int = 0) -> list[dict]:
    """Sync points per step (host waits on the GPU; on a CPU-only trace the possible ones), host
    time blocked in them per step (ms) and host scalar reads per step (.item()/nonzero that did
    not wait: not sync points) of a ``syncs`` result, CIs over the trace's steps; with a runtime
    ``detect_syncs`` report over ``detected_steps`` steps, its syncs per step (exact: a count of calls).

    The names are new with the GPU-confirmed count (issue 10): the old ``syncs_per_step`` and
    ``blocked_ms_per_step`` counted scalar reads that never waited, so a run judged against them
    would show a drop that is a change of meaning, not of the code."""
    t = result.total
    rows = []
    if t["steps"]:
        base = dict(subject=subject, device=device)
        inside = result.sync_points[result.sync_points["in_steps"]]
        points = _per_step(inside, trace, "blocked_us")
        reads = _per_step(result.host_reads, trace, "blocked_us")
        rows += [row("sync_points", "sync_points_per_step", t["per_step"], "syncs",
                     ci=step_ci(points["count"], np.mean), **base),
                 row("sync_points", "sync_blocked_ms_per_step", t["in_steps"]["blocked_us"] / t["steps"] / 1e3, "ms",
                     ci=step_ci(points["blocked_us"] / 1e3, np.mean), quality=live_note(subject), **base),
                 row("sync_points", "host_scalar_reads_per_step", t["host_scalar_reads"] / t["steps"], "reads",
                     ci=step_ci(reads["count"], np.mean), **base)]
    if detected is not None and detected_steps:
        value = detected.total / detected_steps
        rows.append(row("sync_points", "detected_syncs_per_step", value, "syncs", subject=subject, device=device,
                        ci=exact(value)))
    return finite_rows(rows)


def _per_step(events: pd.DataFrame, trace, column: str) -> pd.DataFrame:
    """count and sum of ``column`` of ``events`` per profiler step of ``trace`` (0 for a step
    without events)."""
    steps = trace.steps["step"].tolist() if len(trace.steps) else []
    if events.empty or "step" not in events:
        return pd.DataFrame({"count": [0] * len(steps), column: [0.0] * len(steps)})
    g = events.groupby("step").agg(count=(column, "size"), total=(column, "sum"))
    g = g.reindex(steps, fill_value=0)
    return pd.DataFrame({"count": g["count"].to_numpy(), column: g["total"].to_numpy(dtype=float)})


def sync_text(result, detected=None, detected_steps: int = 0) -> str:
    """The sync analysis (and runtime detector, if run) read back: the sync points (host waits
    on the GPU) by kind first, host scalar reads that did not wait apart, and what a site's
    source line means."""
    t = result.total
    kinds = ", ".join(f"{r['kind']} x{int(r['count'])}" for r in result.by_kind.to_dict("records")) or "none"
    what = ("possible sync points (CPU-only trace: nothing waited on a GPU; these sync when their tensor is on one)"
            if t["cpu_only"] else "sync points (the host waited on the GPU)")
    text = (f"{t['count']:,} {what} over {t['steps']} step(s), {t['per_step']:.3g} per step, blocking the host "
            f"{t['blocked_us'] / 1e3:,.3f} ms in total. By kind: {kinds}.")
    if t["host_scalar_reads"]:
        text += (f" Apart from them: {t['host_scalar_reads']:,} host scalar reads with no GPU wait "
                 f"({t['host_scalar_read_us'] / 1e3:,.3f} ms host time): .item()/nonzero on CPU tensors, not sync "
                 "points.")
    if result.to_frame()["file"].fillna("").ne("").any():
        text += f" Source lines: {SOURCE_NOTE}."
    if detected is not None:
        per = f" ({detected.total / detected_steps:.3g} per step)" if detected_steps else ""
        text += (f" The runtime detector ({detected.mode}) saw {detected.total} syncing call(s){per} at "
                 f"{len(detected.events)} source line(s).")
    return text


def sync_verdict(result) -> str:
    """A ``syncs`` result as the report's verdict line: sync points and blocked time per step inside
    the profiled steps (possible sync points on a CPU-only trace), how many more ran outside them,
    and the kind and op of the site that blocked longest; host scalar reads are not sync points and
    are not in it."""
    t = result.total
    if not t["count"]:
        return ("no sync points (CPU-only trace, and no scalar reads)" if t["cpu_only"]
                else "no sync points: nothing waited on the GPU")
    what = "possible sync points per step (CPU-only trace)" if t["cpu_only"] else "sync points per step"
    top = result.to_frame().iloc[0]
    worst = top["func"] or top["top_op"] or top["op"] or top["call"]
    outside = t["outside_steps"]["count"]
    apart = f" ({outside:,} more outside the profiled steps)" if outside else ""
    blocked_ms = t["in_steps"]["blocked_us"] / t["steps"] / 1e3
    return (f"{t['per_step']:.3g} {what}, {format_number(blocked_ms, 3)} ms blocked per step{apart}; "
            f"longest: {top['kind']} in {worst}")


def show_sync_sites(result) -> None:
    """The sync points of a ``syncs`` result by kind and by site (user frame, inner frame), then
    the host scalar reads that did not wait, on their own; a sentence where there are none."""
    sites = result.to_frame()
    if sites.empty:
        show("<p>No sync point: nothing in this trace waited on the GPU.</p>")
    else:
        show(html_table(result.by_kind),
              plots.breakdown(sites.assign(site=site_labels(sites)), name="site", value="blocked_us", top=15,
                              title="Sync sites by host time blocked", label_chars=80),
              html_table(sync_site_table(sites)))
    reads = result.host_read_sites()
    if len(reads):
        show(f"<h4>{html_text(reads_line(result.total))}</h4>",
              # their kind says they are reads, not the sync points of the same kind in the tables above
              html_table(sync_site_table(reads.assign(kind=reads["kind"] + " (no GPU wait)"), time_label="host_ms")))


def site_labels(sites: pd.DataFrame) -> list[str]:
    """A short label per row of a sync-site table (``SyncResult.to_frame()``): "kind: func @
    file.py:line" with the user frame (the line where that function starts) and, when the
    innermost frame is elsewhere (library code), "via inner.py:line"; without Python stacks,
    "kind: top_op (via op)" or the runtime call."""
    out = []
    for r in sites.to_dict("records"):
        if _known(r, "file", "line"):
            text = f"{r['kind']}: {r.get('func') or '?'} @ {Path(r['file']).name}:{_line(r, 'line')}"
            if _known(r, "inner_file", "inner_line"):
                text += f" via {Path(r['inner_file']).name}:{_line(r, 'inner_line')}"
        else:
            text = f"{r['kind']}: {_op_path(r) or r.get('call') or '?'}"
        out.append(text)
    return out


def _known(r: dict, file_key: str, line_key: str) -> bool:
    return isinstance(r.get(file_key), str) and r[file_key] != "" and _line(r, line_key) is not None


def _line(r: dict, key: str) -> int | None:
    """A site's line number; None for an unknown one (-1, None or NaN)."""
    value = r.get(key)
    return int(value) if finite(value) and value >= 0 else None


def _frame(r: dict, file_key: str, line_key: str, func_key: str) -> str:
    return f"{r[file_key]}:{_line(r, line_key)} ({r.get(func_key) or '?'})" if _known(r, file_key, line_key) else ""


def _op_path(r: dict) -> str:
    top, op = r.get("top_op") or "", r.get("op") or ""
    return f"{top} (via {op})" if top and op and top != op else top or op


def sync_site_table(sites: pd.DataFrame, *, time_label: str = "blocked_ms") -> pd.DataFrame:
    """A sync-site table (``SyncResult.to_frame()`` or ``host_read_sites()``) as a person reads
    it, numbers first: kind, count, per step, time (ms, column ``time_label``), the user frame
    (file:line where that function starts, and its name), the innermost frame (library code the
    user frame called), the op path and the runtime call that waited. The frame columns are left
    out when no site has one (a trace recorded without Python stacks)."""
    rows = [{"kind": r["kind"], "count": int(r["count"]), "per_step": r["per_step"], time_label: r["blocked_us"] / 1e3,
             "user frame (function start)": _frame(r, "file", "line", "func"),
             "inner frame": _frame(r, "inner_file", "inner_line", "inner_func"),
             "op": _op_path(r), "call": r.get("call") or ""}
            for r in sites.to_dict("records")]
    columns = ["kind", "count", "per_step", time_label, "user frame (function start)", "inner frame", "op", "call"]
    frame = pd.DataFrame(rows, columns=columns)
    empty = [c for c in ("user frame (function start)", "inner frame") if frame[c].eq("").all()]
    return frame.drop(columns=empty)
