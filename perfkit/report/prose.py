"""An investigation's numbers read back in words: one paragraph per result (``*_text``) and
``prose()`` to show paragraphs as escaped HTML in a notebook.
"""
from __future__ import annotations

import math


def cpu_bound_text(result) -> str:
    """The verdict of a ``cpu_bound`` result read back in one paragraph: wall time, GPU busy
    share and the host's time by layer (DataLoader, compiling when there was any, blocking syncs,
    other host work)."""
    o = result.overall
    if result.steps.empty:
        return f"Verdict: {result.verdict}. The trace has no profiler steps, so no step could be split."
    gpu = (f"the GPU was busy {o['gpu_busy_pct']:.1f}% of it" if result.has_gpu
           else "the trace has no GPU events, so only host time is known")
    host = o["host_busy_us"] / max(o["wall_us"], 1e-12) * 100
    layers = [("DataLoader", o["dataloader_us"]), ("torch.compile compiling", o["compile_us"]),
              ("blocking syncs", o["sync_us"]), ("other host work", o["host_other_us"])]
    listed = ", ".join(f"{name} {_ms(us)}" for name, us in layers if us > 0 or name != "torch.compile compiling")
    return (f"Verdict: {result.verdict}. Over {o['steps']} step(s) and {o['wall_us'] / 1e3:,.1f} ms of wall time, "
            f"{gpu}; the host was busy {host:.1f}% of it ({listed}). "
            f"{len(result.findings)} finding(s) below, most severe first.")


def _ms(us: float) -> str:
    return f"{us / 1e3:,.2f} ms"


def verdict_text(result) -> str:
    """What a ``cpu_bound`` verdict rests on, in words: compile seconds and the steps that
    compiled ("compiling"), the launch-to-kernel delay against the step ("GPU-bound (host
    ahead)"), why GPU figures are left out ("CPU-only trace"), else the rule that fired."""
    if result.verdict == "compiling":
        return compiling_text(result)
    if result.verdict == "GPU-bound (host ahead)":
        return host_ahead_text(result)
    if result.verdict == "CPU-only trace":
        return cpu_only_text(result)
    return f"Rule that decided it: {result.evidence['rule']}."


def compiling_text(result) -> str:
    """Compile seconds (union of compile spans in the whole trace and in its steps) and which
    steps compiled; a fix that follows from how many did."""
    o, steps = result.overall, result.steps
    total_s = (result.compile or {}).get("compile_s", o["compile_us"] / 1e6)
    compiled = steps[steps["compile_us"] > 0]
    names = ", ".join(_step_name(r, len(set(steps["rank"]))) for r in compiled.head(5).to_dict("records"))
    more = f" and {len(compiled) - 5} more" if len(compiled) > 5 else ""
    text = (f"torch.compile compiled for {total_s:,.2f} s in this trace (the union of Dynamo, AOTAutograd, Inductor "
            f"and Triton compile spans); inside the profiled steps {o['compile_us'] / 1e6:,.2f} s, "
            f"{o['compile_us'] / max(o['wall_us'], 1e-12):.0%} of their wall time. {len(compiled)} of {len(steps)} "
            f"step(s) compiled ({names}{more}).")
    if len(compiled) > 1:
        return text + (" Compiling in more than one step means recompiles: run with TORCH_LOGS=recompiles to see "
                       "which guard fails.")
    return text + (" Compile work runs once per graph: profile after warm-up (torch.profiler.schedule(wait=1, "
                   "warmup=3, active=5)) so the window measures the training loop, not the compiler.")


def _step_name(row: dict, ranks: int) -> str:
    return f"rank {row['rank']} step {row['step']}" if ranks > 1 else f"step {row['step']}"


def host_ahead_text(result) -> str:
    """The median launch-to-kernel delay against the mean step, and what it means."""
    from ..analysis.step.rules import HOST_AHEAD_MIN_US

    o, e = result.overall, result.evidence
    step_us = o["wall_us"] / max(o["steps"], 1)
    return (f"The median kernel starts {e['queue_delay_us'] / 1e3:,.3g} ms after its launch call, "
            f"{e['queue_delay_share']:.0%} of the mean step ({step_us / 1e3:,.3g} ms): the host runs that far ahead of "
            f"the GPU, so work is queued and the GPU's idle {o['gpu_idle_pct']:.0f}% of this window is not the host's "
            f"doing (rule: >= {e['threshold_host_ahead_share']:.0%} of the step and >= {HOST_AHEAD_MIN_US:g} us). "
            "Make the GPU work itself faster; removing syncs or launch overhead would not shorten the step.")


