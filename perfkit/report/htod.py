"""The htod investigation as a report shows it: perf-log rows of the copies and of a copy sweep,
and the prose that reads them back (pageable copies and the syncs they cause)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..results import byte_text
from ..stats import step_ci
from .prose import ms_text
from .rows import finite_rows
from .rows import load_note
from .rows import row
from .rows import trace_ci
from .rows import trace_step_rows
from .tables import bytes_text


def htod_rows(result, trace, subject: str, device: str, sweep=None) -> list[dict]:
    """Median step (ms), HtoD copy time per step (ms) and pageable HtoD copies per step of a
    trace's ``htod`` result (when it has copies); with a GPU ``htod_sweep`` result, the best GB/s
    per mode at the largest size swept, with its CI over the timed copies."""
    rows = trace_step_rows("htod", trace, subject, device)
    frame = result.to_frame()
    h = frame[frame["direction"] == "HtoD"] if len(frame) else frame
    if len(h) and result.n_steps:
        pageable = h.loc[h["memory"] == "pageable", "count"].sum() / result.n_steps
        rows += [row("htod", "htod_ms_per_step", h["time_us"].sum() / result.n_steps / 1e3, "ms", subject=subject,
                     device=device, ci=trace_ci(subject, h["time_us"].sum() / result.n_steps / 1e3)),
                 row("htod", "pageable_htod_per_step", pageable, "copies", subject=subject, device=device,
                     ci=trace_ci(subject, pageable))]
    if sweep is not None and sweep.available:
        rows += sweep_rows(sweep)
    return finite_rows(rows)


def sweep_rows(sweep) -> list[dict]:
    """GB/s per mode at the largest size of a GPU ``htod_sweep``, CI over the timed copies."""
    table = sweep.to_frame()
    top = table[table["size_bytes"] == table["size_bytes"].max()]
    size = int(top["size_bytes"].iloc[0])
    subject = f"htod_sweep {size} B"
    raw = {mode: np.asarray(s, dtype=float) for n, mode, s in sweep.samples if n == size}
    out = []
    for rec in top.to_dict("records"):
        seconds = raw.get(rec["mode"], np.array([]))
        ci = step_ci(size / seconds[seconds > 0] / 1e9) if seconds.size else None
        out.append(row("htod", f"{rec['mode']}_gbps", rec["gbps"], "GB/s", higher_is_better=True, ci=ci,
                       subject=subject, device=sweep.device, quality=load_note()))
    return out


def with_sizes(frame: pd.DataFrame) -> pd.DataFrame:
    """A copies table (``htod(...).to_frame()`` or ``.sites``) with its ``bytes`` column as a size
    in decimal units, as its GB/s and the findings' evidence count them: 201326592 reads 201.3 MB."""
    if "bytes" not in frame:
        return frame
    return frame.assign(bytes=[byte_text(n) for n in frame["bytes"]]).rename(columns={"bytes": "size"})


def sweep_table(sweep) -> pd.DataFrame:
    """A ``htod_sweep`` result as a person reads it: copy size (KiB/MiB), mode, median time per
    copy (us), GB/s and samples; the GPU rows when it ran on a GPU, else the host memcpy baseline."""
    table = sweep.to_frame() if sweep.available else sweep.host_frame()
    return pd.DataFrame({"size": [bytes_text(n) for n in table["size_bytes"]], "mode": table["mode"],
                         "median per copy (us)": table["median_s"] * 1e6, "GB/s": table["gbps"],
                         "samples": table["samples"]})


def htod_text(result, sweep=None) -> str:
    """The copy analysis (and sweep, if any) read back in one paragraph, with the host time blocked
    in pageable and device-to-host copy calls and the syncs right after them (a pageable
    cudaMemcpyAsync returns only after the copy: often far more than the copy's GPU time). The figure
    is the copies table's ``host_blocked_us``, the one the findings quote."""
    frame = result.to_frame()
    if frame.empty:
        text = "The trace has no GPU copies (no GPU events), so no host-device copy could be analyzed."
    else:
        h = frame[frame["direction"] == "HtoD"]
        text = (f"{int(frame['count'].sum())} copies in {result.n_steps} step(s): "
                f"{int(h['count'].sum())} host-to-device, "
                f"{int(h.loc[h['memory'] == 'pageable', 'count'].sum())} of them from pageable memory, "
                f"{int(frame['followed_by_sync'].sum())} copies followed by a blocking sync.")
        text += _pageable_block_text(frame)
    if sweep is None:
        return text
    if not sweep.available:
        return text + f" Bandwidth sweep: {sweep.reason}; the host memcpy baseline is host memory bandwidth only."
    best = sweep.to_frame().groupby("mode")["gbps"].max()
    return text + " Best measured bandwidth: " + ", ".join(f"{m} {v:.1f} GB/s" for m, v in best.items()) + "."


def _pageable_block_text(frame) -> str:
    blocking = {"pageable host-to-device": (frame["direction"] == "HtoD") & (frame["memory"] == "pageable"),
                "device-to-host": frame["direction"] == "DtoH"}
    blocked = {what: float(frame.loc[rows, "host_blocked_us"].sum()) for what, rows in blocking.items()}
    blocked = {what: us for what, us in blocked.items() if us > 0}
    if not blocked:
        return ""
    gpu_us = float(frame.loc[frame["memory"] == "pageable", "time_us"].sum())
    parts = " and ".join(f"{ms_text(us)} in {what} copy calls" for what, us in blocked.items())
    return (f" The host waited {parts} and the syncs right after them (a pageable copy call returns only once the "
            f"copy is done), against {ms_text(gpu_us)} of GPU copy time for the pageable copies: pinning saves the "
            "host wait.")
