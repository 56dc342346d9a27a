"""Host-to-device copy bandwidth: pageable vs pinned vs pinned + non_blocking, per size.

``htod_sweep()`` times ``dst.copy_(src)`` into a CUDA tensor for each size and mode:
synchronize, start the clock, run ``number`` copies, synchronize, stop (so queued
non-blocking copies are counted), after one warm-up copy. Every per-copy time is kept.
Without a GPU the result says ``available=False`` with the reason and an empty table; the
optional host baseline (numpy memcpy of the same sizes, mode "host_memcpy") still gives
real numbers, but it is host memory bandwidth, NOT host-to-device bandwidth.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..device import resolve_device, synchronize
from ..errors import ParameterError
from ..results import Finding, findings_frame, html_section, html_table, html_text, html_warnings, rank_findings

MODES = ("pageable", "pinned", "pinned_non_blocking")
HOST_MODE = "host_memcpy"
DEFAULT_SIZES = (4 * 2**10, 64 * 2**10, 2**20, 16 * 2**20, 64 * 2**20)
COLUMNS = ["size_bytes", "mode", "median_s", "gbps", "samples"]
# Each timed sample moves at least this many bytes (or 100 copies), so a 4 KiB copy is not
# timed alone against a clock resolution of ~1 us.
_BYTES_PER_SAMPLE = 8 * 2**20
# Pinned memory faster than pageable by this factor is worth a finding (PCIe 4/5 systems
# typically show 2-3x; NVIDIA's "How to Optimize Data Transfers in CUDA C/C++").
PINNED_GAP = 1.5
# A size reaching under this fraction of the best bandwidth is latency-bound.
LATENCY_FRACTION = 0.1


@dataclass(frozen=True)
class HtoDResult:
    """Copy timings. ``samples`` and ``host_samples`` rows are (size_bytes, mode, per-copy
    seconds...). ``gbps`` is 1e9 bytes per second of the median time."""

    device: str
    available: bool
    reason: str
    samples: tuple[tuple[int, str, tuple[float, ...]], ...]
    host_samples: tuple[tuple[int, str, tuple[float, ...]], ...] = ()
    repeats: int = 0
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def to_frame(self) -> pd.DataFrame:
        """Host-to-device table: size_bytes, mode, median_s, gbps, samples (count). Empty
        (same columns) without a GPU."""
        return _frame(self.samples)

    def host_frame(self) -> pd.DataFrame:
        """Host memcpy baseline, mode "host_memcpy": the same columns."""
        return _frame(self.host_samples)

    @property
    def findings(self) -> tuple[Finding, ...]:
        return rank_findings(_findings(self))

    def __repr__(self) -> str:
        state = f"{len(self.samples)} size x mode cells" if self.available else f"reason={self.reason!r}"
        return f"HtoDResult(device={self.device!r}, available={self.available}, {state})"

    def _repr_html_(self) -> str:
        parts = [html_table(self.to_frame(), max_rows=60)] if self.available else [
            f"<p>{html_text(self.reason)}</p>"]
        if self.host_samples:
            parts += [f"<p>{html_text('Host memcpy baseline (not host-to-device):')}</p>",
                      html_table(self.host_frame(), max_rows=60)]
        return html_section("Host-to-device copy bandwidth", *parts,
                            html_table(findings_frame(self.findings)), html_warnings(self.warnings))


def _frame(rows) -> pd.DataFrame:
    out = []
    for size, mode, times in rows:
        med = statistics.median(times)
        out.append({"size_bytes": size, "mode": mode, "median_s": med,
                    "gbps": size / med / 1e9 if med > 0 else float("nan"), "samples": len(times)})
    return pd.DataFrame(out, columns=COLUMNS).astype({"size_bytes": "int64", "samples": "int64"})


def htod_sweep(sizes_bytes=DEFAULT_SIZES, modes=MODES, repeats: int = 10, device: str = "auto", *,
               host_baseline: bool = True, clock=time.perf_counter) -> HtoDResult:
    """Measure host-to-device copy bandwidth for each size (bytes) and mode.

    ``modes`` are any of "pageable", "pinned", "pinned_non_blocking". ``clock`` returns
    seconds. Returns ``available=False`` with ``reason="no GPU: ..."`` when there is no CUDA
    device; raises ParameterError for unknown modes, non-positive sizes or repeats < 1.
    """
    sizes, modes = _check(sizes_bytes, modes, repeats)
    host = tuple(_host_rows(sizes, repeats, clock)) if host_baseline else ()
    dev, reason = _gpu_device(device)
    warnings = _warnings(host, repeats)
    if dev is None:
        return HtoDResult(str(device), False, reason, (), host, repeats, warnings)
    rows = tuple((s, m, _time_mode(dev, s, m, repeats, clock)) for s in sizes for m in modes)
    return HtoDResult(dev, True, "", rows, host, repeats, _warnings(rows + host, repeats))


def _check(sizes_bytes, modes, repeats) -> tuple[tuple[int, ...], tuple[str, ...]]:
    sizes = tuple(int(s) for s in sizes_bytes)
    modes = tuple(modes)
    if not sizes or min(sizes) < 1:
        raise ParameterError(f"htod_sweep: sizes_bytes={sizes_bytes!r} must be positive byte counts")
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ParameterError(f"htod_sweep: unknown modes {bad or modes!r}; use some of {MODES}")
    if int(repeats) < 1:
        raise ParameterError(f"htod_sweep: repeats={repeats} must be >= 1")
    return sizes, modes


def _gpu_device(device: str) -> tuple[str | None, str]:
    """(device, "") for a usable CUDA device, else (None, "no GPU: why")."""
    if str(device) == "cpu":
        return None, "no GPU: device='cpu' was requested"
    try:
        import torch  # heavy, optional: without it there is no GPU to sweep
    except ImportError:
        return None, "no GPU: torch is not installed"
    if not torch.cuda.is_available():
        if str(device).split(":")[0] not in ("auto", "cuda"):
            raise ParameterError(f"htod_sweep: device={device!r}: use 'auto', 'cuda' or 'cuda:N'")
        return None, f"no GPU: torch.cuda.is_available() is False (torch {torch.__version__})"
    return resolve_device(device), ""


def _copies_per_sample(size: int) -> int:
    return max(1, min(100, _BYTES_PER_SAMPLE // size))


def time_copies(copy, sync, repeats: int, number: int, clock=time.perf_counter) -> tuple[float, ...]:
    """Per-copy seconds of ``repeats`` samples of ``number`` back-to-back ``copy()`` calls,
    each bracketed by ``sync()``; one warm-up call first."""
    copy()
    sync()
    out = []
    for _ in range(int(repeats)):
        sync()
        t0 = clock()
        for _ in range(number):
            copy()
        sync()
        out.append((clock() - t0) / number)
    return tuple(out)


def _host_rows(sizes, repeats, clock):
    for size in sizes:
        src = np.ones(size, dtype=np.uint8)
        dst = np.empty_like(src)
        times = time_copies(lambda: np.copyto(dst, src), lambda: None, repeats, _copies_per_sample(size), clock)
        yield size, HOST_MODE, times


def _time_mode(device: str, size: int, mode: str, repeats: int, clock) -> tuple[float, ...]:
    import torch  # heavy, optional: only a GPU sweep needs it

    src = torch.ones(size, dtype=torch.uint8, pin_memory=(mode != "pageable"))
    dst = torch.empty(size, dtype=torch.uint8, device=device)
    non_blocking = mode == "pinned_non_blocking"
    return time_copies(lambda: dst.copy_(src, non_blocking=non_blocking), lambda: synchronize(device),
                       repeats, _copies_per_sample(size), clock)


def _warnings(rows, repeats) -> tuple[str, ...]:
    out = []
    if repeats < 5:
        out.append(f"repeats={repeats}: medians of fewer than 5 samples are noisy; use repeats >= 5")
    noisy = [(s, m) for s, m, t in rows if len(t) > 2 and min(t) > 0 and max(t) / min(t) > 2]
    if noisy:
        out.append(f"{len(noisy)} size/mode cells vary more than 2x between samples (e.g. "
                   f"{noisy[0][0]:,} B {noisy[0][1]}): other work on the machine? re-run when idle")
    return tuple(out)


def _findings(r: HtoDResult) -> list[Finding]:
    if not r.available:
        ev = {"reason": r.reason}
        host = r.host_frame()
        if len(host):
            ev["host_memcpy_gbps_max"] = float(host["gbps"].max())
        return [Finding("info", "host-to-device bandwidth not measured: no GPU", ev,
                        "run on a CUDA machine; the host memcpy baseline is host memory bandwidth only")]
    frame = r.to_frame()
    return _pinned_gap(frame) + _latency(frame)


def _pinned_gap(frame: pd.DataFrame) -> list[Finding]:
    top = frame[frame["size_bytes"] == frame["size_bytes"].max()].set_index("mode")["gbps"]
    if "pageable" not in top or not ({"pinned", "pinned_non_blocking"} & set(top.index)):
        return []
    pinned = top.drop("pageable").max()
    ratio = pinned / top["pageable"]
    size = int(frame["size_bytes"].max())
    ev = {"size_bytes": size, "pageable_gbps": float(top["pageable"]), "pinned_gbps": float(pinned),
          "ratio": float(ratio)}
    if ratio >= PINNED_GAP:
        return [Finding("medium", f"pinned copies are {ratio:.1f}x faster than pageable at {size / 2**20:g} MiB", ev,
                        "DataLoader(pin_memory=True) and batch.to(device, non_blocking=True); stage "
                        "replay-buffer samples in a preallocated pinned buffer",
                        f"pinned/pageable bandwidth >= {PINNED_GAP}")]
    return [Finding("info", f"pinned and pageable copies within {PINNED_GAP}x at {size / 2**20:g} MiB", ev)]


def _latency(frame: pd.DataFrame) -> list[Finding]:
    best = frame["gbps"].max()
    small = frame[frame["size_bytes"] == frame["size_bytes"].min()]
    row = small.loc[small["gbps"].idxmax()]
    if not best > 0 or row["gbps"] >= LATENCY_FRACTION * best:
        return []
    return [Finding("low", f"{int(row['size_bytes']):,} B copies reach only {row['gbps']:.2f} GB/s "
                           f"({row['median_s'] * 1e6:.1f} us each): latency-bound",
                    {"size_bytes": int(row["size_bytes"]), "gbps": float(row["gbps"]), "best_gbps": float(best)},
                    "batch small tensors into one buffer (torch.cat or a preallocated pinned staging buffer) "
                    "and copy once per step",
                    f"smallest size below {LATENCY_FRACTION:.0%} of the best bandwidth")]
