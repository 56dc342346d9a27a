"""Small tables the notebooks show: a trace summary as metric/value rows, two traces side by side,
a result's ``summary()`` dict, labels for sync sites, and where a trace was recorded.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ..results import format_number


def site_labels(sites: pd.DataFrame) -> list[str]:
    """"op @ file:line" per row of a site table (kind and op when there is no source line)."""
    out = []
    for r in sites.to_dict("records"):
        known = r.get("file") not in (None, "") and r.get("line", -1) not in (None, -1)
        where = f"{Path(str(r['file'])).name}:{r['line']}" if known else ""
        out.append(f"{r['kind']}: {r['op']} @ {where}" if where else f"{r['kind']}: {r['op']}")
    return out


def summary_table(summary: dict) -> pd.DataFrame:
    """A result's ``summary()`` dict as metric/value rows (numbers to 4 significant digits)."""
    return pd.DataFrame([{"metric": k, "value": _cell(v)} for k, v in summary.items()], columns=["metric", "value"])


def summary_pair(before, after) -> pd.DataFrame:
    """``summary_frame`` of two traces side by side: metric, before, after."""
    a, b = summary_frame(_summarize(before)), summary_frame(_summarize(after))
    return pd.DataFrame({"metric": a["metric"], "before": a["value"], "after": b["value"]})


def _summarize(trace) -> dict:
    from ..analysis.summary import summarize

    return summarize(trace)


def summary_frame(summary: dict) -> pd.DataFrame:
    """``summarize(trace)`` as metric/value rows: events, steps, median step, kernels, GPU
    busy time, HtoD/DtoH copies and syncs (times in us, bytes in bytes)."""
    steps, gpu, syncs = summary["steps"], summary["gpu"], summary["syncs"]
    rows = [("events", summary["events"]["total"]), ("steps", steps["count"]),
            ("median_step_us", steps["median_us"]), ("kernels", gpu["kernel_count"]),
            ("kernel_time_us", gpu["kernel_time_us"]), ("gpu_busy_us", gpu["busy_us"])]
    for direction, copies in summary["memcpy"].items():
        rows += [(f"{direction}_copies", copies["count"]), (f"{direction}_bytes", copies["bytes"])]
    rows += [("sync_calls", syncs["count"]), ("sync_blocked_us", syncs["blocked_us"])]
    return pd.DataFrame([{"metric": k, "value": _cell(v)} for k, v in rows], columns=["metric", "value"])


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    return format_number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def recorded_on_table(trace) -> pd.DataFrame:
    """What the trace says about where it was recorded: one row per device of its
    ``deviceProperties`` (name, memory in GiB, compute capability), or one "cpu" row for a trace
    without GPU events; plus its ranks. Describes the traced machine, not the one analyzing it."""
    rows = [{"device": d.get("name") or f"GPU {d.get('id', '?')}",
             "memory_gib": round(d["totalGlobalMem"] / 2**30, 1) if d.get("totalGlobalMem") else None,
             "compute_capability": ".".join(str(d[k]) for k in ("computeMajor", "computeMinor") if k in d) or None}
            for d in trace.devices] if trace.has_gpu_events else [{"device": "cpu (no GPU events in the trace)"}]
    frame = pd.DataFrame(rows)
    frame["ranks"] = ", ".join(str(r) for r in trace.ranks)
    return frame


def in_ms(frame: pd.DataFrame, *, keep: tuple = ("start_us", "end_us")) -> pd.DataFrame:
    """``frame`` with each ``*_us`` column (but ``keep``: timestamps) in milliseconds, rounded to
    the microsecond and renamed ``* (ms)``; other columns as they are."""
    out = frame.copy()
    for col in [c for c in frame.columns if c.endswith("_us") and c not in keep]:
        out[col] = (pd.to_numeric(frame[col], errors="coerce") / 1e3).round(3) + 0.0  # no "-0"
        out = out.rename(columns={col: f"{col.removesuffix('_us')} (ms)"})
    return out


def rank_files_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A ``ranks`` table (per rank or per step) as shown: the ``file`` column as the file's name
    (a report must not carry local paths), times in ms (``in_ms``), and no ``device`` column when
    every rank has the same device (the report's card names it)."""
    out = in_ms(frame)
    if "file" in out:
        out["file"] = [Path(str(f)).name for f in out["file"]]
    if "device" in out and out["device"].nunique() <= 1:
        out = out.drop(columns="device")
    return out
