"""The cpu_bound investigation as a report shows it: perf-log rows, the verdict's prose (compiling,
host ahead, CPU-only), the evidence and per-step tables, what each fix buys (``perfkit whatif``), and the
sections that show them."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.compile import regions_note
from ..analysis.step.queued import host_ahead
from ..analysis.step.rules import COMM_SHARE, HOST_AHEAD_MIN_US, LAUNCH_MIN_PER_STEP, WARMUP_SHARE
from ..results import format_number, html_table
from ..stats import step_ci
from . import plots
from .prose import finite, ms_text, prose
from .rows import finite_rows, live_note, mean_row, row, trace_ci
from .sections import show
from .tables import cell_text, pct_text


# cpu_bound's per-step table as a person reads it: (column of ``to_frame()``, heading, scale).
_STEP_COLUMNS = (("wall_us", "wall (ms)", 1e-3), ("host_busy_us", "host busy (ms)", 1e-3),
                 ("gpu_busy_pct", "GPU busy (%)", 1.0), ("queued_gpu_us", "GPU work queued (ms)", 1e-3),
                 ("dataloader_us", "DataLoader (ms)", 1e-3),
                 ("compile_us", "compiling (ms)", 1e-3), ("sync_blocked_us", "sync blocked (ms)", 1e-3),
                 ("launches", "launches", 1.0), ("queue_delay_us", "launch queue (ms)", 1e-3))


def cpu_bound_rows(result, subject: str, device: str) -> list[dict]:
    """Median step wall time (ms), host busy time per step (ms), GPU busy share (%, only with
    GPU events) and kernel launches per step of a ``cpu_bound`` result, CIs over its steps (all
    of them, as its step table shows them); for a torch.compile trace (``result.compile``) also
    ``compile_s``, the compile seconds of the whole trace (exact for a trace file), second when
    the verdict is "compiling" (the verdict card shows the first three rows), else last; when the
    host ran ahead of the GPU (``queued.host_ahead``), ``queued_gpu_ms_per_step`` second: the median
    GPU work a step queued, which a step of a long run takes at least."""
    steps = result.steps
    if steps.empty:
        return []
    base = dict(subject=subject, device=device, quality=live_note(subject))
    ms = steps["wall_us"] / 1e3
    host = steps["host_busy_us"] / 1e3
    rows = [row("cpu_bound", "median_step_ms", ms.median(), "ms", ci=step_ci(ms), **base),
            mean_row("cpu_bound", "host_busy_ms_per_step", host, **base)]
    if result.has_gpu:
        rows += [row("cpu_bound", "gpu_busy_pct", result.overall["gpu_busy_pct"], "%", higher_is_better=True,
                     ci=step_ci(steps["gpu_busy_pct"], np.mean), **base),
                 mean_row("cpu_bound", "launches_per_step", steps["launches"], "launches", **base)]
    if result.compile is not None:
        seconds = result.compile["compile_s"]
        compiled = row("cpu_bound", "compile_s", seconds, "s", ci=trace_ci(subject, seconds), **base)
        rows.insert(1 if result.verdict == "compiling" else len(rows), compiled)
    full = result.full_steps
    if host_ahead(full):  # the windows understate a step: the GPU work each one queued goes on the card
        queued = full["queued_gpu_us"] / 1e3
        rows.insert(1, row("cpu_bound", "queued_gpu_ms_per_step", queued.median(), "ms", ci=step_ci(queued), **base))
    return finite_rows(rows)


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
    listed = ", ".join(f"{name} {ms_text(us)}" for name, us in layers if us > 0 or name != "torch.compile compiling")
    return (f"Verdict: {result.verdict}. Over {o['steps']} step(s) and {o['wall_us'] / 1e3:,.1f} ms of wall time, "
            f"{gpu}; the host was busy {host:.1f}% of it ({listed}). "
            f"{len(result.findings)} finding(s) below, most severe first.")


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
    o, e = result.overall, result.evidence
    step_us = o["wall_us"] / max(o["steps"], 1)
    return (f"The median kernel starts {format_number(e['queue_delay_us'] / 1e3, 3)} ms after its launch call, "
            f"{e['queue_delay_share']:.0%} of the mean step ({format_number(step_us / 1e3, 3)} ms): the host runs "
            f"that far ahead of the GPU, so work is queued and the GPU's idle {o['gpu_idle_pct']:.0f}% of this window "
            f"is not the host's doing (rule: >= {e['threshold_host_ahead_share']:.0%} of the step and "
            f">= {HOST_AHEAD_MIN_US:g} us). "
            "Make the GPU work itself faster; removing syncs or launch overhead would not shorten the step.")


def cpu_only_text(result) -> str:
    """Why a CPU-only trace's report has no GPU figures, and where its time is."""
    o = result.overall
    return (f"The trace has no GPU events and no kernel launches: all {o['wall_us'] / 1e3:,.1f} ms of step time is "
            "host time, so the GPU figures (GPU busy bars, launch delays) are left out. The host ops by self time "
            "and the record_function ranges below show where it goes.")


