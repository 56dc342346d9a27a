"""Small tables the notebooks show: a trace summary as metric/value rows, two traces side by side,
a result's ``summary()`` dict, sync sites as a person reads them, what a ``cpu_bound`` verdict rests
on, torch.compile facts, and where a trace was recorded.
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any

import pandas as pd

from ..results import format_number


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
    return int(value) if _finite(value) and value >= 0 else None


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


def cpu_bound_evidence(result) -> pd.DataFrame:
    """What a ``cpu_bound`` verdict rests on: one row per rule of ``cpu_bound_rules.decide``, in
    the order it applies them: the evidence (a share of the step's wall time, "n/a" where the
    trace cannot tell), the rule's threshold, the verdict it gives, and which row decided."""
    from ..analysis.step.rules import COMM_SHARE, HOST_AHEAD_MIN_US, LAUNCH_MIN_PER_STEP, WARMUP_SHARE

    e = result.evidence
    t = {k.removeprefix("threshold_"): v for k, v in e.items() if k.startswith("threshold_")}
    delay = f" (median {e['queue_delay_us'] / 1e3:,.3g} ms)" if _finite(e["queue_delay_us"]) else ""
    gpu = "GPU events recorded" if result.has_gpu else f"no GPU events, {int(e['launches'])} launches in steps"
    issuing = (f"{_pct(e['issuing_idle_share'])} ({e['launches_per_step']:,.0f} launches per step; the host's own "
               f"work {_pct(e['own_work_idle_share'])}, untraced {_pct(e['untraced_share'])})")
    rows = [("GPU activity", gpu, "launches but no GPU events", "GPU activity not recorded"),
            ("warm-up calls", _pct(e["warmup_share"]), f">= {WARMUP_SHARE:.0%} of the step", "warm-up"),
            ("compile spans", _pct(e["compile_share"]), f">= {t['compile_share']:.0%} and the largest cause",
             "compiling"),
            ("GPU busy", _pct(e["gpu_busy_share"]), f">= {t['gpu_bound_busy']:.0%}", "GPU-bound"),
            ("collectives not under compute", _pct(e["comm_exposed_share"]),
             f"GPU-bound and >= {COMM_SHARE:.0%} of GPU busy", "communication-bound"),
            ("DataLoader", _pct(e["dataloader_share"]), f">= {t['input_share']:.0%} and >= syncs", "input-bound"),
            ("GPU activity", gpu, "no GPU events and no kernel launches", "CPU-only trace"),
            (f"launch-to-kernel delay{delay}", _pct(e["queue_delay_share"]),
             f">= {t['host_ahead_share']:.0%} and >= {HOST_AHEAD_MIN_US:g} us", "GPU-bound (host ahead)"),
            ("blocking syncs", _pct(e["sync_share"]), f">= {t['sync_share']:.0%}", "sync-bound"),
            ("host issuing GPU work while the GPU idles", issuing,
             f">= {LAUNCH_MIN_PER_STEP} launches per step and >= the host's own work", "launch-bound"),
            ("host working on its own while the GPU idles", _pct(e["own_work_idle_share"]),
             "GPU idle, no rule above met", "host-compute-bound")]
    return pd.DataFrame([{"evidence": name, "share of step": value, "rule": rule, "gives": verdict,
                          "decided": "yes" if verdict == result.verdict else ""}
                         for name, value, rule, verdict in rows])


def compile_table(facts: dict) -> pd.DataFrame:
    """``result.compile`` / ``summarize(trace)["compile"]`` as metric/value rows a person reads."""
    share = facts.get("triton_time_share")
    rows = [("compile time (s; union of Dynamo/Inductor/Triton compile spans)", _cell(facts["compile_s"])),
            ("compiled regions (distinct Torch-Compiled Region N/M)", _cell(facts["compiled_regions"])),
            ("kernels", _cell(facts["kernels"])), ("Triton kernels (triton_*)", _cell(facts["triton_kernels"])),
            ("Triton share of kernel time", "n/a" if share is None else f"{share:.1%}")]
    return pd.DataFrame(rows, columns=["metric", "value"])


def _pct(value) -> str:
    return f"{value:.1%}" if _finite(value) else "n/a"


