"""``whatif(trace)``: every fix perfkit gives (``fixes``), applied to each rank's dependency graph and replayed
(``replay``), ranked by the step time it predicts; and the verdict that ranking decides.

A fix's **saving** in a step is the replayed step less the replayed step with the fix; its **predicted step** is
the measured step less that saving. ``predicted_step_us`` is the median of the predicted steps over the full steps of
every rank, beside the median measured step (``step_us``). ``share`` is what the fix saves of a step: of the median
step for a cost that recurs each step, and of all the steps' time together for a one-time cost (``skip_warmup``,
``skip_compile``: a cold first step counts for what it costs, where a median would hide it).

The **verdict** is the cause of the fix with the largest ``share`` (``fixes.FIXES`` gives each fix's cause; the
``host_compute`` measure competes as the cause "host-compute-bound"). Shares within ``TIE_SHARE`` of the largest are
a tie, which the one listed first in ``FIXES`` (the cheaper change) wins. A host-side fix (not ``fixes.GPU_SIDE``) saving less than ``PROFILER_MARGIN`` of
the median step does not decide the verdict where it only brings the step within ``PROFILER_MARGIN`` of the GPU
time the step queues: the profiler's own cost on the host (``perfkit profile`` warns past 10%) may be all of the
host's lead (the H200 bf16 transformer of data/traces/gpu: 8% from CUDA graphs in the profile, GPU-bound at 14.58
ms a step unprofiled). When nothing saves ``MIN_SAVING``,
``verdict`` is "" and the step is bound by what no fix here removes: ``rules.no_fix_verdict`` names it from the
step's shares (``cpu_bound`` owns them).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...results import html_section, html_table, html_text, html_warnings
from ...text import jsonable
from .fixes import FIXES, GPU_SIDE, MEASURES
from .gpu_facts import gpu_facts
from .simulation import TRUSTED_ERROR, replay, simulate, step_times

# A fix saving less than this share of the median step does not decide the verdict: below it the saving is within
# what a rerun of the same step varies by (perfkit rule: the run-to-run spread of the shipped H200 steps is 1-5%).
MIN_SAVING = 0.05
# Savings within this share of the step of the largest are a tie, which the cheaper change wins.
TIE_SHARE = 0.01
# The profiler's cost on the host past which ``perfkit profile`` warns (profiling.timing.OVERHEAD_WARN_PCT).
PROFILER_MARGIN = 0.10
FIX_NAMES = tuple(name for name, _, _ in FIXES)
CAUSES = {name: cause for name, _, cause in FIXES}
# Each fix in the sentence every surface quotes: "median step 4.10 -> 2.90 ms (1.41x) with <phrase>".
PHRASES = {"remove_syncs": "the syncs removed", "pin_copies": "the copies from pinned memory",
           "non_blocking": "non_blocking copies", "dataloader_workers": "the DataLoader's work off the main thread",
           "cuda_graphs": "the launches captured in CUDA graphs", "amp": "bf16 autocast",
           "fuse_elementwise": "the elementwise kernels fused", "overlap_comm": "the collectives overlapped with compute",
           "skip_warmup": "the warm-up left out", "skip_compile": "the compiling left out",
           "host_compute": "no host work of its own", "all_fixes": "every fix that applies"}
# Fixes whose saving a median step hides (one cold step among warm ones): their sentence quotes the mean step.
_BY_MEAN = ("skip_warmup", "skip_compile")


@dataclass(frozen=True)
class Prediction:
    """One fix: ``fix`` (a name of ``FIX_NAMES``), ``cause``, ``applies``, ``assumes`` (what the transform assumed,
    or why it does not apply), ``predicted_step_us`` (median), ``saving_us`` (the median measured step less it),
    ``speedup``, ``share`` (module doc), ``measure`` (True for ``host_compute``: a bound, not a fix), and ``steps``:
    per (rank, step), the predicted step in us. Figures are None where it does not apply."""

    fix: str
    cause: str
    applies: bool
    assumes: str
    predicted_step_us: float | None = None
    saving_us: float | None = None
    speedup: float | None = None
    share: float = 0.0
    measure: bool = False
    decides: bool = True
    predicted_mean_us: float | None = None
    steps: tuple = ()

    def to_json(self) -> dict:
        return {"fix": self.fix, "cause": self.cause, "applies": self.applies, "measure": self.measure,
                "predicted_step_us": self.predicted_step_us, "predicted_mean_us": self.predicted_mean_us,
                "saving_us": self.saving_us, "speedup": self.speedup, "share": self.share if self.applies else None,
                "by_mean": self.fix in _BY_MEAN, ("assumes" if self.applies else "reason"): self.assumes}


@dataclass(frozen=True, eq=False, repr=False)
class WhatIfResult:
    """``step_us``: the median full step measured (``replay`` module doc); ``replay``: the ``ReplayResult`` the
    predictions rest on; ``fixes``: a ``Prediction`` per fix, those that apply first, by predicted step;
    ``all_fixes``: every fix that applies at once; ``verdict`` (the cause of the fix that saves most, "" when none
    saves ``MIN_SAVING``) and ``rule`` (what decided it); ``warnings``."""

    step_us: float
    replay: object
    fixes: tuple
    all_fixes: Prediction | None
    verdict: str
    rule: str
    warnings: tuple

    @property
    def top(self) -> Prediction | None:
        """The fix that saves most, where it saves at least ``MIN_SAVING`` (never the ``host_compute`` measure),
        else None: the prediction every surface quotes."""
        lead = next((p for p in self.fixes if p.applies and not p.measure and p.decides), None)
        return lead if lead is not None and lead.share >= MIN_SAVING else None

    @property
    def lead(self) -> Prediction | None:
        """What decided the verdict: the top fix, or the ``host_compute`` measure where it saves most (a bound on
        what moving the host's own work buys, not a fix); None where nothing saves ``MIN_SAVING``."""
        lead = next((p for p in self.fixes if p.applies and p.decides), None)
        return lead if lead is not None and lead.share >= MIN_SAVING else None

    @property
    def prediction_text(self) -> str:
        """The sentence every surface quotes: the top fix's predicted step ("median step 4.10 -> 2.90 ms (1.41x) with
        the syncs removed"), the bound the ``host_compute`` measure gives where it decided ("at best ..."; a fix
        that saves less is not quoted beside a verdict that says it will not help), what the replay misses when it
        is off, or why there is no prediction."""
        top, lead = self.top, self.lead
        if self.replay.steps.empty:
            return f"no prediction: {self.rule}"
        if lead is not None and lead.measure:
            return (f"at best the median step {_span(self.step_us, lead.predicted_step_us)} ({lead.speedup:.2f}x) "
                    "if the host's own work took no time (a bound, not a fix: moved to the GPU, vectorized or "
                    "taken off the step)") + self._off()
        if top is None:
            return f"no fix perfkit models saves {MIN_SAVING:.0%} of a step"
        return self.fix_text(top.fix) + self._off()

    def fix_text(self, fix: str) -> str:
        """What ``fix`` buys, as the prediction sentence says it: "median step 4.10 -> 2.90 ms (1.41x) with the syncs
        removed" (the mean step for a one-time cost), or why it does not apply."""
        p = self.prediction(fix)
        if not p.applies:
            return f"{PHRASES[fix]}: does not apply ({p.assumes})"
        if fix in _BY_MEAN:
            mean = float(self.replay.steps["measured_us"].mean())
            return (f"mean step {_span(mean, p.predicted_mean_us)} ({mean / max(p.predicted_mean_us, 1e-9):.2f}x) "
                    f"with {PHRASES[fix]}")
        return f"median step {_span(self.step_us, p.predicted_step_us)} ({p.speedup:.2f}x) with {PHRASES[fix]}"

    def _off(self) -> str:
        off = self.replay.not_modeled
        return (f" (the replay is up to {self.replay.error['worst']:.0%} off on {len(off)} step(s): see perfkit "
                "whatif)") if off else ""

    def prediction_json(self) -> dict:
        """The prediction every surface quotes as ``{fix, bound, step_us, predicted_step_us, saving_us, speedup,
        share, assumes, replay_error, text}``: the top fix's, or the ``host_compute`` measure's where it decided
        (``bound`` True: what no host work of its own would give, not a fix); ``{fix: None, text}`` when there is
        none."""
        lead = self.lead if self.lead is not None and self.lead.measure else self.top
        if lead is None:
            return {"fix": None, "text": self.prediction_text}
        return {"fix": lead.fix, "bound": lead.measure, "step_us": self.step_us,
                "predicted_step_us": lead.predicted_step_us, "saving_us": lead.saving_us, "speedup": lead.speedup,
                "share": lead.share, "assumes": lead.assumes, "replay_error": self.replay.error,
                "text": self.prediction_text}

    def prediction(self, fix: str) -> Prediction:
        return next(p for p in self.fixes if p.fix == fix)

    def step_verdicts(self) -> dict:
        """``{(rank, step): verdict}``: each step's verdict by the same rule as the whole trace's, on its own
        savings ("" where nothing saves ``MIN_SAVING`` of it)."""
        measured = dict(zip(zip(self.replay.steps["rank"].astype(int), self.replay.steps["step"].astype(int)),
                            self.replay.steps["measured_us"]))
        deciding = [(p, {(r, s): v for r, s, v in p.steps}) for p in self.fixes if p.applies and p.decides]
        out = {}
        for key, wall in measured.items():
            shares = [(p, (wall - after[key]) / wall if wall > 0 else 0.0) for p, after in deciding]
            ranked = sorted(shares, key=lambda x: (-x[1], FIX_NAMES.index(x[0].fix)))
            best = [p for p, share in ranked if ranked and ranked[0][1] - share <= TIE_SHARE]
            lead = min(best, key=lambda p: FIX_NAMES.index(p.fix)) if best else None
            lead_share = dict((p.fix, sh) for p, sh in ranked).get(lead.fix, 0.0) if lead else 0.0
            out[key] = CAUSES[lead.fix] if lead is not None and lead_share >= MIN_SAVING else ""
        return out

    @property
    def behind_warmup(self) -> str | None:
        """The cause of the fix that saves most after ``skip_warmup`` (what the window shows once warm), else None."""
        rest = next((p for p in self.fixes if p.applies and p.fix != "skip_warmup" and p.share >= MIN_SAVING), None)
        return CAUSES[rest.fix] if rest else None

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([p.to_json() for p in self.fixes])

    def to_json(self) -> dict:
        mean = float(self.replay.steps["measured_us"].mean()) if len(self.replay.steps) else None
        return jsonable({"step_us": self.step_us, "mean_step_us": mean, "top": self.top.fix if self.top else None,
                         "replay_error": self.replay.error,
                         "steps": self.replay.to_json()["steps"], "fixes": [p.to_json() for p in self.fixes],
                         "all_fixes": self.all_fixes.to_json() if self.all_fixes else None, "verdict": self.verdict,
                         "rule": self.rule, "not_modeled": self.replay.to_json()["not_modeled"],
                         "warnings": list(self.warnings)})

    def __repr__(self) -> str:
        top = self.top
        lead = f", {top.fix} {self.step_us / 1e3:.3f} -> {top.predicted_step_us / 1e3:.3f} ms" if top else ""
        return f"<WhatIfResult {self.verdict}{lead}>"

    def _repr_html_(self) -> str:
        return html_section(f"What if: {self.verdict}", html_text(self.rule), html_table(self.to_frame()),
                            html_warnings(self.warnings))


def whatif(trace) -> WhatIfResult:
    """Every fix of ``fixes.FIXES`` replayed on ``trace`` and ranked (module doc), once per trace (shared). A trace
    that cannot be replayed (no GPU events, no full step) lists every fix with that reason and the verdict "".
    """
    return trace.derived("whatif", _whatif)


def _whatif(trace) -> WhatIfResult:
    rep = replay(trace)
    steps = rep.steps
    if steps.empty:
        reason = rep.warnings[0] if rep.warnings else "nothing to replay"
        fixes = tuple(Prediction(name, CAUSES[name], False, reason) for name in FIX_NAMES)
        return WhatIfResult(step_us=float("nan"), replay=rep, fixes=fixes, all_fixes=None, verdict="", rule=reason,
                            warnings=rep.warnings)
    facts = gpu_facts(trace)
    measured = steps["measured_us"].to_numpy()
    base = steps["replay_us"].to_numpy()
    step_us = float(np.median(measured))
    queued_us = float(np.median(steps["queued_us"]))
    predictions, changed = [], {}
    for name, transform, cause in FIXES:
        out = {rank: transform(g, facts) for rank, g in rep.graphs.items()}
        graphs = {rank: r[0] for rank, r in out.items() if r[0] is not None}
        if not graphs:
            predictions.append(Prediction(name, cause, False, next(iter(out.values()))[1]))
            continue
        if name not in MEASURES:
            changed[name] = graphs
        assumes = "; ".join(dict.fromkeys(r[1] for r in out.values() if r[0] is not None))
        p = _predict(name, cause, assumes, rep, graphs, measured, base, step_us)
        predictions.append(replace(p, decides=_decides(p, queued_us, step_us)))
    combined = _combined(rep, facts, changed, measured, base, step_us)
    ranked = sorted(predictions, key=lambda p: (not p.applies, -p.share, FIX_NAMES.index(p.fix)))
    ranked = _break_ties(ranked)
    verdict, rule = decide(ranked)
    return WhatIfResult(step_us=step_us, replay=rep, fixes=tuple(ranked), all_fixes=combined, verdict=verdict,
                        rule=rule, warnings=rep.warnings + _error_warnings(rep))


def _predict(name, cause, assumes, rep, graphs: dict, measured, base, step_us) -> Prediction:
    replayed = _replayed(rep, graphs)
    saving = np.clip(base - replayed, 0.0, measured)
    per_step = measured - saving
    predicted = float(np.median(per_step))
    keys = zip(rep.steps["rank"].astype(int), rep.steps["step"].astype(int), per_step.tolist())
    total = float(measured.sum())
    share = (float(saving.sum()) / total if total > 0 else 0.0) if name in _BY_MEAN else \
        ((step_us - predicted) / step_us if step_us > 0 else 0.0)
    return Prediction(name, cause, True, assumes, predicted_step_us=predicted, saving_us=step_us - predicted,
                      speedup=step_us / predicted if predicted > 0 else None, share=share, measure=name in MEASURES,
                      predicted_mean_us=float(np.mean(per_step)), steps=tuple(keys))


def _replayed(rep, graphs: dict) -> np.ndarray:
    """The replayed step of every row of ``rep.steps`` with the ranks' graphs replaced by ``graphs``."""
    out = rep.steps["replay_us"].to_numpy().copy()
    ranks = rep.steps["rank"].to_numpy()
    for rank, g in graphs.items():
        out[ranks == rank] = step_times(g, simulate(g))["step_us"].to_numpy()
    return out


def _combined(rep, facts, changed: dict, measured, base, step_us) -> Prediction | None:
    """Every fix that applies, applied one after the other in ``FIXES`` order."""
    if not changed:
        return None
    names = [name for name, _, _ in FIXES if name in changed]
    graphs = _applied(rep, facts, names)
    return _predict("all_fixes", "", ", ".join(names), rep, graphs, measured, base, step_us)


def _applied(rep, facts, names) -> dict:
    """Each rank's graph with the fixes ``names`` applied one after the other in ``FIXES`` order (a fix that does
    not apply on a rank leaves its graph as it is)."""
    graphs = {}
    for rank, g in rep.graphs.items():
        for name, transform, _ in FIXES:
            if name in names and name not in MEASURES:
                fixed, _ = transform(g, facts)
                g = fixed if fixed is not None else g
        graphs[rank] = g
    return graphs


def combine(trace, names) -> Prediction:
    """The fixes ``names`` (of ``FIX_NAMES``, measures excluded) applied together and replayed: the prediction for a
    change that makes several at once (DataLoader workers that also pin their batches: ``dataloader_workers`` and
    ``pin_copies``). Its ``fix`` is the names joined by "+"; ``applies`` is False, with the reason, where none of
    them applies."""
    names = tuple(dict.fromkeys(names))
    unknown = [n for n in names if n not in FIX_NAMES or n in MEASURES]
    if unknown or not names:
        raise ValueError(f"unknown fix(es) {', '.join(unknown) or '(none given)'}: choose from "
                         f"{', '.join(n for n in FIX_NAMES if n not in MEASURES)}")
    result = whatif(trace)
    label = "+".join(n for n in FIX_NAMES if n in names)
    applying = [n for n in FIX_NAMES if n in names and result.prediction(n).applies]
    if not applying:
        reasons = "; ".join(f"{n}: {result.prediction(n).assumes}" for n in FIX_NAMES if n in names)
        return Prediction(label, "", False, reasons)
    rep = result.replay
    graphs = _applied(rep, gpu_facts(trace), applying)
    assumes = "; ".join(result.prediction(n).assumes for n in applying)
    return _predict(label, "", assumes, rep, graphs, rep.steps["measured_us"].to_numpy(),
                    rep.steps["replay_us"].to_numpy(), result.step_us)


def _break_ties(ranked: list) -> list:
    """Fixes whose shares lie within ``TIE_SHARE`` of the largest come in ``FIXES`` order; fixes that do not decide
    (``Prediction.decides``) come after those that do."""
    deciding = [p for p in ranked if p.applies and p.decides]
    if not deciding:
        return ranked
    best = deciding[0].share
    tied = [p for p in deciding if best - p.share <= TIE_SHARE]
    rest = [p for p in ranked if p not in tied]
    return sorted(tied, key=lambda p: FIX_NAMES.index(p.fix)) + rest


def _decides(p: Prediction, gpu_floor: float, step_us: float) -> bool:
    """Whether ``p`` may decide the verdict (module doc: the profiler's margin)."""
    if p.fix in GPU_SIDE or not step_us or p.saving_us >= PROFILER_MARGIN * step_us:
        return True
    return p.predicted_step_us > (1 + PROFILER_MARGIN) * gpu_floor


def decide(ranked: list) -> tuple[str, str]:
    """(verdict, rule) from the ranked predictions (module doc): the verdict is "" when nothing saves
    ``MIN_SAVING``."""
    lead = next((p for p in ranked if p.applies and p.decides), None)
    if lead is not None and lead.share >= MIN_SAVING:
        what = "the host's own work taking no time" if lead.measure else lead.fix
        of = "of the steps' time" if lead.fix in _BY_MEAN else "of the median step"
        return CAUSES[lead.fix], f"{what} saves most: {lead.share:.0%} {of} (>= {MIN_SAVING:.0%})"
    return "", f"no fix saves {MIN_SAVING:.0%} of a step"


def _span(before_us: float, after_us: float) -> str:
    """"4.10 -> 2.90 ms"; in us for a step under 10 us (a 0.13 us step is not "0.00 -> 0.00 ms")."""
    if before_us < 10:
        return f"{before_us:.2f} -> {after_us:.2f} us"
    return f"{_ms(before_us)} -> {_ms(after_us)} ms"


def _ms(us: float) -> str:
    return f"{us / 1e3:,.2f}" if us < 1e7 else f"{us / 1e3:,.0f}"


def _error_warnings(rep) -> tuple:
    bad = {k: v for k, v in rep.not_modeled.items()}
    if not bad:
        return ()
    worst = rep.error["worst"]
    what = sorted({w for items in bad.values() for w, _ in items})
    return (f"{len(bad)} step(s) replay more than {TRUSTED_ERROR:.0%} away from what was measured (worst "
            f"{worst:.0%}): their predictions rest on a model that misses {'; '.join(what) or 'something'}",)