def show_verdict_evidence(result) -> None:
    """What a ``cpu_bound`` verdict rests on: each cause against its threshold, the verdict read
    back, and what the verdict calls for: compile facts (any torch.compile trace), the launch
    delay histogram ("GPU-bound (host ahead)")."""
    show(prose(verdict_text(result)), html_table(cpu_bound_evidence(result)))
    if result.compile is not None:
        show("<h4>torch.compile in this trace</h4>", html_table(compile_table(result.compile)),
              prose(_sentence(regions_note(result.compile["compiled_regions"]))))
    if result.verdict == "GPU-bound (host ahead)":
        show(plots.queue_delay(result))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def cpu_bound_evidence(result) -> pd.DataFrame:
    """What a ``cpu_bound`` verdict rests on: one row per rule of ``analysis.step.rules.decide``, in
    the order it applies them: the evidence (a share of the step's wall time, "n/a" where the
    trace cannot tell), the rule's threshold, the verdict it gives, and which row decided."""
    e = result.evidence
    t = {k.removeprefix("threshold_"): v for k, v in e.items() if k.startswith("threshold_")}
    delay = f" (median {format_number(e['queue_delay_us'] / 1e3, 3)} ms)" if finite(e["queue_delay_us"]) else ""
    gpu = "GPU events recorded" if result.has_gpu else f"no GPU events, {int(e['launches'])} launches in steps"
    issuing = (f"{pct_text(e['issuing_idle_share'])} ({e['launches_per_step']:,.0f} launches per step; the host's own "
               f"work {pct_text(e['own_work_idle_share'])}, untraced {pct_text(e['untraced_share'])})")
    rows = [("GPU activity", gpu, "launches or GPU-only ops but no GPU events", "GPU activity not recorded"),
            ("host activity", "host events recorded" if e["launches"] or e["host_other_share"] else "no host events",
             "GPU events but no host event", "host activity not recorded"),
            ("warm-up calls", pct_text(e["warmup_share"]), f">= {WARMUP_SHARE:.0%} of the step", "warm-up"),
            ("compile spans", pct_text(e["compile_share"]), f">= {t['compile_share']:.0%} and the largest cause",
             "compiling"),
            ("GPU busy", pct_text(e["gpu_busy_share"]), f">= {t['gpu_bound_busy']:.0%}", "GPU-bound"),
            ("collectives not under compute", pct_text(e["comm_exposed_share"]),
             f"GPU-bound and >= {COMM_SHARE:.0%} of GPU busy", "communication-bound"),
            ("DataLoader", pct_text(e["dataloader_share"]), f">= {t['input_share']:.0%} and >= syncs", "input-bound"),
            ("GPU activity", gpu, "no GPU events and no kernel launches", "CPU-only trace"),
            (f"launch-to-kernel delay{delay}", pct_text(e["queue_delay_share"]),
             f">= {t['host_ahead_share']:.0%} and >= {HOST_AHEAD_MIN_US:g} us", "GPU-bound (host ahead)"),
            ("blocking syncs", pct_text(e["sync_share"]), f">= {t['sync_share']:.0%}", "sync-bound"),
            ("host issuing GPU work while the GPU idles", issuing,
             f">= {LAUNCH_MIN_PER_STEP} launches per step and >= the host's own work", "launch-bound"),
            ("host working on its own while the GPU idles", pct_text(e["own_work_idle_share"]),
             "GPU idle, no rule above met", "host-compute-bound")]
    replayed = e.get("decided_by") == "replay"
    if replayed:  # the saving decided: the share rules' rows say what they alone would give
        rows.insert(0, ("the saving of each fix, replayed (perfkit whatif)", e["rule"].split(":")[0],
                        "the largest saving >= 5% of a step, else the largest part no fix removes", result.verdict))
    return pd.DataFrame([{"evidence": name, "share of step": value, "rule": rule, "gives": verdict,
                          "decided": "yes" if verdict == result.verdict and (i == 0 or not replayed) else ""}
                         for i, (name, value, rule, verdict) in enumerate(rows)])


