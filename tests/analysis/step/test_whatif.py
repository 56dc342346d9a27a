"""The rules of ``perfkit.analysis.step.whatif`` on small evidence: the saving that decides a verdict (MIN_SAVING), a
tie (TIE_SHARE), the profiler's margin (PROFILER_MARGIN), a one-time cost judged on the window, one row each side
of each line; and the sentence every surface quotes. No ../shared."""
from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.step import whatif as w
from perfkit.analysis.step.whatif import Prediction, decide, whatif
from perfkit.trace import load_trace

from tracebuilder import TraceBuilder


def p(fix, share, *, applies=True, measure=False, decides=True, step=1_000.0):
    return Prediction(fix, w.CAUSES[fix], applies, "assumed", predicted_step_us=step * (1 - share),
                      saving_us=step * share, speedup=1 / (1 - share), share=share, measure=measure, decides=decides)


def ranked(*predictions):
    out = sorted(predictions, key=lambda q: (not q.applies, -q.share, w.FIX_NAMES.index(q.fix)))
    return w._break_ties(out)


@pytest.mark.parametrize("share, verdict", [(0.05, "sync-bound"), (0.0499, "")])  # MIN_SAVING
def test_a_fix_decides_the_verdict_from_five_percent_of_a_step(share, verdict):
    assert decide(ranked(p("remove_syncs", share), p("cuda_graphs", 0.01)))[0] == verdict


@pytest.mark.parametrize("gap, verdict", [(0.0099, "sync-bound"), (0.0101, "launch-bound")])  # TIE_SHARE
def test_a_tie_goes_to_the_cheaper_change(gap, verdict):
    # remove_syncs comes before cuda_graphs in FIXES: within 1% of the step it wins though it saves less
    assert decide(ranked(p("remove_syncs", 0.30 - gap), p("cuda_graphs", 0.30)))[0] == verdict


def test_the_host_compute_measure_names_a_cause_but_is_never_the_prediction():
    r = w.WhatIfResult(step_us=1_000.0, replay=None, fixes=tuple(ranked(p("host_compute", 0.6, measure=True),
                                                                      p("remove_syncs", 0.2))),
                       all_fixes=None, verdict="host-compute-bound", rule="", warnings=())
    assert decide(list(r.fixes))[0] == "host-compute-bound" and r.top.fix == "remove_syncs"


@pytest.mark.parametrize("saving, floor, decides", [
    (0.099, 900.0, False),   # under the margin, landing within 10% of the GPU's own time: the profiler's cost
    (0.10, 900.0, True),     # at the margin
    (0.099, 818.0, True),    # predicted 901 us, more than 10% above the GPU floor: the host's lead is real
])
def test_a_host_fix_within_the_profilers_margin_of_the_gpu_does_not_decide(saving, floor, decides):
    q = p("cuda_graphs", saving)
    assert w._decides(q, floor, 1_000.0) is decides


def test_gpu_side_fixes_always_decide():
    assert w._decides(p("amp", 0.01), 1_000.0, 1_000.0) is True


def test_a_fix_that_does_not_decide_ranks_after_those_that_do():
    order = ranked(p("cuda_graphs", 0.08, decides=False), p("remove_syncs", 0.06))
    assert order[0].fix == "remove_syncs" and decide(order)[0] == "sync-bound"


def test_nothing_that_applies_decides_nothing():
    assert decide(ranked(p("amp", 0.5, applies=False)))[0] == ""


def load(tmp_path, b, name="t.json"):
    return load_trace(b.write(tmp_path / name), use_cache=False)


def sync_steps(n=3):
    """Steps that wait 795 us for an 800 us kernel, then do 150 us of their own: without the sync, the GPU's
    800 us are the step."""
    b = TraceBuilder()
    for s in range(n):
        t0 = s * 1_000
        b.step(s, t0, 1_000)
        b.launch("gemm", t0 + 10, 10, t0 + 30, 800)
        b.sync("cudaStreamSynchronize", t0 + 40, 795)
        b.cpu_op("aten::add", t0 + 835, 150)
    return b


