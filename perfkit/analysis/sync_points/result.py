"""The result of :func:`perfkit.analysis.sync_points.find.syncs`: sync points and host scalar reads, grouped
into sites (kind, op, source line), the findings with their fixes, and the JSON, repr and HTML views."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings
from ...text import jsonable

# Severity of a sync site by its blocked time as a share of step wall time: "high" from 10% (the
# sync-bound threshold of cpu_bound), "medium" from 2%, else "low" (perfkit rule).
HIGH_SHARE, MEDIUM_SHARE = 0.10, 0.02
MAX_SITE_FINDINGS = 5
SOURCE_NOTE = ("file:line is where the enclosing function starts (Kineto records no more; for a function already "
               "running when the profiler started, the line it was on then); your own code is listed first, "
               "syncs inside torch's Python code (via torch/...) after it; "
               "`perfkit detect SCRIPT` reports the exact line of each sync at run time")

FIXES = {
    "stream_sync": "A stream synchronize inside {op}: usually a blocking copy (.to(device) without non_blocking, "
                   ".cpu()); copy non_blocking=True from pinned memory, or move the read out of the step.",
    "device_sync": "torch.cuda.synchronize(): keep it only around timed regions, never inside the training step.",
    "event_sync": "event.synchronize()/elapsed_time() waits for the GPU: read timings every N steps or poll "
                  "event.query().",
    "memcpy_sync": "{call} is a synchronous copy: the host waits for it and for the GPU work queued before it. "
                   "Use tensor.to(device, non_blocking=True) with pinned host memory (tensor.pin_memory()) and "
                   "read device results a step later.",
    "memcpy_dtoh": "A device-to-host copy (.cpu(), .numpy(), .tolist()) waits for the GPU: keep the data on the "
                   "GPU, or copy non_blocking into pinned memory and read it a step later.",
    "memcpy_htod_pageable": "A host-to-device copy from pageable memory ({call}) returns only once the data is "
                            "copied, so the host waits for it: pin the source (tensor.pin_memory(), "
                            "DataLoader(pin_memory=True)) and copy with .to(device, non_blocking=True).",
    "item": ".item() reads a GPU scalar: accumulate on the GPU (total += loss.detach()) and read it every N steps; "
            "replace Python branches on tensors with torch.where.",
    "nonzero": "nonzero()/boolean-mask indexing sizes its output from GPU data: use torch.where or masked "
               "arithmetic, or nonzero_static(size=...).",
    "is_nonzero": "`if tensor:` / bool(tensor) reads a GPU value: use torch.where, or torch._assert_async for checks.",
    "dynamic_shape": "The output size depends on GPU data (masked_select, unique, repeat_interleave): pass "
                     "output_size / fixed sizes, or use masks.",
}
# How to confirm a possible sync point of a CPU-only trace: the same code with its tensors on a GPU.
CONFIRM = ("Confirm it on a GPU: re-profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] and the "
           "tensors on the device (a cudaStreamSynchronize under it is a wait), or run `perfkit detect SCRIPT` there.")
_FRAME_COLUMNS = ["frame", "file", "line", "func", "inner_frame", "inner_file", "inner_line", "inner_func"]
EPISODE_COLUMNS = ["kind", "name", "op", "top_op", "rank", "step", "ts_us", "blocked_us", "gpu_confirmed", "call",
                   *_FRAME_COLUMNS, "running_line", "torch_internal"]
# ``syncs`` adds ``in_steps`` (the entry lies in a full step window) to its events.
SITE_COLUMNS = ["kind", "op", "file", "line", "count", "blocked_us", "per_step", "steps_seen", "gpu_confirmed",
                "top_op", "func", "inner_file", "inner_line", "inner_func", "call", "running_line", "torch_internal"]
_SITE_DTYPES = {"line": np.int64, "inner_line": np.int64, "count": np.int64, "blocked_us": np.float64,
                "per_step": np.float64, "steps_seen": np.int64, "gpu_confirmed": np.int64, "running_line": bool,
                "torch_internal": bool}
_SCALAR_KINDS = ("item", "nonzero", "is_nonzero", "dynamic_shape")


@dataclass(frozen=True, eq=False, repr=False)
class SyncResult:
    """``events``: one row per Python-level call that may sync (``EPISODE_COLUMNS``; times in us),
    ``gpu_confirmed`` where the host waited on the device. ``sync_points``: the rows counted as
    syncs (all of them on a CPU-only trace, ``cpu_only``); ``host_reads``: scalar reads that did
    not wait. ``to_frame()``: sync sites ranked by blocked time. ``gpu_side``: the cuda_sync events,
    not counted in totals."""

    events: pd.DataFrame
    gpu_side: pd.DataFrame
    n_steps: int
    wall_us: float
    findings: tuple
    warnings: tuple
    cpu_only: bool = False

    @property
    def sync_points(self) -> pd.DataFrame:
        return self.events[self.events["gpu_confirmed"] | self.cpu_only]

    @property
    def host_reads(self) -> pd.DataFrame:
        """Scalar reads (aten::item, nonzero, ...) with no device wait under them: not sync points."""
        return self.events[~(self.events["gpu_confirmed"] | self.cpu_only)]

    def to_frame(self) -> pd.DataFrame:
        return site_table(self.sync_points, self.n_steps)

    def host_read_sites(self) -> pd.DataFrame:
        """Host scalar reads grouped like ``to_frame()`` (``blocked_us`` is their host time)."""
        return site_table(self.host_reads, self.n_steps)

    @property
    def by_kind(self) -> pd.DataFrame:
        """count, blocked_us and per_step per kind of sync point, most blocked first; ``per_step`` counts
        the entries inside full steps only, as ``total`` and the site table do (a sync between steps, such as
        a profiler's own at the step boundary, is in ``count`` but happens in no step)."""
        points = self.sync_points.assign(inside_=_inside(self.sync_points))
        g = points.groupby("kind", sort=False).agg(count=("blocked_us", "size"), blocked_us=("blocked_us", "sum"),
                                                   inside_=("inside_", "sum"))
        g["per_step"] = g.pop("inside_") / self.n_steps
        return g.sort_values("blocked_us", ascending=False).reset_index()

    @property
    def total(self) -> dict:
        """Sync points (``count``, ``blocked_us``, ``per_step``, ``gpu_confirmed``), ``steps``, ``wall_us``,
        ``host_scalar_reads`` / ``host_scalar_read_us`` (not in ``count``) and ``cpu_only``."""
        points, reads = self.sync_points, self.host_reads
        inside = _inside(points)
        return {"count": int(len(points)), "blocked_us": float(points["blocked_us"].sum()),
                "per_step": int(inside.sum()) / self.n_steps, "gpu_confirmed": int(points["gpu_confirmed"].sum()),
                "in_steps": {"count": int(inside.sum()), "blocked_us": float(points.loc[inside, "blocked_us"].sum())},
                "outside_steps": {"count": int((~inside).sum()),
                                  "blocked_us": float(points.loc[~inside, "blocked_us"].sum())},
                "steps": self.n_steps, "wall_us": self.wall_us, "host_scalar_reads": int(len(reads)),
                "host_scalar_read_us": float(reads["blocked_us"].sum()), "cpu_only": bool(self.cpu_only)}

    def to_json(self) -> dict:
        """JSON-ready dict: total, by_kind, sites (file/line null without Python stacks),
        host_scalar_reads ({count, host_us, per_step, sites}), gpu_side, findings, warnings, source_lines."""
        t = self.total
        reads = [_site_json(r, time_key="host_us") for r in self.host_read_sites().to_dict("records")]
        return jsonable({
            "total": t,
            "by_kind": {r["kind"]: {"count": int(r["count"]), "blocked_us": float(r["blocked_us"]),
                                    "per_step": float(r["per_step"])} for r in self.by_kind.to_dict("records")},
            "sites": [_site_json(r) for r in self.to_frame().to_dict("records")],
            "host_scalar_reads": {"count": t["host_scalar_reads"], "host_us": t["host_scalar_read_us"],
                                  "per_step": t["host_scalar_reads"] / self.n_steps, "sites": reads},
            "gpu_side": self.gpu_side.to_dict("records"),
            "findings": [dict(f.__dict__) for f in self.findings],
            "warnings": list(self.warnings),
            "source_lines": SOURCE_NOTE,
        })

    def headline(self) -> str:
        """One line: sync points, blocked time, and the host scalar reads kept out of the count."""
        t = self.total
        what = "possible sync points (CPU-only trace)" if t["cpu_only"] else "sync points"
        text = f"{t['count']:,} {what} ({t['per_step']:.3g} per step), {t['blocked_us'] / 1e3:,.3f} ms blocked"
        out = t["outside_steps"]
        if out["count"]:
            text += (f" ({out['count']:,} of them, {out['blocked_us'] / 1e3:,.3f} ms, outside the profiled steps: "
                     "not in the per-step figures)")
        return text + (f"; {reads_line(t)}" if t["host_scalar_reads"] else "")

    def __repr__(self) -> str:
        return (f"<SyncResult {self.headline()}; {len(self.to_frame())} sites, {len(self.warnings)} warnings>")

    def _repr_html_(self) -> str:
        parts = [html_text(f"{self.headline()} over {self.n_steps} steps"), html_table(findings_frame(self.findings)),
                 html_table(self.by_kind), html_table(self.to_frame()), html_text(SOURCE_NOTE)]
        if len(self.host_reads):
            parts += [f"<h5>{html_text(reads_line(self.total))}</h5>", html_table(self.host_read_sites())]
        return html_section("Host-device syncs", *parts, html_table(self.gpu_side), html_warnings(self.warnings))


def reads_line(total: dict) -> str:
    """The host-scalar-reads line of a ``total`` dict."""
    return (f"{total['host_scalar_reads']:,} host scalar reads, no GPU wait ({total['host_scalar_read_us'] / 1e3:,.3f} "
            "ms host time; .item()/nonzero on CPU tensors: not sync points)")


def site_table(events: pd.DataFrame, n_steps: int) -> pd.DataFrame:
    """Entries grouped by (kind, op, file, line, inner file, inner line, torch_internal): count, blocked_us,
    per_step (entries inside full steps over ``n_steps``), steps_seen, gpu_confirmed count, top_op,
    func, inner_func, ``call`` (the runtime call that waited, "" for a read that did not),
    ``running_line`` (the line is the one running when the profiler started) and ``torch_internal``
    (issued by torch's own Python code, :mod:`.sites`). The user's own sites first, then torch's, each
    ranked by blocked time."""
    if events.empty:  # typed columns, so callers can sort and take nlargest of an empty table
        return pd.DataFrame({c: pd.Series(dtype=_SITE_DTYPES.get(c, object)) for c in SITE_COLUMNS})
    keyed = events.assign(**{c: _blank(events[c], "") for c in ("file", "func", "inner_file", "inner_func")},
                          **{c: _blank(events[c], -1) for c in ("line", "inner_line")}, inside_=_inside(events),
                          **{c: events[c] if c in events else False for c in ("running_line", "torch_internal")})
    keys = ["kind", "op", "file", "line", "inner_file", "inner_line", "torch_internal"]
    table = keyed.groupby(keys, sort=False).agg(
        count=("blocked_us", "size"), blocked_us=("blocked_us", "sum"), steps_seen=("step", "nunique"),
        gpu_confirmed=("gpu_confirmed", "sum"), top_op=("top_op", "first"), function=("func", "first"),
        inner_func=("inner_func", "first"), call=("call", "first"), inside_=("inside_", "sum"),
        running_line=("running_line", "all"),
    ).reset_index().rename(columns={"function": "func"})  # agg() reserves the keyword func
    table["per_step"] = table["inside_"] / n_steps
    return table.sort_values(["torch_internal", "blocked_us", "count"], ascending=[True, False, False],
                             ignore_index=True)[SITE_COLUMNS]


def _blank(column: pd.Series, fill):
    if fill == -1:
        return column.astype("Float64").fillna(-1).astype(np.int64)
    return column.astype(object).where(column.notna(), fill)


def _site_json(r: dict, time_key: str = "blocked_us") -> dict:
    return {"kind": r["kind"], "op": r["op"], "file": r["file"] or None,
            "line": int(r["line"]) if r["line"] >= 0 else None, "func": r["func"] or None,
            "inner_file": r["inner_file"] or None,
            "inner_line": int(r["inner_line"]) if r["inner_line"] >= 0 else None,
            "inner_func": r["inner_func"] or None, "call": r["call"],
            "count": int(r["count"]), time_key: float(r["blocked_us"]), "per_step": float(r["per_step"]),
            "gpu_confirmed": int(r["gpu_confirmed"]), "top_op": r["top_op"],
            "running_line": bool(r.get("running_line", False)),
            "torch_internal": bool(r.get("torch_internal", False))}


def _inside(events: pd.DataFrame) -> np.ndarray:
    return events["in_steps"].to_numpy(dtype=bool) if "in_steps" in events else np.ones(len(events), dtype=bool)


def sync_findings(events: pd.DataFrame, n_steps: int, wall_us: float, cpu_only: bool = False) -> tuple[Finding, ...]:
    """Findings for the top ``MAX_SITE_FINDINGS`` sync sites inside the steps, most severe first (the
    user's own sites before torch's within a severity, so a heavy wait inside torch still gets one);
    the entries outside the profiled steps as one note with no in-step fix. On a CPU-only trace
    (``cpu_only``) a scalar read is a possible sync point: its finding ("low": nothing confirmed it)
    says how to confirm it on a GPU, then the fix if it is confirmed; elsewhere an unconfirmed scalar
    read is not a finding."""
    inside = _inside(events)
    sites = site_table(events[inside], n_steps).to_dict("records")
    found = [f for f in (_site_finding(site, wall_us, cpu_only) for site in sites) if f is not None]
    return rank_findings(_outside_finding(events[~inside]) + list(rank_findings(found)[:MAX_SITE_FINDINGS]))


def _site_finding(site: dict, wall_us: float, cpu_only: bool) -> Finding | None:
    share = site["blocked_us"] / wall_us if wall_us > 0 else 0.0
    possible = not site["gpu_confirmed"] and site["kind"] in _SCALAR_KINDS
    if possible and not cpu_only:
        return None
    severity = "low" if possible else "high" if share >= HIGH_SHARE else "medium" if share >= MEDIUM_SHARE else "low"
    fix = FIXES[site["kind"]].format(op=site["op"] or "an op", call=site["call"])
    return Finding(
        severity, f"{'possible ' if possible else ''}{site['kind']} at {where(site)}: {site['count']}x, "
                  f"{site['blocked_us'] / 1e3:.3f} ms {'host time' if possible else 'blocked'}",
        {"count": int(site["count"]), "per_step": site["per_step"], "blocked_us": site["blocked_us"],
         "share_of_step_time": share, "op": site["op"], "top_op": site["top_op"]},
        f"{CONFIRM} If it waits: {fix}" if possible else fix,
        "'low': a CPU-only trace cannot show a GPU wait (perfkit rule)" if possible else
        f"'high' from {HIGH_SHARE:.0%}, 'medium' from {MEDIUM_SHARE:.0%} of step wall time blocked (perfkit rule)")


def _outside_finding(events: pd.DataFrame) -> list:
    if events.empty:
        return []
    top = events.sort_values("blocked_us", ascending=False).iloc[0]
    return [Finding(
        "info", f"{len(events):,} sync point(s) outside the profiled steps, {events['blocked_us'].sum() / 1e3:.3f} ms "
                f"blocked (longest: {top['name']}, {top['blocked_us'] / 1e3:.3f} ms)",
        {"count": int(len(events)), "blocked_us": float(events["blocked_us"].sum())},
        "Nothing to change in the training step: these ran before the first or after the last profiled step (set-up, a "
        "final synchronize before the profiler stops) and are not in any per-step figure.",
        "entries whose step is not a full profiled step (perfkit rule)")]


def where(site: dict) -> str:
    """'function starting at train.py:42 (step), via transformers/x.py:1421 (f)', else the op path."""
    if not site["file"]:
        return _op_path(site["top_op"], site["op"]) or site["call"] or "?"
    text = (f"function running at {site['file']}:{site['line']} when the profiler started ({site['func']})"
            if site.get("running_line") else f"function starting at {site['file']}:{site['line']} ({site['func']})")
    if site.get("inner_file"):
        text += f", via {site['inner_file']}:{site['inner_line']} ({site['inner_func']})"
    return text


def _op_path(top_op, op) -> str:
    """'aten::index (via aten::copy_)': the outermost op the user called, and the op that synced."""
    if top_op and op and top_op != op:
        return f"{top_op} (via {op})"
    return top_op or op or ""