def compile_table(facts: dict) -> pd.DataFrame:
    """``result.compile`` / ``summarize(trace)["compile"]`` as metric/value rows a person reads."""
    share = facts.get("triton_time_share")
    rows = [("compile time (s; union of Dynamo/Inductor/Triton compile spans)", cell_text(facts["compile_s"])),
            ("compiled regions (distinct Torch-Compiled Region N/M)", cell_text(facts["compiled_regions"])),
            ("kernels", cell_text(facts["kernels"])), ("Triton kernels (triton_*)", cell_text(facts["triton_kernels"])),
            ("Triton share of kernel time", "n/a" if share is None else f"{share:.1%}")]
    return pd.DataFrame(rows, columns=["metric", "value"])


def compile_sites(result) -> pd.DataFrame:
    """The graph breaks and recompiles of a ``compile_ab`` result with the source each names:
    ``kind``, ``reason`` (dynamo's), ``location`` ("file:line"; a recompile on an input shape has
    none) and ``code`` (that line, as dynamo read it)."""
    rows = [("graph break", b.reason, b.location, b.code) for b in result.graph_breaks]
    rows += [("recompile", r.reason, r.location, r.code) for r in result.recompiles]
    return pd.DataFrame(rows, columns=["kind", "reason", "location", "code"])


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


def show_whatif(w) -> None:
    """What each fix buys (a ``whatif`` result): what the predictions rest on, the step each fix predicts as bars,
    and the fix table; a trace nothing was replayed on gets the sentence saying why, and no empty table."""
    if w.replay.steps.empty:
        show(prose(whatif_text(w)))
    else:
        show(prose(whatif_text(w)), plots.fix_steps(w), html_table(whatif_table(w)))


def whatif_table(w) -> pd.DataFrame:
    """A ``whatif`` result as a person reads it: one row per fix that applies, ranked: the step it predicts (ms;
    the mean step for a one-time cost, said in ``step``), its speedup, what it saves of the step, its part in the
    verdict (``verdict_role``), and what the transform assumed; then the fixes that do not apply, with why."""
    rows = []
    lead = w.lead.fix if w.lead is not None else None
    for p in w.fixes:
        if not p.applies:
            rows.append({"fix": p.fix, "predicted step (ms)": None, "speedup": None, "saves": "",
                         "verdict": "", "assumes": f"does not apply: {p.assumes}"})
            continue
        mean = p.fix in ("skip_warmup", "skip_compile")
        measured = float(w.replay.steps["measured_us"].mean()) if mean else w.step_us
        step = p.predicted_mean_us if mean else p.predicted_step_us
        rows.append({"fix": p.fix + (" (mean step)" if mean else ""), "predicted step (ms)": step / 1e3,
                     "speedup": measured / step if step > 0 else None, "saves": pct_text(p.share),
                     "verdict": verdict_role(p, lead), "assumes": p.assumes})
    return pd.DataFrame(rows, columns=["fix", "predicted step (ms)", "speedup", "saves", "verdict", "assumes"])


def verdict_role(p, lead: str | None) -> str:
    """A fix's part in the verdict: "decided it" (``lead``: the fix, or measure, that saves most), "upper bound:
    measure it" (the ``host_compute`` measure, a bound and not a fix), "no: within the profiler's margin" (a
    saving the replay cannot tell from its own error), else "" (ranked by its saving, did not decide)."""
    if p.fix == lead:
        return "decided it"
    if p.measure:
        return "upper bound: measure it"
    return "" if p.decides else "no: within the profiler's margin"


def whatif_text(w) -> str:
    """What the fix table rests on: the median step measured, the replay's error against it, and the rule that
    decided (or why nothing was replayed)."""
    if w.replay.steps.empty:
        return f"No fix was replayed: {w.rule}. The verdict above comes from the share rules."
    e = w.replay.error
    text = (f"Each fix is applied to every full step's dependency graph and the step replayed: the median step, "
            f"{ms_text(w.step_us)}, replays within {e['median']:.1%} (median) and {e['worst']:.1%} (worst) of what "
            f"was measured, so a fix's predicted step is the measured step less the time the replay saves. ")
    verdict = f"The saving decides: {w.rule}." if w.verdict else f"{_sentence(w.rule)} The share rules name the cause."
    return text + verdict
