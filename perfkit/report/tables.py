"""Small tables the notebooks show: a trace summary as metric/value rows, two traces side by side,
a result's ``summary()`` dict, sync sites as a person reads them, what a ``cpu_bound`` verdict rests
on, torch.compile facts, and where a trace was recorded.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from ..results import format_number
from .prose import ab_word, finite


def pct_text(value) -> str:
    return f"{value:.1%}" if finite(value) else "n/a"



def summary_table(summary: dict) -> pd.DataFrame:
    """A result's ``summary()`` dict as metric/value rows in people's units: a key ending ``_s`` is a
    time shown in ms, one with a ``bytes`` word in B/KiB/MiB/GiB, a bool is yes/no, None or NaN "n/a", other numbers
    to 4 significant digits; the key's unit suffix leaves its name."""
    rows = [{"metric": _metric_name(k), "value": _human(k, v)} for k, v in summary.items()]
    return pd.DataFrame(rows, columns=["metric", "value"])


def ab_summary_table(result) -> pd.DataFrame:
    """``summary_table`` of an A/B result (compile, AMP) with the verdict its card and text state
    (``prose.ab_word``: "inconclusive: ..." when its timing drifted), never the harness's raw word beside it."""
    return summary_table({**result.summary(), "verdict": ab_word(result)})


def _metric_name(key: str) -> str:
    name = key[:-2] if key.endswith("_s") and len(key) > 2 else key
    return name.replace("_", " ")


def _human(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and not finite(value):
        return "n/a"
    if key.endswith("_s") and isinstance(value, (int, float)):
        return f"{format_number(value * 1e3)} ms"
    if "bytes" in key.split("_") and isinstance(value, (int, float)):
        return bytes_text(value)
    return cell_text(value)


def bytes_text(value: float) -> str:
    """A byte count in binary units, as memory sizes are read: "23.54 GiB", "64 KiB", "812 B"."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{format_number(value / size)} {unit}"
    return f"{int(value):,} B"


def machine_table(env) -> pd.DataFrame:
    """``env.to_frame()`` (``perfkit.environment_report()``: section, key, value) with byte counts
    in GiB/MiB/KiB: the row ``ram total_bytes 25276510208`` reads ``ram total 23.54 GiB``."""
    frame = env.to_frame()
    sized = frame["key"].str.endswith("_bytes") & frame["value"].str.fullmatch(r"\d+")
    return frame.assign(key=frame["key"].where(~sized, frame["key"].str.removesuffix("_bytes")),
                        value=frame["value"].where(~sized, [bytes_text(int(v)) if ok else v
                                                            for v, ok in zip(frame["value"], sized)]))



def summary_frame(summary: dict) -> pd.DataFrame:
    """``summarize(trace)`` as metric/value rows: events, steps, median step, kernels, GPU
    busy time, HtoD/DtoH copies, synchronizing runtime calls (``*Synchronize``, ``cudaMemcpy``)
    and, for a torch.compile trace, compile time, compiled regions and Triton kernels (times in
    us unless named, bytes in bytes)."""
    steps, gpu, syncs = summary["steps"], summary["gpu"], summary["syncs"]
    rows = [("events", summary["events"]["total"]), ("steps", steps["count"]),
            ("median_step_us", steps["median_us"]), ("kernels", gpu["kernel_count"]),
            ("kernel_time_us", gpu["kernel_time_us"]), ("gpu_busy_us", gpu["busy_us"])]
    for direction, copies in summary["memcpy"].items():
        rows += [(f"{direction}_copies", copies["count"]), (f"{direction}_bytes", copies["bytes"])]
    rows += [("sync_runtime_calls", syncs["count"]), ("sync_runtime_us", syncs["blocked_us"])]
    compiled = summary.get("compile")
    if compiled:
        rows += [("compile_s", compiled["compile_s"]), ("compiled_regions", compiled["compiled_regions"]),
                 ("triton_kernels", compiled["triton_kernels"])]
    return pd.DataFrame([{"metric": k, "value": cell_text(v)} for k, v in rows], columns=["metric", "value"])


def cell_text(value: Any) -> str:
    if value is None:
        return "n/a"
    return format_number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def recorded_on_table(trace) -> pd.DataFrame:
    """What the trace says about where it was recorded: one row per kind of device of its
    ``deviceProperties`` (name, memory in GiB, compute capability, how many: a node's 8 equal GPUs
    are one row), or one "cpu" row for a trace without GPU events; plus its ranks. Describes the
    traced machine, not the one analyzing it."""
    rows = [{"device": d.get("name") or f"GPU {d.get('id', '?')}",
             "memory_gib": round(d["totalGlobalMem"] / 2**30, 1) if d.get("totalGlobalMem") else None,
             "compute_capability": ".".join(str(d[k]) for k in ("computeMajor", "computeMinor") if k in d) or None}
            for d in trace.devices] if trace.has_gpu_events else [{"device": "cpu (no GPU events in the trace)"}]
    frame = pd.DataFrame(rows)
    if trace.has_gpu_events:
        frame = frame.fillna("n/a").groupby(list(frame.columns), sort=False).size().reset_index(name="count")
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


def with_source(frame: pd.DataFrame, *, file: str = "file", line: str = "line") -> pd.DataFrame:
    """``frame`` (a sync report, scan findings) plus a ``code`` column: the stripped source line
    at ``file``:``line`` of each row ("" where the file cannot be read), so a reader sees the
    offending line without opening the file."""
    import linecache

    out = frame.copy()
    out["code"] = [linecache.getline(str(f), int(n)).strip() if isinstance(n, (int, float)) and n == n and n > 0 else ""
                   for f, n in zip(frame[file], frame[line])]
    return out



def monitor_table(result) -> pd.DataFrame:
    """A ``MonitorResult``'s summary for people: byte metrics (RSS, GPU memory) in MiB, named so
    (``rss (MiB)``), the rest as measured (percent, watts, MHz)."""
    s = result.summary()
    in_bytes = s["metric"].str.endswith("_bytes").to_numpy()
    stats = ["mean", "p50", "p95", "max"]
    s[stats] = s[stats].astype(float)
    s.loc[in_bytes, stats] = s.loc[in_bytes, stats] / 2**20
    s["metric"] = [m.removesuffix("_bytes") + " (MiB)" if b else m for m, b in zip(s["metric"], in_bytes)]
    return s
