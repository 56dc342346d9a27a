"""What the gpu_kernels notebook (and amp_regression's per-arm section) shows of a ``perfkit.kernels``
result: the card's verdict, the totals, the kernel table, the per-op roofline table and the GEMM time
per dtype, each as a person reads it (ms, %, TFLOP/s; names shortened to fit a report column)."""
from __future__ import annotations

import math

import pandas as pd

from ..analysis.step.whatif import MIN_SAVING
from ..stats import exact
from .rows import finite_rows
from .rows import row

NO_FINDING = "no kernel finding"
# The fix ``perfkit whatif`` replays for a kernel finding's advice, by the evidence key only that finding carries.
FINDING_FIXES = {"memory_bound_us": "fuse_elementwise", "fp32_cuda_core_us": "amp"}
_NAME_CHARS = 90

INVESTIGATION = "gpu_kernels"


def kernel_verdict(result) -> str:
    """The card's verdict: the leading finding's title, else "no kernel finding" (saying why when the
    trace has no GPU activity)."""
    if not result.has_gpu:
        return f"{NO_FINDING}: no GPU kernels in this trace"
    return result.findings[0].title if result.findings else NO_FINDING


def finding_prediction(result, w, step_prediction: dict) -> dict:
    """The card's prediction (``{"sentence": ...}``): what the top kernel finding's fix buys replayed on the step
    (``w``: the trace's ``whatif``), and when that is under ``MIN_SAVING`` of the step, that other work bounds the
    step, with the whole step's prediction (``step_prediction``: ``diagnose(trace).prediction``); the
    whole step's alone when the finding's fix is not one perfkit replays or the trace replays nothing."""
    top = result.findings[0] if result.has_gpu and result.findings else None
    fix = next((f for key, f in FINDING_FIXES.items() if top is not None and key in top.evidence), None)
    if fix is None or w.replay.steps.empty or not w.prediction(fix).applies:
        return step_prediction
    p, step = w.prediction(fix), step_prediction["sentence"]
    if p.share >= MIN_SAVING:
        return {"sentence": f"Predicted: {w.fix_text(fix)}"}
    return {"sentence": f"Replayed: {w.fix_text(fix)}, {p.share:.0%} of the step (under {MIN_SAVING:.0%}): other "
                        f"work bounds the step. For the whole step: {step[0].lower()}{step[1:]}"}


def short_name(name: str, limit: int = _NAME_CHARS) -> str:
    """A kernel name cut to ``limit`` characters ("..." marks the cut): template arguments make them run
    to hundreds."""
    name = str(name)
    return name if len(name) <= limit else name[: limit - 3] + "..."


def kernel_table(result, n: int = 15) -> pd.DataFrame:
    """The ``n`` kernels with the most GPU time: kernel, class, calls, ms, % of GPU busy time, Tensor
    Cores (yes/no/? when the name does not say) and dtype ("?" when neither name nor op says)."""
    k = result.top(n)
    return pd.DataFrame({
        "kernel": [short_name(s) for s in k["name"]], "class": k["class"], "calls": k["calls"],
        "ms": k["total_us"] / 1e3, "% of GPU busy": 100 * k["share"].astype(float),
        "Tensor Cores": [_yes_no(v) for v in k["tensor_core"]], "dtype": k["dtype"].fillna("?"),
    }, columns=["kernel", "class", "calls", "ms", "% of GPU busy", "Tensor Cores", "dtype"])


def op_table(result, n: int = 15) -> pd.DataFrame:
    """The ``n`` ops with the most kernel time: op, class, dtype, calls, kernel ms, GFLOP, MB moved,
    TFLOP/s, GB/s, FLOP per byte, unit (matrix/vector), % of that unit's peak for the dtype and bound
    (compute/memory against the ridge point). "-" where the op has no shapes or no model (unmodeled),
    or the device is unknown (no peak)."""
    o = result.ops.head(n)
    frame = pd.DataFrame({
        "op": o["op"], "class": o["family"], "dtype": o["dtype"].fillna("?"), "calls": o["calls"],
        "kernel ms": o["kernel_us"] / 1e3, "GFLOP": _text(o["flops"] / 1e9, 3), "MB moved": _text(o["bytes"] / 1e6, 2),
        "TFLOP/s": _text(o["tflops_per_s"], 2), "GB/s": _text(o["gbs"], 0), "FLOP/B": _text(o["intensity"], 1),
        "unit": o["unit"], "% of peak": _text(o["pct_of_peak"], 1),
        "bound": [b if isinstance(b, str) else "-" for b in o["bound"]],
    })
    return frame


def gemm_dtype_table(result) -> pd.DataFrame:
    """GEMM kernel time per (dtype, Tensor Cores): calls, ms and % of GEMM time."""
    g = result.gemm_by_dtype()
    return pd.DataFrame({"dtype": g["dtype"], "Tensor Cores": g["tensor_core"], "calls": g["calls"],
                         "ms": g["total_us"] / 1e3, "% of GEMM time": 100 * g["gemm_share"].astype(float)},
                        columns=["dtype", "Tensor Cores", "calls", "ms", "% of GEMM time"])


