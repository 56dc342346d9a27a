"""What ``perfkit gpu-kernels`` prints: the device and its peaks, GPU time by kernel, FLOPs and bytes per op and
per shape against the peaks, findings."""
from __future__ import annotations


def format_kernels(result, path, top: int = 15) -> str:
    if not result.has_gpu:
        return f"{path}: " + " ".join(result.warnings) + "\n"
    t = result.totals
    lines = [_device_line(result), _totals_line(t), *_timeline_lines(result.timeline), "",
             f"{'ms':>10}{'share':>7}{'calls':>8}  {'class':<12}{'TC':<4}{'dtype':<6}kernel"]
    for k in result.top(top).to_dict("records"):
        tc = {True: "yes", False: "no"}.get(k["tensor_core"], "?")
        lines.append(f"{k['total_us'] / 1e3:>10,.3f}{100 * k['share']:>6.1f}%{k['calls']:>8,}  {k['class']:<12}{tc:<4}"
                     f"{_label(k['dtype']):<6}{k['name'][:100]}")
    if len(result.kernels) > top:
        lines.append(f"... {len(result.kernels) - top} more kernels (--top N or --json)")
    lines += ["", f"{'ms':>10}{'calls':>8}  {'family':<12}{'dtype':<6}{'TFLOP/s':>9}{'GB/s':>9}{'FLOP/B':>8}"
                  f"{'% peak':>8}  {'bound':<12}op"]
    for o in result.ops.head(top).to_dict("records"):
        lines.append(f"{o['kernel_us'] / 1e3:>10,.3f}{o['calls']:>8,}  {o['family']:<12}{_label(o['dtype']):<6}"
                     f"{_num(o['tflops_per_s'], 2):>9}{_num(o['gbs'], 0):>9}{_num(o['intensity'], 1):>8}"
                     f"{_num(o['pct_of_peak'], 1):>8}  {o['bound'] if isinstance(o['bound'], str) else '-':<12}{o['op']}")
    lines += _shape_lines(result.shapes, top)
    lines += [""] + [f"{f.severity:<8} {f.title}\n         fix: {f.fix}" for f in result.findings]
    lines += [f"warning  {w}" for w in result.warnings]
    return "\n".join(lines) + "\n"


def _shape_lines(shapes, top: int) -> list[str]:
    """The per-shape roofline table (ops with modeled FLOPs), most kernel time first."""
    if shapes.empty:
        return []
    lines = ["", f"{'ms':>10}{'calls':>7}  {'dtype':<6}{'TFLOP/s':>9}{'GB/s':>9}{'roof ms':>9}{'% roof':>8}  "
                 f"{'bound':<12}{'op':<28}shape"]
    for r in shapes.head(top).to_dict("records"):
        lines.append(f"{r['kernel_us'] / 1e3:>10,.3f}{r['calls']:>7,}  {_label(r['dtype']):<6}"
                     f"{_num(r['tflops_per_s'], 1):>9}{_num(r['gbs'], 0):>9}{_num(r['roofline_us'] / 1e3, 3):>9}"
                     f"{_num(r['pct_of_peak'], 1):>8}  {r['bound'] if isinstance(r['bound'], str) else '-':<12}"
                     f"{r['op']:<28}{r['shape'][:80]}")
    return lines


def _timeline_lines(tl: dict) -> list[str]:
    """The steps' GPU time split four ways on one line (``time_split.gpu_timeline``), none without steps."""
    if not tl:
        return []
    parts = ", ".join(f"{name} {100 * tl[key + '_share']:.1f}%" for name, key in (
        ("computation", "computation"), ("exposed communication", "exposed_comm"), ("exposed copies", "exposed_memcpy"),
        ("idle", "idle")))
    return [f"GPU timeline over {tl['total_us'] / 1e3:,.1f} ms of steps: {parts}"]


def _device_line(result) -> str:
    d = result.device
    if d is None:
        return f"device: {result.device_name or 'not named'} (no peaks known)"
    peaks = ", ".join(f"{k} {v:g}" for k, v in d.matrix.items())
    return (f"device: {result.device_name or d.name} -> {d.name}: matrix TFLOP/s {peaks}; vector fp32 "
            f"{d.vector.get('fp32', '-')}; {d.mem_bw_gbs:,.0f} GB/s ({d.source})")


def _totals_line(t: dict) -> str:
    tc = f"{100 * t['tensor_core_share']:.0f}%" if t["tensor_core_share"] is not None else "n/a"
    rate = f", {t['gemm_tflops_per_s']:.1f} TFLOP/s" if t["gemm_tflops_per_s"] else ""
    mfu = f"{100 * t['mfu']:.2f}%" if t["mfu"] is not None else "n/a"
    return (f"GPU busy {t['busy_us'] / 1e3:,.3f} ms; GEMM {t['gemm_us'] / 1e3:,.3f} ms, {t['gemm_flops'] / 1e12:,.3f} "
            f"TFLOP{rate}, Tensor Cores {tc} of GEMM time; MFU {mfu}; communication {t['comm_us'] / 1e3:,.3f} ms; "
            f"copies {t['copy_us'] / 1e3:,.3f} ms; unmodeled {t['unmodeled_us'] / 1e3:,.3f} ms")


def _label(value) -> str:
    """A dtype or other text cell: "-" for a missing one (None or NaN: ``_foreach_*`` ops have a list of types)."""
    return "-" if value is None or value != value else str(value)


def _num(value, digits: int) -> str:
    return "-" if value is None or value != value else f"{value:,.{digits}f}"