def test_each_step_gets_the_verdict_of_its_own_saving(tmp_path):
    r = whatif(load(tmp_path, sync_steps()))
    assert r.verdict == "sync-bound" and r.step_verdicts() == {(0, s): "sync-bound" for s in range(3)}
    assert r.top.fix == "remove_syncs" and r.top.predicted_step_us == pytest.approx(800.0)


def test_the_sentence_quotes_the_median_step_its_prediction_and_the_fix(tmp_path):
    r = whatif(load(tmp_path, sync_steps()))
    assert r.prediction_text == "median step 1.00 -> 0.80 ms (1.25x) with the syncs removed"
    j = r.prediction_json()
    assert j["fix"] == "remove_syncs" and j["predicted_step_us"] == pytest.approx(800.0) and j["replay_error"]["worst"] == 0


def test_a_one_time_cost_is_said_on_the_mean_step(tmp_path):
    b = TraceBuilder()
    for s in range(7):
        b.step(s, s * 30_000, 30_000)
        b.cpu_op("aten::conv2d", s * 30_000 + 10, 29_000 if s == 0 else 1_000)
        b.launch("k", s * 30_000 + 29_500, 10, s * 30_000 + 29_520, 100)
    r = whatif(load(tmp_path, b))
    assert r.verdict == "" or r.top.fix == "skip_warmup"  # 28 ms of 210 ms: 13% of the window, 0% of the median
    assert r.prediction("skip_warmup").share == pytest.approx(28_000 / 210_000)
    assert r.prediction("skip_warmup").saving_us == pytest.approx(0.0)
    assert r.prediction_text.startswith("mean step 30.00 -> 26.00 ms (1.15x) with the warm-up left out")