def totals_table(result) -> pd.DataFrame:
    """The totals as metric/value rows: GPU busy, GEMM time, FLOPs and TFLOP/s, Tensor Core share, MFU
    (and the peak it divides by), communication, copies and unmodeled time; "n/a" where undefined."""
    t = result.totals
    rows = [("GPU busy", _ms(t["busy_us"])), ("GEMM kernel time", _ms(t["gemm_us"])),
            ("GEMM FLOPs (ops with shapes)", f"{t['gemm_flops'] / 1e9:,.3f} GFLOP" if t["gemm_flops"] > 0
             else "n/a (no GEMM op has recorded shapes: record_shapes=True)"),
            ("GEMM throughput", _unit(t["gemm_tflops_per_s"], "TFLOP/s", 1.0, 2)),
            ("GEMM time on Tensor Cores", _unit(t["tensor_core_share"], "%", 100.0, 1)),
            ("model FLOP/s utilisation (MFU)", _unit(t["mfu"], "%", 100.0, 3)),
            ("MFU's peak", _unit(t["mfu_peak_tflops"], "TFLOP/s", 1.0, 1)),
            ("communication kernels", _ms(t["comm_us"])), ("copies and memsets", _ms(t["copy_us"])),
            ("compute kernels no model covers (unmodeled)", _ms(t["unmodeled_us"]))]
    rows += [(f"steps' GPU time: {name}", f"{_ms(tl[key + '_us'])} ({100 * tl[key + '_share']:.1f}%)")
             for tl in [result.timeline] if tl for name, key in TIMELINE_PARTS]
    return pd.DataFrame(rows, columns=["metric", "value"])



# The GPU timeline's parts as the report names them (``analysis.gpu_kernels.time_split``).
TIMELINE_PARTS = (("computation", "computation"), ("exposed communication", "exposed_comm"),
                  ("exposed copies", "exposed_memcpy"), ("idle", "idle"))


def device_line(result) -> str:
    """Which peaks the percentages use: the device, its source, or why there are none."""
    d = result.device
    if d is None:
        if not result.device_name:
            return "Device: the trace names none: FLOP/s and bytes without percentages of peak (pass --peaks FILE)."
        return (f"Device: unknown device {result.device_name!r}: use --peaks FILE (perfkit validate --write-peaks "
                "FILE measures it); FLOP/s and bytes without percentages of peak.")
    return (f"Device: {result.device_name or d.name}, peaks of {d.name} ({d.mem_bw_gbs:,.0f} GB/s; "
            f"source: {d.source}).")


def _yes_no(value) -> str:
    return {True: "yes", False: "no"}.get(value, "?")


def _text(values: pd.Series, digits: int) -> list[str]:
    return [f"{v:,.{digits}f}" if isinstance(v, (int, float)) and math.isfinite(v) else "-" for v in values]


def _ms(us: float) -> str:
    return f"{us / 1e3:,.3f} ms"


def _unit(value, unit: str, scale: float, digits: int) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value * scale:,.{digits}f} {unit}"


def arms_summary(arms: dict) -> pd.DataFrame:
    """One row per arm (``{"before": KernelsResult, "after": ...}``): GPU busy ms, GEMM ms, the share of
    GEMM time on Tensor Cores, GEMM TFLOP/s (ops with shapes) and the leading finding ("-" for none;
    "no GPU kernels" for an arm without GPU activity)."""
    rows = []
    for arm, r in arms.items():
        t = r.totals if r.has_gpu else {}
        tc = t.get("tensor_core_share")
        rows.append({"arm": arm, "GPU busy ms": _opt(t.get("busy_us"), 1e-3, 3),
                     "GEMM ms": _opt(t.get("gemm_us"), 1e-3, 3),
                     "GEMM time on Tensor Cores": _opt(tc, 100.0, 1, " %"),
                     "GEMM TFLOP/s": _opt(t.get("gemm_tflops_per_s"), 1.0, 2),
                     "leading finding": (r.findings[0].title if r.findings else "-") if r.has_gpu else "no GPU kernels"})
    return pd.DataFrame(rows)


def arms_gemm_dtypes(arms: dict) -> pd.DataFrame:
    """``gemm_dtype_table`` of each arm, stacked with an ``arm`` column (empty for arms without GEMMs)."""
    frames = [gemm_dtype_table(r).assign(arm=arm) for arm, r in arms.items() if r.has_gpu]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=["arm", "dtype", "Tensor Cores", "calls", "ms", "% of GEMM time"])
    out = pd.concat(frames, ignore_index=True)
    return out[["arm", "dtype", "Tensor Cores", "calls", "ms", "% of GEMM time"]]


def _opt(value, scale: float, digits: int, unit: str = "") -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * scale:,.{digits}f}{unit}"


def kernel_rows(result, subject: str, device: str, investigation: str = INVESTIGATION) -> list[dict]:
    """Perf-log rows of a ``kernels`` result, each higher-is-better and only when defined:

    * ``gemm_tflops_per_s``: GEMM FLOPs (2*M*N*K of the ops with shapes) / their kernel time, TFLOP/s;
    * ``tensor_core_share_pct``: % of GEMM kernel time in kernels whose names say Tensor Cores;
    * ``mfu_pct``: matrix FLOPs in the full profiled steps / (step time x the device's matrix peak), %.

    Totals over a trace file are fixed by the file (CI exact); a trace without GPU events gives no rows."""
    if not result.has_gpu:
        return []
    t = result.totals
    base = dict(subject=subject, device=device, higher_is_better=True)
    values = [("gemm_tflops_per_s", t.get("gemm_tflops_per_s"), "TFLOP/s", 1.0),
              ("tensor_core_share_pct", t.get("tensor_core_share"), "%", 100.0),
              ("mfu_pct", t.get("mfu"), "%", 100.0)]
    rows = [row(investigation, metric, value * scale, unit, ci=_ci(subject, value * scale), **base)
            for metric, value, unit, scale in values if value is not None]
    return finite_rows(rows)



def _ci(subject: str, value: float):
    return exact(value) if subject.startswith("trace ") else None