def cpu_only_text(result) -> str:
    """Why a CPU-only trace's report has no GPU figures, and where its time is."""
    o = result.overall
    return (f"The trace has no GPU events and no kernel launches: all {o['wall_us'] / 1e3:,.1f} ms of step time is "
            "host time, so the GPU figures (GPU busy bars, launch delays) are left out. The host ops by self time "
            "and the record_function ranges below show where it goes.")


def htod_text(result, sweep=None, syncs=None) -> str:
    """The copy analysis (and sweep, if any) read back in one paragraph; with the trace's
    ``syncs`` result, the host time blocked in pageable copy calls (a pageable cudaMemcpyAsync
    returns only after the copy: often far more than the copy's GPU time)."""
    frame = result.to_frame()
    if frame.empty:
        text = "The trace has no GPU copies (no GPU events), so no host-device copy could be analyzed."
    else:
        h = frame[frame["direction"] == "HtoD"]
        text = (f"{int(frame['count'].sum())} copies in {result.n_steps} step(s): "
                f"{int(h['count'].sum())} host-to-device, "
                f"{int(h.loc[h['memory'] == 'pageable', 'count'].sum())} of them from pageable memory, "
                f"{int(frame['followed_by_sync'].sum())} copies followed by a blocking sync.")
        text += _pageable_block_text(frame, syncs)
    if sweep is None:
        return text
    if not sweep.available:
        return text + f" Bandwidth sweep: {sweep.reason}; the host memcpy baseline is host memory bandwidth only."
    best = sweep.to_frame().groupby("mode")["gbps"].max()
    return text + " Best measured bandwidth: " + ", ".join(f"{m} {v:.1f} GB/s" for m, v in best.items()) + "."


def _pageable_block_text(frame, syncs) -> str:
    if syncs is None:
        return ""
    kinds = syncs.by_kind.set_index("kind")
    blocked = {k: float(kinds.at[k, "blocked_us"]) for k in ("memcpy_htod_pageable", "memcpy_dtoh") if k in kinds.index}
    if not blocked:
        return ""
    gpu_us = float(frame.loc[frame["memory"] == "pageable", "time_us"].sum())
    parts = " and ".join(f"{_ms(us)} in {'pageable host-to-device' if k.endswith('pageable') else 'device-to-host'} "
                         "copy calls" for k, us in blocked.items())
    return (f" The host waited {parts} (the call returns only once the copy is done), against {_ms(gpu_us)} of GPU "
            "copy time for the pageable copies: pinning saves the host wait.")


def sync_text(result, detected=None, detected_steps: int = 0) -> str:
    """The sync analysis (and runtime detector, if run) read back: the sync points (host waits
    on the GPU) by kind first, host scalar reads that did not wait apart, and what a site's
    source line means."""
    from ..analysis.syncs.result import SOURCE_NOTE

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
    return (f"{t['per_step']:.3g} {what}, {t['in_steps']['blocked_us'] / t['steps'] / 1e3:,.3g} ms blocked per step"
            f"{apart}; longest: {top['kind']} in {worst}")


def compile_text(result) -> str:
    s = result.summary()
    steps = s["break_even_steps"]
    even = "never (no established saving)" if steps == math.inf else f"after {steps:,.0f} steps"
    return (f"torch.compile ({s['backend']}, mode {s['mode']}) on {s['device']}: {s['verdict']}, speedup "
            f"{s['speedup']:.3g}x (CI {s['ci_low']:.3g}-{s['ci_high']:.3g}) over eager. Compiling cost "
            f"{s['compile_time_s']:.3g} s, repaid {even}. {s['graph_breaks']} graph break(s), "
            f"{s['recompiles']} recompile(s).")


def amp_text(result) -> str:
    s = result.summary()
    return (f"Autocast ({s['dtype']}) on {s['device']}: {s['verdict']}, speedup {s['speedup']:.3g}x "
            f"(CI {s['ci_low']:.3g}-{s['ci_high']:.3g}) over fp32. The loss curves differ by at most "
            f"{s['loss_max_rel_diff']:.3g} (relative). Saved activations: fp32 {_bytes(s['saved_bytes_fp32'])}, "
            f"autocast {_bytes(s['saved_bytes_amp'])}.")


def leak_text(result) -> str:
    lo, hi = result.ci
    d = result.decision
    unit = d.unit if d else ""
    return (f"Verdict: {result.verdict} after {result.steps} steps on {result.device} (decided by {result.decided_by}: "
            f"{result.per_1000:,.4g} {unit} per 1,000 steps, CI {lo:,.4g} to {hi:,.4g}).")