def test_a_trace_that_cannot_be_replayed_lists_every_fix_with_why(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.cpu_op("aten::add", 10, 900)
    r = whatif(load(tmp_path, b))
    assert r.verdict == "" and all(not q.applies for q in r.fixes) and r.prediction_text.startswith("no prediction")
    assert len(r.fixes) == len(w.FIX_NAMES)


def test_fixes_combined_are_replayed_together(tmp_path):
    trace = load(tmp_path, sync_steps())
    both = w.combine(trace, ("cuda_graphs", "remove_syncs"))
    assert both.fix == "remove_syncs+cuda_graphs" and both.applies
    # one launch a step: no CUDA graph region changes anything, so the pair buys what removing the sync buys
    assert both.predicted_step_us == pytest.approx(whatif(trace).prediction("remove_syncs").predicted_step_us)


def test_combining_fixes_none_of_which_applies_says_why_each_does_not(tmp_path):
    none = w.combine(load(tmp_path, sync_steps()), ("amp", "pin_copies"))
    assert not none.applies and none.assumes.startswith("pin_copies: no copy from pageable memory; amp: ")


@pytest.mark.parametrize("names", [("remove_syncs", "host_compute"), ("remove_sync",), ()])
def test_combining_an_unknown_fix_or_a_measure_is_refused_with_the_names_to_choose_from(tmp_path, names):
    with pytest.raises(ValueError, match="unknown fix.*choose from skip_warmup, skip_compile, pin_copies"):
        w.combine(load(tmp_path, sync_steps()), names)


def test_where_the_hosts_own_work_decides_the_sentence_is_its_bound_not_a_smaller_fix(tmp_path):
    b = TraceBuilder()
    for s in range(3):  # 700 us of an op that launches nothing, then two launches 100 us apart: GPU idle
        t0 = s * 1_000
        b.step(s, t0, 1_000)
        b.cpu_op("aten::empty", t0 + 10, 700)
        b.launch("k", t0 + 750, 10, t0 + 765, 20)
        b.launch("k", t0 + 850, 10, t0 + 865, 20)
    r = whatif(load(tmp_path, b))
    assert r.verdict == "host-compute-bound" and r.lead.fix == "host_compute"
    assert r.prediction_text.startswith("at best the median step 1.00 -> 0.30 ms (3.33x) if the host's own work took no time")
    j = r.prediction_json()
    assert j["fix"] == "host_compute" and j["bound"] and j["predicted_step_us"] == pytest.approx(300.0)
    assert r.top is None or r.top.fix != "host_compute"


@pytest.mark.parametrize("before, after, text", [
    (4_100.0, 2_900.0, "4.10 -> 2.90 ms"), (10.0, 5.0, "0.01 -> 0.01 ms"), (9.99, 5.0, "9.99 -> 5.00 us"),
    (0.13, 0.07, "0.13 -> 0.07 us"), (2.5e7, 1.2e7, "25,000 -> 12,000 ms"), (1e7, 5e6, "10,000 -> 5,000.00 ms")])
def test_a_step_under_10_us_is_said_in_us(before, after, text):
    assert w._span(before, after) == text


# -- the result on a replay built in the test: the sentence, the JSON, each step's verdict -------------------------
def fake_replay(measured=(1_000.0, 1_000.0, 1_000.0), not_modeled=None, worst=0.0):
    steps = pd.DataFrame({"rank": [0] * len(measured), "step": list(range(len(measured))),
                          "measured_us": list(measured), "replay_us": list(measured)})
    return SimpleNamespace(steps=steps, not_modeled=not_modeled or {}, error={"worst": worst},
                           to_json=lambda: {"steps": ["the steps"], "not_modeled": ["not modeled"]})


def stepped(fix, predicted, *, applies=True, measure=False, decides=True, step_us=1_000.0, share=None):
    """A prediction whose per-step predictions are ``predicted`` (us, steps 0, 1, ...)."""
    per = tuple((0, s, v) for s, v in enumerate(predicted))
    median = float(np.median(predicted))
    share = (step_us - median) / step_us if share is None else share
    return Prediction(fix, w.CAUSES[fix], applies, "assumed", predicted_step_us=median, saving_us=step_us - median,
                      speedup=step_us / median if median else None, share=share, measure=measure, decides=decides,
                      predicted_mean_us=float(np.mean(predicted)), steps=per)


def result(*fixes, rep=None, verdict="", rule="a rule", step_us=1_000.0):
    rep = fake_replay() if rep is None else rep
    return w.WhatIfResult(step_us=step_us, replay=rep, fixes=tuple(ranked(*fixes)), all_fixes=None, verdict=verdict,
                          rule=rule, warnings=("a warning",))


def test_a_replay_off_on_some_steps_says_so_in_the_sentence_and_warns():
    rep = fake_replay(not_modeled={(0, 1): [("a copy stream", 0.3)], (0, 2): [("a copy stream", 0.2), ("a sync", 0.1)]},
                      worst=0.31)
    r = result(stepped("remove_syncs", [800.0] * 3), rep=rep)
    assert r.prediction_text == ("median step 1.00 -> 0.80 ms (1.25x) with the syncs removed (the replay is up to 31% off "
                                 "on 2 step(s): see perfkit whatif)")
    assert w._error_warnings(rep) == (
        "2 step(s) replay more than 10% away from what was measured (worst 31%): their predictions rest on a model "
        "that misses a copy stream; a sync",)
    assert w._error_warnings(fake_replay()) == ()


def test_the_sentence_without_a_fix_that_saves_five_percent():
    r = result(stepped("remove_syncs", [960.0] * 3))
    assert r.top is None and r.lead is None and r.prediction_text == "no fix perfkit models saves 5% of a step"
    assert r.prediction_json() == {"fix": None, "text": "no fix perfkit models saves 5% of a step"}
    assert repr(r) == "<WhatIfResult >"


def test_the_json_and_the_table_of_a_result():
    r = result(stepped("remove_syncs", [800.0, 800.0, 800.0]), stepped("amp", [900.0] * 3),
               stepped("pin_copies", [1_000.0] * 3, applies=False), verdict="sync-bound", rule="remove_syncs saves most")
    j = r.to_json()
    assert (j["step_us"], j["mean_step_us"], j["top"], j["verdict"], j["rule"]) == (
        1_000.0, 1_000.0, "remove_syncs", "sync-bound", "remove_syncs saves most")
    assert j["steps"] == ["the steps"] and j["not_modeled"] == ["not modeled"] and j["warnings"] == ["a warning"]
    assert j["all_fixes"] is None and [f["fix"] for f in j["fixes"]] == ["remove_syncs", "amp", "pin_copies"]
    assert j["replay_error"] == {"worst": 0.0}
    assert r.to_frame()["fix"].tolist() == ["remove_syncs", "amp", "pin_copies"]
    assert repr(r) == "<WhatIfResult sync-bound, remove_syncs 1.000 -> 0.800 ms>"
    html = r._repr_html_()
    assert "What if: sync-bound" in html and "remove_syncs saves most" in html and "a warning" in html
    j = r.prediction_json()
    assert (j["fix"], j["bound"], j["step_us"], j["predicted_step_us"], j["saving_us"], j["share"], j["assumes"]) == (
        "remove_syncs", False, 1_000.0, 800.0, 200.0, pytest.approx(0.2), "assumed")
    assert j["speedup"] == pytest.approx(1.25) and j["replay_error"] == {"worst": 0.0} and j["text"] == r.prediction_text


def test_an_empty_replay_json_has_no_mean_step():
    rep = fake_replay(measured=())
    r = w.WhatIfResult(step_us=float("nan"), replay=rep, fixes=(), all_fixes=None, verdict="", rule="no steps",
                       warnings=())
    assert r.to_json()["mean_step_us"] is None and r.prediction_text == "no prediction: no steps"


def test_a_prediction_says_what_it_assumes_or_why_it_does_not_apply():
    assert stepped("skip_warmup", [800.0]).to_json() == {
        "fix": "skip_warmup", "cause": w.CAUSES["skip_warmup"], "applies": True, "measure": False,
        "predicted_step_us": 800.0, "predicted_mean_us": 800.0, "saving_us": 200.0, "speedup": 1.25,
        "share": pytest.approx(0.2), "by_mean": True, "assumes": "assumed"}
    off = Prediction("amp", "GPU-bound", False, "no FP32 matrix work").to_json()
    assert off["share"] is None and off["reason"] == "no FP32 matrix work" and "assumes" not in off
    assert off["by_mean"] is False


def test_each_step_gets_its_own_verdict_with_ties_to_the_cheaper_change():
    # step 0: remove_syncs saves 30%, cuda_graphs 30.9% (a tie: the syncs, listed first); step 1: cuda_graphs saves
    # 31.1% against 30% (no tie); step 2: nothing saves 5%; a fix that does not decide is never a step's verdict
    r = result(stepped("remove_syncs", [700.0, 700.0, 960.0]), stepped("cuda_graphs", [691.0, 689.0, 990.0]),
               stepped("amp", [100.0, 100.0, 100.0], decides=False), stepped("pin_copies", [0.0] * 3, applies=False))
    assert r.step_verdicts() == {(0, 0): "sync-bound", (0, 1): "launch-bound", (0, 2): ""}


def test_a_step_that_takes_no_time_has_no_verdict():
    r = result(stepped("remove_syncs", [0.0, 700.0, 700.0]), rep=fake_replay(measured=(0.0, 1_000.0, 1_000.0)))
    assert r.step_verdicts() == {(0, 0): "", (0, 1): "sync-bound", (0, 2): "sync-bound"}


@pytest.mark.parametrize("fixes, behind", [
    ((("skip_warmup", 900.0), ("remove_syncs", 950.0)), "sync-bound"),  # what the window shows once warm
    ((("skip_warmup", 900.0), ("remove_syncs", 951.0)), None),           # under MIN_SAVING
])
def test_what_is_behind_the_warm_up(fixes, behind):
    r = result(*(stepped(f, [v] * 3) for f, v in fixes), stepped("amp", [0.0] * 3, applies=False))
    assert r.behind_warmup == behind


def test_a_one_time_cost_sentence_quotes_the_mean_step():
    r = result(stepped("skip_warmup", [1_000.0, 1_000.0, 100.0], share=1_800 / 3_900), rep=fake_replay(measured=(1_000.0, 1_000.0, 1_900.0)))
    assert r.prediction_text == "mean step 1.30 -> 0.70 ms (1.86x) with the warm-up left out"


# -- the rule's text, a tie at TIE_SHARE, the profiler's margin at its line ---------------------------------------
@pytest.mark.parametrize("lead, rule", [
    (p("remove_syncs", 0.3), "remove_syncs saves most: 30% of the median step (>= 5%)"),
    (p("host_compute", 0.6, measure=True), "the host's own work taking no time saves most: 60% of the median step "
                                           "(>= 5%)"),
    (p("skip_warmup", 0.13), "skip_warmup saves most: 13% of the steps' time (>= 5%)"),
    (p("remove_syncs", 0.01), "no fix saves 5% of a step"),
])
def test_the_rule_says_what_saves_most_and_of_what(lead, rule):
    assert decide([lead])[1] == rule


def test_shares_exactly_tie_share_apart_are_a_tie():
    assert [q.fix for q in ranked(p("cuda_graphs", 0.01), p("remove_syncs", 0.0))] == ["remove_syncs", "cuda_graphs"]


def test_a_host_fix_landing_exactly_at_the_margin_above_the_gpu_does_not_decide():
    q = Prediction("cuda_graphs", "launch-bound", True, "", predicted_step_us=132.0, saving_us=8.0)
    assert w._decides(q, 120.0, 140.0) is False  # 132 us is 1.1 x 120 us: not above it


# -- the arithmetic of a prediction, on replayed steps given by the test -----------------------------------------
def predict(monkeypatch, name, measured, replayed, base=None):
    measured = np.asarray(measured, dtype=float)
    base = measured.copy() if base is None else np.asarray(base, dtype=float)
    monkeypatch.setattr(w, "_replayed", lambda rep, graphs: np.asarray(replayed, dtype=float))
    rep = fake_replay(measured=tuple(measured))
    return w._predict(name, w.CAUSES[name], "assumed", rep, {}, measured, base, float(np.median(measured)))


def test_a_saving_is_never_below_zero_nor_above_the_measured_step(monkeypatch):
    q = predict(monkeypatch, "remove_syncs", [1_000.0, 1_000.0, 1_000.0], [1_200.0, 600.0, -500.0])
    assert [v for _, _, v in q.steps] == [1_000.0, 600.0, 0.0]  # slower: no saving; more than the step: all of it
    assert all(type(r) is int and type(s) is int for r, s, _ in q.steps)
    assert (q.cause, q.predicted_step_us, q.saving_us, q.speedup, q.share) == ("sync-bound", 600.0, 400.0,
                                                                               pytest.approx(1_000 / 600), 0.4)
    assert q.predicted_mean_us == pytest.approx(1_600 / 3) and not q.measure and q.applies


@pytest.mark.parametrize("name, measured, replayed, share, speedup", [
    ("remove_syncs", [0.0], [0.0], 0.0, None),            # a step of no time: no share, no speedup
    ("remove_syncs", [0.5], [0.0], 1.0, None),             # under a microsecond, all of it saved
    ("remove_syncs", [0.5], [0.25], 0.5, 2.0),
    ("skip_warmup", [0.0, 0.0], [0.0, 0.0], 0.0, None),   # one-time costs: of the steps' time, none here
    ("skip_warmup", [0.5, 0.5], [0.0, 0.5], 0.5, 2.0),    # per step 0 and 0.5 us: median 0.25
])
def test_shares_and_speedups_of_tiny_steps(monkeypatch, name, measured, replayed, share, speedup):
    q = predict(monkeypatch, name, measured, replayed)
    assert q.share == pytest.approx(share) and (q.speedup == pytest.approx(speedup) if speedup else q.speedup is None)


# -- whatif on a trace: every fix listed, ranked, combined ---------------------------------------------------------
def test_the_fixes_come_applying_first_and_all_of_them_combined(tmp_path):
    r = whatif(load(tmp_path, sync_steps()))
    applies = [q.applies for q in r.fixes]
    assert applies == sorted(applies, reverse=True) and sorted(q.fix for q in r.fixes) == sorted(w.FIX_NAMES)
    assert all(q.cause == w.CAUSES[q.fix] and q.applies in (True, False) for q in r.fixes)
    syncs = r.prediction("remove_syncs")
    assert syncs.assumes and r.rule == "remove_syncs saves most: 20% of the median step (>= 5%)"
    assert r.warnings == ()
    changed = [q.fix for q in r.fixes if q.applies and not q.measure]
    assert r.all_fixes is not None and (r.all_fixes.fix, r.all_fixes.cause) == ("all_fixes", "")
    assert r.all_fixes.assumes == ", ".join(n for n in w.FIX_NAMES if n in changed)
    assert r.all_fixes.predicted_step_us == pytest.approx(800.0)
    assert whatif(load(tmp_path, sync_steps())).all_fixes is not None and r.to_json()["all_fixes"]["fix"] == "all_fixes"


def test_a_trace_that_cannot_be_replayed_says_why_for_each_fix(tmp_path):
    b = TraceBuilder()
    b.step(0, 0, 1_000)
    b.cpu_op("aten::add", 10, 900)
    r = whatif(load(tmp_path, b))
    reason = r.replay.warnings[0] if r.replay.warnings else "nothing to replay"
    assert [q.fix for q in r.fixes] == list(w.FIX_NAMES) and all(q.applies is False for q in r.fixes)
    assert all(q.cause == w.CAUSES[q.fix] and q.assumes == reason for q in r.fixes)
    assert r.rule == reason and r.warnings == r.replay.warnings and np.isnan(r.step_us)


def test_fixes_combined_say_what_each_assumes(tmp_path):
    trace = load(tmp_path, sync_steps())
    r = whatif(trace)
    both = w.combine(trace, ("cuda_graphs", "remove_syncs"))
    applying = [n for n in ("remove_syncs", "cuda_graphs") if r.prediction(n).applies]
    assert both.cause == "" and both.assumes == "; ".join(r.prediction(n).assumes for n in applying)
    none = w.combine(trace, ("amp", "pin_copies"))
    assert (none.fix, none.cause, none.applies) == ("pin_copies+amp", "", False)


@pytest.mark.parametrize("names, listed", [(("remove_sync", "amp"), "remove_sync"), ((), "(none given)")])
def test_combining_says_which_names_are_unknown(tmp_path, names, listed):
    with pytest.raises(ValueError, match=rf"^unknown fix\(es\) {re.escape(listed)}: choose from skip_warmup, "):
        w.combine(load(tmp_path, sync_steps()), names)


def test_each_steps_verdict_has_integer_keys_and_a_saving_at_min_saving_decides():
    r = result(stepped("remove_syncs", [950.0, 1_000.0, 1_000.0]))
    verdicts = r.step_verdicts()
    assert verdicts == {(0, 0): "sync-bound", (0, 1): "", (0, 2): ""}  # 5% of the step exactly
    assert all(type(k) is int for key in verdicts for k in key)


def test_a_step_under_a_microsecond_gets_its_verdict_and_no_fix_none():
    r = result(stepped("remove_syncs", [0.0, 1_000.0, 1_000.0]), rep=fake_replay(measured=(0.5, 1_000.0, 1_000.0)))
    assert r.step_verdicts()[(0, 0)] == "sync-bound"
    assert result(stepped("amp", [0.0] * 3, applies=False)).step_verdicts() == {(0, s): "" for s in range(3)}


def test_the_json_holds_every_fix_combined():
    r = w.WhatIfResult(step_us=1_000.0, replay=fake_replay(), fixes=(stepped("remove_syncs", [800.0] * 3),),
                       all_fixes=stepped("remove_syncs", [700.0] * 3), verdict="", rule="", warnings=())
    assert r.to_json()["all_fixes"]["predicted_step_us"] == 700.0
    assert "remove_syncs" in r._repr_html_()  # the table of fixes


def test_a_replay_off_for_reasons_it_cannot_name_says_something():
    assert w._error_warnings(fake_replay(not_modeled={(0, 0): []}, worst=0.5))[0].endswith("misses something")