def _finite(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def summary_table(summary: dict) -> pd.DataFrame:
    """A result's ``summary()`` dict as metric/value rows in people's units: a key ending ``_s`` is a
    time shown in ms, one with a ``bytes`` word in B/KiB/MiB/GiB, a bool is yes/no, None or NaN "n/a", other numbers
    to 4 significant digits; the key's unit suffix leaves its name."""
    rows = [{"metric": _metric_name(k), "value": _human(k, v)} for k, v in summary.items()]
    return pd.DataFrame(rows, columns=["metric", "value"])


def _metric_name(key: str) -> str:
    name = key[:-2] if key.endswith("_s") and len(key) > 2 else key
    return name.replace("_", " ")


def _human(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and not _finite(value):
        return "n/a"
    if key.endswith("_s") and isinstance(value, (int, float)):
        return f"{format_number(value * 1e3)} ms"
    if "bytes" in key.split("_") and isinstance(value, (int, float)):
        for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
            if abs(value) >= size:
                return f"{format_number(value / size)} {unit}"
        return f"{int(value):,} B"
    return _cell(value)


def summary_pair(before, after) -> pd.DataFrame:
    """``summary_frame`` of two traces side by side: metric, before, after."""
    a, b = summary_frame(_summarize(before)), summary_frame(_summarize(after))
    # Matched by name: a compiled trace has rows the other may lack ("n/a" on that side).
    order = list(dict.fromkeys([*a["metric"], *b["metric"]]))
    pair = pd.DataFrame({"before": a.set_index("metric")["value"], "after": b.set_index("metric")["value"]})
    return pair.reindex(order).fillna("n/a").rename_axis("metric").reset_index()


def _summarize(trace) -> dict:
    from ..analysis.summary import summarize

    return summarize(trace)


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
    return pd.DataFrame([{"metric": k, "value": _cell(v)} for k, v in rows], columns=["metric", "value"])


def _cell(value: Any) -> str:
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


def rank_files_table(frame: pd.DataFrame) -> pd.DataFrame:
    """A ``ranks`` table (per rank or per step) as shown: the ``file`` column as the file's name
    (a report must not carry local paths), times in ms (``in_ms``), no ``device`` column when
    every rank has the same device (the report's card names it), and no column that is zero in every
    row (no overlap, no late arrivals: the prose says so), so the table fits the page."""
    out = in_ms(frame)
    if "file" in out:
        out["file"] = [Path(str(f)).name for f in out["file"]]
    if "device" in out and out["device"].nunique() <= 1:
        out = out.drop(columns="device")
    numeric = out.select_dtypes("number").columns.difference(["rank", "step", "steps"])
    empty = [c for c in numeric if len(out) and (out[c].fillna(0) == 0).all()]
    return out.drop(columns=empty)


def with_source(frame: pd.DataFrame, *, file: str = "file", line: str = "line") -> pd.DataFrame:
    """``frame`` (a sync report, scan findings) plus a ``code`` column: the stripped source line
    at ``file``:``line`` of each row ("" where the file cannot be read), so a reader sees the
    offending line without opening the file."""
    import linecache

    out = frame.copy()
    out["code"] = [linecache.getline(str(f), int(n)).strip() if isinstance(n, (int, float)) and n == n and n > 0 else ""
                   for f, n in zip(frame[file], frame[line])]
    return out


def compile_sites(result) -> pd.DataFrame:
    """The graph breaks and recompiles of a ``compile_ab`` result with the source each names:
    ``kind``, ``reason`` (dynamo's), ``location`` ("file:line"; a recompile on an input shape has
    none) and ``code`` (that line, as dynamo read it)."""
    rows = [("graph break", b.reason, b.location, b.code) for b in result.graph_breaks]
    rows += [("recompile", r.reason, r.location, r.code) for r in result.recompiles]
    return pd.DataFrame(rows, columns=["kind", "reason", "location", "code"])


# cpu_bound's per-step table as a person reads it: (column of ``to_frame()``, heading, scale).
_STEP_COLUMNS = (("wall_us", "wall (ms)", 1e-3), ("host_busy_us", "host busy (ms)", 1e-3),
                 ("gpu_busy_pct", "GPU busy (%)", 1.0), ("dataloader_us", "DataLoader (ms)", 1e-3),
                 ("compile_us", "compiling (ms)", 1e-3), ("sync_blocked_us", "sync blocked (ms)", 1e-3),
                 ("launches", "launches", 1.0), ("queue_delay_us", "launch queue (ms)", 1e-3))


def cpu_bound_steps(result) -> pd.DataFrame:
    """One row per step of a ``cpu_bound`` result that fits a page: step (rank too when several),
    its verdict, then wall and host time in ms and GPU busy %, and only those of DataLoader,
    compiling, sync and launch columns that are non-zero somewhere; no timestamps, no empty column.
    ``result.to_frame()`` keeps every column."""
    frame = result.to_frame()
    out = pd.DataFrame({"step": frame["step"]})
    if frame["rank"].nunique() > 1:
        out.insert(0, "rank", frame["rank"])
    out["verdict"] = frame["verdict"]
    for column, heading, scale in _STEP_COLUMNS:
        values = pd.to_numeric(frame[column], errors="coerce")
        values = values * scale if scale != 1.0 else values
        if column in ("wall_us", "host_busy_us") or (values.notna().any() and values.fillna(0).ne(0).any()):
            out[heading] = values
    return out