def _bytes(value) -> str:
    return "n/a" if value is None else f"{value / 2**20:,.2f} MiB"


def diff_text(result) -> str:
    """A trace diff read back in one paragraph: step-time ratio with CI and verdict over the full
    steps of each side (partial steps dropped, when any were), how many findings are regressions
    and how many improvements, new and vanished kernels, and the op whose per-step time moved most."""
    s = result.step_change
    ci = f" (CI {s['low']:.3g}-{s['high']:.3g})" if finite(s["low"], s["high"]) else ""
    regressions = sum(f.severity != "info" for f in result.findings)
    text = (f"A = {result.labels[0]}, B = {result.labels[1]}: median step B/A = {s['ratio']:.3g}{ci}, "
            f"{s['verdict']}, over {s['n_a']} and {s['n_b']} full step(s)")
    dropped = [w.split(":", 1)[0] for w in result.warnings if PARTIAL_STEPS in w]
    text += f" ({' and '.join(dropped)}: partial steps at the window's edge dropped, see the warnings). " if dropped \
        else ". "
    text += (f"{regressions} regression(s) and {len(result.findings) - regressions} improvement(s) or note(s). "
             f"{len(result.new_kernels)} new and {len(result.vanished_kernels)} vanished kernel name(s).")
    ops = result.ops.dropna(subset=["delta_per_step_us"])
    if len(ops):
        top = ops.loc[ops["delta_per_step_us"].abs().idxmax()]
        text += (f" Largest op change: {top['name']} ({top['status']}) {top['delta_per_step_us']:+,.1f} us per step.")
    return text


# How diff's stub-step warning starts after "A: " / "B: " (analysis.diff_findings._stub_warning).
PARTIAL_STEPS = "partial step(s) at the edge of the profiler window"


def diff_fix(result) -> str:
    """The fix a trace diff's report leads with: that of its most severe regression, or "" when
    nothing regressed (an improvement's note is not a fix)."""
    return next((f.fix for f in result.findings if f.severity != "info" and f.fix), "")


def validation_text(report) -> str:
    failed = ", ".join(c.name for c in report.failed)
    noisy = ", ".join(c.name for c in report.checks if c.status == "inconclusive")
    verdict = (f"Failed: {failed}." if failed else
               f"No check failed; timing noise left {noisy} inconclusive: rerun on an idle machine." if noisy else
               "Every check with an expectation on this device passed.")
    return (f"{len(report.checks)} checks on {report.environment['gpu']} ({report.device}, {report.preset} sizes) "
            f"in {report.elapsed_s:.0f} s: {report.counts_text()}. {verdict}")


def ranks_text(result) -> str:
    """A ``ranks`` result read back in one paragraph: ranks and steps, the median step, time
    waiting for peers, comm/compute overlap, the largest arrival skew and the stragglers."""
    from .rows import median_rank

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
    late = result.straggling_ranks
    names = "; ".join(f"rank {r['rank']} (+{r['excess_pct']:.0f}% in {r['steps']} of {r['of_steps']} steps, "
                      f"cause: {r['cause']})" for r in late.to_dict("records"))
    return text + (f" Stragglers: {names}." if names else " No rank is a straggler by the rule below.")


def prose(*paragraphs: str) -> str:
    """Plain-text paragraphs as escaped HTML ``<p>`` elements (for ``display(HTML(...))``)."""
    from ..results import html_text

    return "".join(f"<p>{html_text(p)}</p>" for p in paragraphs)


def finite(*values: float) -> bool:
    """True when every value is a real, finite number (None, NaN and inf are "not measured")."""
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def ab_verdict(what: str, result) -> str:
    """An A/B result (compile_ab, amp_ab) as a verdict line: "torch.compile: faster (1.8x
    speedup, CI 1.6-2.0)"; the verdict word is the result's own."""
    s = result.summary()
    ci = f", CI {s['ci_low']:.3g}-{s['ci_high']:.3g}" if finite(s["ci_low"], s["ci_high"]) else ""
    speed = f" ({s['speedup']:.3g}x speedup{ci})" if finite(s["speedup"]) else ""
    return f"{what}: {result.verdict}{speed}"


def diff_verdict(result) -> str:
    """A trace diff as a verdict line: "after vs before: faster (median step 0.62x, CI ...)"."""
    s = result.step_change
    ci = f", CI {s['low']:.3g}-{s['high']:.3g}" if finite(s["low"], s["high"]) else ""
    ratio = f" (median step after/before {s['ratio']:.3g}x{ci})" if finite(s["ratio"]) else ""
    return f"after vs before: {s['verdict']}{ratio}"
