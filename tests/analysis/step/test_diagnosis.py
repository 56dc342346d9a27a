"""``analysis.step.diagnosis``: the cause named beside the verdict, the per-step share rows, the three numbers
behind each verdict, and what ran outside the profiled steps, each from small synthetic evidence; then the diagnosis
put together (``diagnose``, ``verdict_line``, the fixes, the prediction, the JSON and HTML) on fakes of the analyses it
reads (cpu_bound, syncs, hotspots, kernels, whatif), which refuse a call without the trace."""
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.step import diagnosis as dg
from perfkit.analysis.step.diagnosis import (SHARES, _numbers, _step_rows, outside_note, outside_steps, second_cause,
                                             with_prediction)
from perfkit.analysis.step.rules import LAUNCH_MIN_PER_STEP, QUEUED_OVER_WALL, SECOND_CAUSE_SHARE, SYNCS_BEFORE_GRAPHS
from perfkit.errors import PerfkitError
from perfkit.results import Finding

EDGE = SECOND_CAUSE_SHARE


def _e(**shares) -> dict:
    """Evidence with every cause at 0 but ``shares`` (a launch-bound step's launches by default)."""
    base = {"gpu_busy_share": 0.2, "sync_share": 0.0, "sync_comm_share": 0.0, "dataloader_idle_share": 0.0,
            "issuing_idle_share": 0.0, "own_work_idle_share": 0.0, "comm_exposed_share": 0.0,
            "launches_per_step": LAUNCH_MIN_PER_STEP}
    return {**base, **shares}


def _sync(count=0, blocked_us=0.0, steps=1, confirmed=True):
    return SimpleNamespace(total={"steps": steps, "in_steps": {"count": count, "blocked_us": blocked_us},
                                  "gpu_confirmed": confirmed})


@pytest.mark.parametrize("verdict, e, sync, says", [
    ("launch-bound", _e(dataloader_idle_share=EDGE), _sync(), "DataLoader 10% of the step with the GPU idle"),
    ("launch-bound", _e(dataloader_idle_share=EDGE - 0.001), _sync(), ""),
    ("sync-bound", _e(dataloader_idle_share=0.3, own_work_idle_share=0.4), _sync(),
     "the host's own work 40% of the step with the GPU idle"),                                     # the larger one
    ("input-bound", _e(comm_exposed_share=0.2), _sync(), "collectives not under compute 20% of the step"),
    ("input-bound", _e(dataloader_idle_share=0.9), _sync(), ""),                                   # the verdict itself
    ("input-bound", _e(sync_share=0.3, gpu_busy_share=0.5), _sync(2, 600.0, 2),
     "1 sync point(s) per step, 0.30 ms blocked each step"),
    ("input-bound", _e(sync_share=0.3, gpu_busy_share=0.95), _sync(2, 600.0, 2), ""),            # GPU idles 5% only
    ("input-bound", _e(sync_share=0.3, sync_comm_share=0.25, gpu_busy_share=0.1), _sync(), ""),  # collective waits
    ("input-bound", _e(issuing_idle_share=0.3, own_work_idle_share=0.2), _sync(),
     "the host issuing launches 30% of the step with the GPU idle"),
    ("input-bound", _e(issuing_idle_share=0.3, own_work_idle_share=0.31), _sync(),                # not launch-bound
     "the host's own work 31% of the step with the GPU idle"),
    ("input-bound", _e(issuing_idle_share=0.3, launches_per_step=LAUNCH_MIN_PER_STEP - 1), _sync(), ""),
    ("launch-bound", _e(), _sync(SYNCS_BEFORE_GRAPHS * 3, 30.0, 3),
     "4 sync point(s) per step, 0.01 ms blocked each step: a CUDA graph captures only the work between two syncs"),
    ("launch-bound", _e(), _sync(SYNCS_BEFORE_GRAPHS * 3 - 1, 30.0, 3), ""),
    ("launch-bound", _e(), _sync(SYNCS_BEFORE_GRAPHS, 30.0, 1, confirmed=False), ""),            # CPU scalar reads
    ("input-bound", _e(), _sync(SYNCS_BEFORE_GRAPHS * 10, 30.0, 1), ""),                          # only launch-bound
    ("warm-up", _e(dataloader_idle_share=0.5), _sync(), ""),
    ("CPU-only trace", _e(own_work_idle_share=0.5), _sync(), ""),
    ("GPU activity not recorded", _e(own_work_idle_share=0.5), _sync(), ""),
    ("host activity not recorded", _e(own_work_idle_share=0.5), _sync(), ""),
    ("sync-bound", _e(sync_share=0.5, gpu_busy_share=0.1), _sync(2, 600.0, 2), ""),               # each its own
    ("launch-bound", _e(issuing_idle_share=0.5), _sync(), ""),
    ("host-compute-bound", _e(own_work_idle_share=0.5), _sync(), ""),
    ("communication-bound", _e(comm_exposed_share=0.5), _sync(), ""),
    ("launch-bound", _e(dataloader_idle_share=0.3, comm_exposed_share=0.3), _sync(),
     "DataLoader 30% of the step"),                                                                 # a tie: the first
    ("input-bound", _e(sync_share=0.3, gpu_busy_share=0.1), _sync(1, 12_345.0, 1),
     "1 sync point(s) per step, 12.35 ms blocked each step"),
    ("launch-bound", _e(dataloader_idle_share=np.nan, own_work_idle_share=0.2), _sync(),
     "the host's own work 20% of the step with the GPU idle"),                                      # NaN is no cause
])
def test_second_cause_names_the_largest_other_cause_past_its_share(verdict, e, sync, says):
    got = second_cause(verdict, e, sync)
    assert got.startswith(says) if says else got == ""


def test_second_cause_of_a_step_without_steps_counts_one():
    assert second_cause("launch-bound", _e(), _sync(SYNCS_BEFORE_GRAPHS, 2000.0, 0)).startswith(
        "4 sync point(s) per step, 2.00 ms blocked each step")


def _steps(**over) -> pd.DataFrame:
    row = {"rank": 0, "step": 3, "verdict": "input-bound", "wall_us": 1000.0}
    row.update({f"{k}_us": 80.0 for k in SHARES})
    row.update({"warmup_us": 200.0, **over})
    return pd.DataFrame([row])


@pytest.mark.parametrize("over, key, share", [
    ({}, "dataloader", 0.1),                                      # 80 us of the 800 us left after warm-up
    ({}, "warmup", 0.2),                                          # warm-up is of the whole step
    ({"dataloader_warmup_us": 40.0}, "dataloader", 0.05),         # its warm-up part taken out
    ({"warmup_us": 1000.0}, "dataloader", np.nan),                # nothing left after warm-up
    ({"wall_us": 0.0, "warmup_us": 0.0}, "warmup", np.nan),       # an empty window
    ({"wall_us": 0.0, "warmup_us": 5.0}, "warmup", np.nan),       # no window: no share, not infinity
    ({"wall_us": 0.5, "warmup_us": 0.25}, "warmup", 0.5),         # under a microsecond is a window
    ({"warmup_us": 999.5, "dataloader_us": 0.25}, "dataloader", 0.5),
])
def test_step_rows_are_shares_of_the_step_less_its_warm_up(over, key, share):
    rows = _step_rows(_steps(**over))
    assert list(rows.columns[:4]) == ["rank", "step", "verdict", "wall_us"]
    assert rows[f"{key}_share"].iloc[0] == pytest.approx(share, nan_ok=True)


def _overall(**over) -> dict:
    o = {"steps": 4, "wall_us": 40_000.0, "gpu_busy_pct": 37.4, "compile_us": 2_500_000.0, "warmup_us": 3_000.0,
         "kernels": 1234, "python_us": 1000.0, "untraced_us": 0.0}
    return {**o, **over}


def _result(**over):
    full = pd.DataFrame({"queued_gpu_us": [1.0], "wall_us": [10_000.0]})
    host_ops = pd.DataFrame({"name": ["aten::copy_"], "total_us": [20_000.0]})
    base = dict(full_steps=full, host_ops=host_ops, warmup=pd.DataFrame({"name": ["a"], "cat": ["cpu_op"], "dur_us": [1.0]}),
                devices={0: "H100", 1: "H100"})
    return SimpleNamespace(**{**base, **over})


EVIDENCE = _e(launches_per_step=412.0, median_kernel_us=6.25, issuing_idle_share=0.5, comm_exposed_share=0.2,
              sync_share=0.3, dataloader_share=0.6, compile_share=0.7, warmup_share=0.8, queue_delay_us=2_500.0,
              host_busy_share=0.9)


@pytest.mark.parametrize("verdict, labels, first_text", [
    ("launch-bound", ["launches per step", "median kernel", "host issuing GPU work while the GPU idles"],
     "412 kernel launches per step"),
    ("host-compute-bound", ["CPU op aten::copy_", "GPU busy", "launches per step"], "CPU op aten::copy_ 54% of the step"),
    ("CPU-only trace", ["CPU op aten::copy_", "mean step", "host busy"], "CPU op aten::copy_ 54% of the step"),
    ("communication-bound", ["collectives not under compute", "GPU busy", "mean step"],
     "collectives not under compute 20% of the step"),
    ("sync-bound", ["host blocked in syncs", "GPU busy", "mean step"], "host blocked in syncs 30% of the step"),
    ("input-bound", ["DataLoader", "GPU busy", "mean step"], "DataLoader 60% of the step"),
    ("compiling", ["compiling", "compile time", "mean step"], "compiling 70% of the step"),
    ("warm-up", ["warm-up", "warm-up time", "mean step"], "warm-up holds 80% of the window"),
    ("GPU-bound (host ahead)", ["launch-to-kernel delay", "GPU busy", "mean step"],
     "kernels start a median 2.5 ms after their launch"),
    ("host activity not recorded", ["host events", "GPU busy", "kernels"], "0 host events recorded"),
    ("GPU activity not recorded", ["launches per step", "kernels recorded", "GPUs listed"],
     "412 kernel launches per step"),
    ("GPU-bound", ["GPU busy", "mean step", "collectives not under compute"], "GPU busy 37% of the step"),
])
def test_each_verdict_has_its_three_numbers(verdict, labels, first_text):
    numbers = _numbers(verdict, EVIDENCE, _overall(), _result())
    assert [n["label"] for n in numbers] == labels and numbers[0]["text"] == first_text


def test_the_numbers_carry_their_values_and_units():
    by = {n["label"]: n for v in ("compiling", "warm-up", "launch-bound", "GPU activity not recorded",
                                   "host activity not recorded")
          for n in _numbers(v, EVIDENCE, _overall(), _result())}
    assert (by["mean step"]["value"], by["mean step"]["unit"]) == (10.0, "ms")
    assert by["mean step"]["text"] == "mean step 10.00 ms over 4 full step(s)"
    assert (by["compile time"]["value"], by["compile time"]["text"]) == (2.5, "2.50 s compiling")
    assert (by["warm-up time"]["value"], by["warm-up time"]["text"]) == (3.0, "3.0 ms in 1 first call(s)")
    assert (by["median kernel"]["value"], by["median kernel"]["text"]) == (6.25, "median kernel 6.2 us")
    assert by["GPUs listed"]["value"] == 2 and by["kernels"]["text"] == "1,234 kernels recorded"
    assert by["host issuing GPU work while the GPU idles"]["value"] == pytest.approx(50.0)
    none = _numbers("GPU-bound", {**EVIDENCE, "comm_exposed_share": None}, _overall(), _result())
    assert none[2]["value"] == 0.0  # a share the evidence lacks reads 0


@pytest.mark.parametrize("queued, says", [(QUEUED_OVER_WALL * 10_000.0, True), (QUEUED_OVER_WALL * 10_000.0 - 1, False)])
def test_the_mean_step_says_when_the_host_ran_ahead(queued, says):
    full = pd.DataFrame({"queued_gpu_us": [queued], "wall_us": [10_000.0]})
    step = _numbers("GPU-bound", EVIDENCE, _overall(), _result(full_steps=full))[1]
    assert ("of GPU work (the host ran ahead)" in step["text"]) is says


def test_a_step_count_of_zero_divides_by_one():
    assert _numbers("sync-bound", EVIDENCE, _overall(steps=0), _result())[2]["value"] == 40.0


def _trace(events: list[dict], steps: int = 1):
    cols = {"ph": "X", "cat": "cpu_op", "rank": 0, "bytes": np.nan}
    frame = pd.DataFrame([{**cols, **e} for e in events])
    return SimpleNamespace(events=frame, steps=pd.DataFrame({"step": range(steps)}))


WINDOWS = pd.DataFrame({"rank": [0], "step": [1], "start_us": [100.0], "end_us": [200.0]})


def test_outside_steps_sums_what_ran_before_and_after_the_windows():
    trace = _trace([{"ts_us": 10.0, "dur_us": 30.0}, {"ts_us": 20.0, "dur_us": 40.0},   # before: union 50 us
                    {"ts_us": 120.0, "dur_us": 10.0},                                     # inside
                    {"ts_us": 200.0, "dur_us": 50.0},                                     # after, from the end
                    {"ts_us": 90.0, "dur_us": 20.0},                                      # across the start
                    {"ts_us": 230.0, "dur_us": 5.0, "cat": "gpu_memcpy", "bytes": 4096.0},
                    {"ts_us": 240.0, "dur_us": 5.0, "cat": "gpu_memcpy", "bytes": -1.0},  # unknown size
                    {"ts_us": 300.0, "dur_us": 0.0, "ph": "i"},                           # no extent
                    {"ts_us": 0.0, "dur_us": 500.0, "rank": 1}])                          # another rank
    points = pd.DataFrame({"rank": [0, 0, 0], "step": [1, 0, 2], "blocked_us": [5.0, 7.0, 11.0]})
    out = outside_steps(trace, SimpleNamespace(sync_points=points), WINDOWS)
    assert out["before_us"] == 90.0 and out["after_us"] == 50.0  # the first complete event at 10, the last ends 250
    assert out["host_busy_us"] == 100.0  # 10-60 and 200-250
    assert out["syncs"] == {"count": 2, "blocked_us": 18.0}
    assert out["copies"] == {"count": 2, "bytes": 4096}


@pytest.mark.parametrize("windows, steps", [(WINDOWS.iloc[:0], 1), (WINDOWS, 0)])
def test_outside_steps_without_windows_or_steps_is_zero(windows, steps):
    out = outside_steps(_trace([{"ts_us": 0.0, "dur_us": 5.0}], steps), SimpleNamespace(sync_points=None), windows)
    assert out == {"before_us": 0.0, "after_us": 0.0, "host_busy_us": 0.0, "syncs": {"count": 0, "blocked_us": 0.0},
                   "copies": {"count": 0, "bytes": 0}}


def test_outside_steps_never_counts_negative_time():
    trace = _trace([{"ts_us": 150.0, "dur_us": 10.0}])  # everything inside the window
    out = outside_steps(trace, SimpleNamespace(sync_points=pd.DataFrame({"rank": [], "step": [], "blocked_us": []})),
                        WINDOWS)
    assert (out["before_us"], out["after_us"], out["host_busy_us"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("syncs, says", [
    ({"count": 0, "blocked_us": 0.0}, "outside the profiled steps: 1.50 ms of host work (before the first"),
    ({"count": 1200, "blocked_us": 2500.0}, "outside the profiled steps: 1.50 ms of host work, 1,200 sync point(s) "
                                            "blocking 2.50 ms (before the first or after the last step)"),
])
def test_outside_note(syncs, says):
    assert outside_note({"host_busy_us": 12_345.0, "syncs": {"count": 2, "blocked_us": 12_345.0}}).startswith(
        "outside the profiled steps: 12.35 ms of host work, 2 sync point(s) blocking 12.35 ms (")
    note = outside_note({"host_busy_us": 1500.0, "syncs": syncs})
    assert note.startswith(says) and note.endswith("not in the per-step figures or the verdict")


def test_with_prediction_appends_the_sentence_once():
    assert with_prediction("Pin the memory.  ", {"sentence": "Predicted: x"}) == "Pin the memory. Predicted: x."


# -- the diagnosis put together: cpu_bound, syncs, hotspots, kernels and whatif replaced by fakes that say what the
# -- diagnosis must do with what they return (the analyses themselves have their own test files) -----------------


def _windows(verdicts=("input-bound",), **over) -> pd.DataFrame:
    """One step window per verdict, 1 ms each from 100 us, 100 us apart; every share column 80 us."""
    rows = []
    for i, v in enumerate(verdicts):
        row = {"rank": 0, "step": i + 1, "verdict": v, "wall_us": 1000.0, "start_us": 100.0 + 1100 * i,
               "end_us": 1100.0 + 1100 * i, "queued_gpu_us": 0.0, **{f"{k}_us": 80.0 for k in SHARES}, "warmup_us": 0.0}
        rows.append({**row, **over})
    return pd.DataFrame(rows)


def _cpu(verdict="input-bound", *, findings=None, evidence=None, steps=None, warnings=("cpu_bound's warning",),
         warmup=None):
    """A cpu_bound result: ``findings`` default to one whose title starts with the verdict, after another."""
    steps = _windows((verdict,)) if steps is None else steps
    findings = findings if findings is not None else (
        Finding("low", "another finding", fix="another fix", threshold="another rule"),
        Finding("high", f"{verdict}: the title", fix="the verdict's fix.", threshold="the verdict's rule"))
    warmup = pd.DataFrame(columns=["name", "cat", "rank", "ts_us", "dur_us", "later_median_us"]) if warmup is None \
        else warmup
    return SimpleNamespace(verdict=verdict, evidence=_e(**(evidence or {})), steps=steps,
                           full_steps=steps[steps["verdict"] != "partial step"], launches="the launches",
                           findings=tuple(findings), warnings=tuple(warnings), warmup=warmup,
                           host_ops=pd.DataFrame({"name": ["aten::copy_"], "total_us": [20_000.0]}), devices={0: "x"})


def _syncs(points=None, findings=(), count=0, blocked_us=0.0):
    points = pd.DataFrame({"rank": [], "step": [], "blocked_us": []}) if points is None else points
    return SimpleNamespace(sync_points=points, findings=tuple(findings),
                           total={"steps": 1, "in_steps": {"count": count, "blocked_us": blocked_us},
                                  "gpu_confirmed": True})


def _ftrace(events=None, steps=1, gpu=True, files=("run/t.json",)):
    events = events if events is not None else [{"ts_us": 150.0, "dur_us": 10.0}]
    t = _trace(events, steps)
    t.has_gpu_events = gpu
    t.files = [SimpleNamespace(path=p) for p in files]
    t.derived = lambda key, build: (key, build(t))
    return t


class Hotspots:
    def __init__(self, rows):
        self.rows = rows

    def top(self, n, *, waiting):
        assert (n, waiting) == (1, False)
        return pd.DataFrame(self.rows, columns=["function", "file", "line"])


class WhatIf:
    def __init__(self, out):
        self.out = out

    def prediction_json(self):
        return dict(self.out)


REPLAYED = {"fix": "remove_syncs", "text": "median step 1.00 -> 0.80 ms (1.25x) with the syncs removed"}


@pytest.fixture
def fake(monkeypatch):
    """Set what the analyses return: ``fake(cpu=..., sync=..., hot=[rows], kernels=[...] or an error, replay=...)``;
    every call to them is recorded in ``fake.calls``."""
    calls = []

    def setup(cpu=None, sync=None, hot=(), kernels=(), replay=REPLAYED, overall=None):
        cpu, sync = cpu or _cpu(), sync or _syncs()

        def record(name, value):
            def f(*args, **kw):
                assert args and args[0] is not None, f"{name} called without the trace"
                calls.append((name, args, kw))
                if isinstance(value, Exception):
                    raise value
                return value
            return f

        monkeypatch.setattr(dg, "cpu_bound", record("cpu_bound", cpu))
        monkeypatch.setattr(dg, "syncs", record("syncs", sync))
        monkeypatch.setattr(dg, "hotspots", record("hotspots", Hotspots(list(hot))))
        monkeypatch.setattr(dg, "gpu_bound_findings", record("kernels", kernels))
        monkeypatch.setattr(dg, "whatif", record("whatif", WhatIf(replay)))
        monkeypatch.setattr(dg, "overall_numbers", record("overall", overall or _overall()))
        return cpu, sync

    setup.calls = calls
    return setup


def test_diagnose_names_the_trace_by_its_first_file_and_keeps_one_result_per_arguments(fake):
    fake()
    key, d = dg.diagnose(_ftrace())
    assert key == ("diagnose", "run/t.json", True) and d.command == "perfkit gaps run/t.json"
    key, d = dg.diagnose(_ftrace(files=()), kernel_fix=0)
    assert key == ("diagnose", "TRACE", False) and d.command == "perfkit gaps TRACE"
    key, d = dg.diagnose(_ftrace(), path="p.json.gz")
    assert key == ("diagnose", "p.json.gz", True) and d.command == "perfkit gaps p.json.gz"


@pytest.mark.parametrize("verdict, command", [
    ("input-bound", "perfkit gaps N"), ("sync-bound", "perfkit sync-points N"), ("GPU-bound", "perfkit gpu-kernels N"),
    ("partial step", "perfkit summary N"),  # a verdict MORE does not list
])
def test_the_command_that_shows_more(fake, verdict, command):
    fake(cpu=_cpu(verdict))
    assert dg._diagnose(_ftrace(), "N", kernel_fix=False).command == command


def test_a_diagnosis_holds_the_verdict_its_finding_first_and_the_fix_with_its_prediction(fake):
    cpu, _ = fake(cpu=_cpu("input-bound", evidence={"decided_by": "replay"}))
    d = dg._diagnose(_ftrace(), "N", True)
    assert d.verdict == "input-bound" and d.title == "input-bound: the title" and d.decided_by == "replay"
    assert d.findings == (cpu.findings[1], cpu.findings[0]) and d.rule == "the verdict's rule"
    assert d.fix == ("the verdict's fix. Predicted: median step 1.00 -> 0.80 ms (1.25x) with the syncs removed.")
    assert d.prediction == {**REPLAYED, "sentence": f"Predicted: {REPLAYED['text']}"}
    assert [n["label"] for n in d.numbers] == ["DataLoader", "GPU busy", "mean step"] and isinstance(d.numbers, tuple)
    assert list(d.steps.columns[:4]) == ["rank", "step", "verdict", "wall_us"] and "warmup_share" in d.steps
    assert d.warnings == ("cpu_bound's warning",) and d.outside_steps["host_busy_us"] == 0.0
    assert [c[0] for c in fake.calls].count("kernels") == 0  # not GPU-bound


def test_without_a_finding_named_for_the_verdict_the_first_finding_is_it(fake):
    first = Finding("high", "something else", fix="its fix.", threshold="r")
    fake(cpu=_cpu("input-bound", findings=(first, Finding("low", "more"))))
    d = dg._diagnose(_ftrace(), "N", True)
    assert d.title == "something else" and d.findings[0] is first and len(d.findings) == 2
    assert d.fix == "its fix. No prediction: no full step to replay: the verdict comes from the share rules."


def test_a_diagnosis_decided_by_its_shares_says_so(fake):
    fake()
    assert dg._diagnose(_ftrace(), "N", True).decided_by == "shares"


def test_the_steps_are_the_full_ones_and_the_overall_numbers_are_theirs(fake):
    steps = _windows(("input-bound", "partial step"))
    cpu, _ = fake(cpu=_cpu(steps=steps))
    d = dg._diagnose(_ftrace(), "N", True)
    assert d.steps["step"].tolist() == [1]
    overall = [c for c in fake.calls if c[0] == "overall"][0][1]
    assert overall[0]["step"].tolist() == [1] and overall[1] == "the launches"


def test_only_partial_steps_give_the_overall_numbers_of_every_step(fake):
    fake(cpu=_cpu(steps=_windows(("partial step", "partial step"))))
    dg._diagnose(_ftrace(), "N", True)
    assert [c for c in fake.calls if c[0] == "overall"][0][1][0]["step"].tolist() == [1, 2]


def test_a_trace_without_steps_says_so_first(fake):
    fake(cpu=_cpu(warnings=("w1", "w1", "w2")))
    d = dg._diagnose(_ftrace(steps=0), "N", True)
    assert d.warnings[0].startswith("no profiler steps: the whole trace is judged as one window; record with "
                                    "torch.profiler.schedule and call prof.step() once per step")
    assert d.warnings[1:] == ("w1", "w2")  # each said once, in order
    assert dg._diagnose(_ftrace(steps=1), "N", True).warnings == ("w1", "w2")


def test_warm_up_left_out_is_said_with_its_time(fake):
    warm = pd.DataFrame({"name": ["aten::mm", "gemm"], "cat": ["cpu_op", "kernel"], "rank": [0, 0],
                         "ts_us": [1.0, 2.0], "dur_us": [1_234_500.0, 100.0], "later_median_us": [12.0, 3.0]},
                        index=[5, 7])
    fake(cpu=_cpu(warmup=warm))
    d = dg._diagnose(_ftrace(), "N", True)
    assert d.warnings[-1].startswith("warm-up left out of the verdict: 2 first call(s) held 1,234.6 ms (aten::mm")
    assert d.warm_up.index.tolist() == [0, 1]


@pytest.mark.parametrize("events, points, warned", [
    ([{"ts_us": 150.0, "dur_us": 10.0}], [], False),                                # nothing outside
    ([{"ts_us": 10.0, "dur_us": 10.0}, {"ts_us": 150.0, "dur_us": 10.0}], [], True),  # host work before
    ([{"ts_us": 150.0, "dur_us": 10.0}], [(0, 9, 2.0)], True),                        # a sync outside
    ([{"ts_us": 150.0, "dur_us": 10.0}], [(0, 1, 2.0)], False),                       # a sync inside
])
def test_work_outside_the_steps_is_a_warning(fake, events, points, warned):
    fake(sync=_syncs(pd.DataFrame(points, columns=["rank", "step", "blocked_us"])))
    d = dg._diagnose(_ftrace(events), "N", True)
    assert any(w.startswith("outside the profiled steps") for w in d.warnings) is warned


SITE = Finding("high", "cudaStreamSynchronize in train.py:12", fix="Keep the value on the GPU.")


@pytest.mark.parametrize("findings, fix", [
    ((SITE,), "Keep the value on the GPU. Largest: cudaStreamSynchronize in train.py:12."),
    ((Finding("info", "a note", fix="x"), Finding("high", "possible sync", fix="y"), SITE),
     "Keep the value on the GPU. Largest: cudaStreamSynchronize in train.py:12."),
    ((Finding("info", "a note", fix="x"), Finding("medium", "possible sync", fix="y")), "generic"),
    ((), "generic"),
])
def test_a_sync_bound_fix_is_its_longest_confirmed_site(findings, fix):
    assert dg._sync_fix(SimpleNamespace(findings=findings), "generic") == fix


@pytest.mark.parametrize("verdict, fixed", [("sync-bound", True), ("input-bound", False)])
def test_only_a_sync_bound_diagnosis_takes_the_sites_fix(fake, verdict, fixed):
    fake(cpu=_cpu(verdict), sync=_syncs(findings=(SITE,)))
    assert dg._diagnose(_ftrace(), "N", True).fix.startswith("Keep the value") is fixed
    assert dg.verdict_line(_ftrace())["fix"].startswith("Keep the value") is fixed


LEAD = Finding("high", "GEMMs in fp32", fix="Use bf16.")


@pytest.mark.parametrize("verdict, kernel_fix, copy_us, kernels, fix", [
    ("GPU-bound", True, 0.0, [LEAD, Finding("low", "other")], "GEMMs in fp32: Use bf16. "),
    ("GPU-bound", False, 0.0, [LEAD], "the verdict's fix. "),             # kept generic when asked
    ("GPU-bound", True, 80.0, [LEAD], "the verdict's fix. "),             # copies hold the GPU: not the kernels
    ("GPU-bound", True, 0.0, [], "the verdict's fix. "),                  # nothing stands out
    ("input-bound", True, 0.0, [LEAD], "the verdict's fix. "),
])
def test_a_gpu_bound_fix_is_the_leading_kernel_finding(fake, verdict, kernel_fix, copy_us, kernels, fix):
    steps = _windows((verdict,), copy_busy_us=copy_us, gpu_busy_us=100.0)
    fake(cpu=_cpu(verdict, steps=steps), kernels=kernels)
    d = dg._diagnose(_ftrace(), "N", kernel_fix)
    assert d.fix == f"{fix}No prediction: no full step to replay: the verdict comes from the share rules."
    assert any(c[0] == "kernels" for c in fake.calls) is (verdict == "GPU-bound" and kernel_fix and not copy_us)
    led = fix.startswith("GEMMs")
    lead = {"label": "leading kernel finding", "value": None, "unit": "", "text": "GEMMs in fp32"}
    assert (d.numbers[-1] == lead) is led
    assert len(d.numbers) == 3 and d.numbers[0]["label"] == ("GPU busy" if verdict == "GPU-bound" else "DataLoader")


def test_kernel_findings_that_cannot_be_read_are_a_warning(fake):
    fake(cpu=_cpu("GPU-bound"), kernels=PerfkitError("no shapes"))
    d = dg._diagnose(_ftrace(), "N", True)
    assert d.warnings[-1] == "kernel findings unavailable: no shapes" and d.fix.startswith("the verdict's fix. ")
    assert dg._kernel_lead(_ftrace()) == (None, ["kernel findings unavailable: no shapes"])


@pytest.mark.parametrize("kernels, lead", [([LEAD, SITE], LEAD), ([], None)])
def test_the_kernel_lead_is_the_first_finding(fake, kernels, lead):
    fake(kernels=kernels)
    assert dg._kernel_lead(_ftrace()) == (lead, [])


@pytest.mark.parametrize("evidence, gpu, replay, fix, sentence", [
    ({"decided_by": "replay"}, True, REPLAYED, "remove_syncs", f"Predicted: {REPLAYED['text']}"),
    ({"decided_by": "replay"}, True, {"fix": None, "text": "no prediction: the replay failed"}, None,
     "No prediction: the replay failed"),
    ({"decided_by": "shares"}, True, REPLAYED, None,
     "No prediction: no full step to replay: the verdict comes from the share rules"),
    ({}, False, REPLAYED, None, "No prediction: no GPU events, so nothing to replay: the verdict comes from the share "
                                "rules"),
])
def test_the_prediction_is_the_replays_or_why_there_is_none(fake, evidence, gpu, replay, fix, sentence):
    cpu, _ = fake(cpu=_cpu(evidence=evidence), replay=replay)
    out = dg._prediction(_ftrace(gpu=gpu), cpu)
    assert out["fix"] == fix and out["sentence"] == sentence and out["text"] == (
        replay["text"] if evidence.get("decided_by") == "replay" else sentence[0].lower() + sentence[1:])
    assert any(c[0] == "whatif" for c in fake.calls) is bool(evidence.get("decided_by") == "replay")


PY = {"label": "Python", "value": 60.0, "unit": "%", "text": "Python 60% of the step"}


@pytest.mark.parametrize("verdict, first, hot, where", [
    ("host-compute-bound", PY, [("step", "train.py", 42)], "step (train.py:42)"),
    ("host-compute-bound", PY, [("<built-in method sum>", "", 0)], "<built-in method sum>"),
    ("host-compute-bound", PY, [], ""),                                                    # no Python recorded
    ("host-compute-bound", dict(PY, label="CPU op aten::mm"), [("step", "train.py", 42)], ""),
    ("input-bound", PY, [("step", "train.py", 42)], ""),
])
def test_a_host_compute_title_says_where_the_python_time_goes(fake, monkeypatch, verdict, first, hot, where):
    cpu, sync = fake(cpu=_cpu(verdict), hot=hot)
    monkeypatch.setattr(dg, "_numbers", lambda *a: [dict(first), {"label": "b"}, {"label": "c"}])
    full, finding, title, numbers = dg._headline(_ftrace(), cpu, sync)
    assert full is cpu.full_steps and finding is cpu.findings[1]
    assert title == (f"{verdict}: the title; most in {where}" if where else f"{verdict}: the title")
    assert numbers[0]["text"] == (f"{first['text']}; most in {where}" if where else first["text"])
    assert numbers[0]["label"] == first["label"] and numbers[1:] == [{"label": "b"}, {"label": "c"}]


def test_the_title_names_the_cause_behind_the_verdict(fake):
    cpu, sync = fake(cpu=_cpu("input-bound", evidence={"comm_exposed_share": 0.2}))
    assert dg._headline(_ftrace(), cpu, sync)[2] == ("input-bound: the title; also: collectives not under compute 20% "
                                                     "of the step")


def test_the_top_python_function_without_hotspots_is_empty(fake):
    fake(hot=[])
    assert dg._top_python(_ftrace()) == ""
    fake(hot=[("f", "a.py", 3), ("g", "b.py", 4)])
    assert dg._top_python(_ftrace()) == "f (a.py:3)"


def test_the_verdict_line_is_the_verdict_title_fix_and_each_steps_verdict(fake):
    steps = _windows(("input-bound", "partial step"))
    fake(cpu=_cpu("input-bound", steps=steps, evidence={"comm_exposed_share": 0.2}))
    line = dg.verdict_line(_ftrace())
    assert line == {"verdict": "input-bound",
                    "title": "input-bound: the title; also: collectives not under compute 20% of the step",
                    "fix": "the verdict's fix. No prediction: no full step to replay: the verdict comes from the share "
                           "rules.",
                    "steps": {(0, 1): "input-bound", (0, 2): "partial step"}}
    assert all(type(k[0]) is int and type(k[1]) is int for k in line["steps"])
    assert not any(c[0] == "kernels" for c in fake.calls)


def _diagnosis(**over) -> dg.Diagnosis:
    numbers = ({"label": "a", "value": 1.0, "unit": "%", "text": "a <1%"}, {"label": "b", "value": 2, "unit": "",
                                                                         "text": "b & c"})
    warm = pd.DataFrame({"name": ["aten::mm"], "rank": [np.int64(1)], "ts_us": [5.0], "dur_us": [9.0],
                         "later_median_us": [np.nan], "cat": ["cpu_op"]})
    rows = _step_rows(_windows(("input-bound",), rank=np.int64(2)))
    base = dict(verdict="input-bound", title="input-bound <x>", numbers=numbers, fix="Do <this>.", steps=rows,
                warm_up=warm, outside_steps={"before_us": 1.0}, command="perfkit gaps N",
                findings=(Finding("high", "lead", threshold="the rule"), Finding("low", "second", fix="f2")),
                warnings=("w <1>",), prediction={"fix": None, "text": "t"}, decided_by="replay")
    return dg.Diagnosis(**{**base, **over})


def test_the_diagnosis_json(fake):
    j = _diagnosis().to_json()
    assert j["verdict"] == "input-bound" and j["title"] == "input-bound <x>" and j["decided_by"] == "replay"
    assert j["rule"] == "the rule" and j["fix"] == "Do <this>." and j["prediction"] == {"fix": None, "text": "t"}
    assert j["evidence"] == [dict(n) for n in _diagnosis().numbers] and j["command"] == "perfkit gaps N"
    assert j["outside_steps"] == {"before_us": 1.0} and j["warnings"] == ["w <1>"]
    assert j["findings"] == [{"severity": "low", "title": "second", "evidence": {}, "fix": "f2", "threshold": ""}]
    step = j["steps"][0]
    assert step["rank"] == 2 and type(step["rank"]) is int and step["step"] == 1 and type(step["step"]) is int
    assert step["verdict"] == "input-bound" and step["wall_us"] == 1000.0
    assert list(step["shares"]) == list(SHARES) and step["shares"]["dataloader"] == pytest.approx(0.08)
    assert j["warm_up"] == [{"name": "aten::mm", "rank": 1, "ts_us": 5.0, "dur_us": 9.0, "later_median_us": None}]
    assert type(j["warm_up"][0]["rank"]) is int
    json.dumps(j, allow_nan=False)


def test_a_diagnosis_without_findings_has_no_rule():
    d = _diagnosis(findings=())
    assert d.rule == "" and d.to_json()["findings"] == []


def test_the_diagnosis_repr_and_html():
    d = _diagnosis()
    assert repr(d) == "<Diagnosis input-bound <x>>"
    html = d._repr_html_()
    assert html.startswith("<div class='perfkit-result'><h4>Diagnosis: input-bound</h4><p>input-bound &lt;x&gt;</p>"
                           "<ul><li>a &lt;1%</li><li>b &amp; c</li></ul>Fix: Do &lt;this&gt;.")
    assert "<table" in html and html.endswith("<ul class='perfkit-warnings'><li>w &lt;1&gt;</li></ul></div>")


def test_outside_steps_adds_up_the_ranks_and_counts_host_work_only():
    trace = _trace([{"ts_us": 10.0, "dur_us": 20.0}, {"ts_us": 200.0, "dur_us": 30.0},
                    {"ts_us": 80.0, "dur_us": 20.0},                                     # ends as the window starts
                    {"ts_us": 300.0, "dur_us": 10.0, "cat": "kernel"},                   # GPU work: not the host's
                    {"ts_us": 310.0, "dur_us": 5.0, "cat": "gpu_memcpy", "bytes": 100.0},
                    {"ts_us": 0.0, "dur_us": 40.0, "rank": 1}, {"ts_us": 400.0, "dur_us": 60.0, "rank": 1},
                    {"ts_us": 410.0, "dur_us": 5.0, "rank": 1, "cat": "gpu_memcpy", "bytes": 50.0}])
    windows = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "start_us": [100.0, 100.0], "end_us": [200.0, 300.0]})
    points = pd.DataFrame({"rank": [0, 1, 1], "step": [1, 1, 5], "blocked_us": [5.0, 7.0, 11.0]})
    out = outside_steps(trace, SimpleNamespace(sync_points=points), windows)
    assert out["before_us"] == 90.0 + 100.0 and out["after_us"] == 115.0 + 160.0
    assert out["host_busy_us"] == (20.0 + 20.0 + 30.0) + (40.0 + 60.0)
    assert out["syncs"] == {"count": 1, "blocked_us": 11.0} and out["copies"] == {"count": 2, "bytes": 150}


@pytest.mark.parametrize("queued, text", [
    (25_000.0, "mean step 10.00 ms over 4 full step(s); each queued 25.00 ms of GPU work (the host ran ahead)"),
    (22_346.0, "mean step 10.00 ms over 4 full step(s); each queued 22.35 ms of GPU work (the host ran ahead)"),
])
def test_the_mean_step_says_how_much_the_host_queued(queued, text):
    full = pd.DataFrame({"queued_gpu_us": [queued], "wall_us": [10_000.0]})
    assert _numbers("GPU-bound", EVIDENCE, _overall(), _result(full_steps=full))[1]["text"] == text


def _n(label, value, unit, text):
    return {"label": label, "value": value, "unit": unit, "text": text}


BUSY = _n("GPU busy", 37.4, "%", "GPU busy 37% of the step")
STEP = _n("mean step", 10.0, "ms", "mean step 10.00 ms over 4 full step(s)")
LAUNCHES = _n("launches per step", 412.0, "", "412 kernel launches per step")
COPY = _n("CPU op aten::copy_", pytest.approx(20_000 / 37_000 * 100), "%", "CPU op aten::copy_ 54% of the step")


@pytest.mark.parametrize("verdict, numbers", [
    ("launch-bound", [LAUNCHES, _n("median kernel", 6.25, "us", "median kernel 6.2 us"),
                      _n("host issuing GPU work while the GPU idles", 50.0, "%",
                         "host issuing GPU work while the GPU idles 50% of the step")]),
    ("host-compute-bound", [COPY, BUSY, LAUNCHES]),
    ("CPU-only trace", [COPY, STEP, _n("host busy", 90.0, "%", "host busy 90% of the step")]),
    ("communication-bound", [_n("collectives not under compute", 20.0, "%", "collectives not under compute 20% of the "
                                                                            "step"), BUSY, STEP]),
    ("sync-bound", [_n("host blocked in syncs", 30.0, "%", "host blocked in syncs 30% of the step"), BUSY, STEP]),
    ("input-bound", [_n("DataLoader", 60.0, "%", "DataLoader 60% of the step"), BUSY, STEP]),
    ("compiling", [_n("compiling", 70.0, "%", "compiling 70% of the step"),
                   _n("compile time", 10_000.0, "s", "10,000.00 s compiling"), STEP]),
    ("warm-up", [_n("warm-up", 80.0, "%", "warm-up holds 80% of the window"),
                 _n("warm-up time", 100.0, "ms", "100.0 ms in 1 first call(s)"), STEP]),
    ("GPU-bound (host ahead)", [_n("launch-to-kernel delay", 100.0, "ms",
                                   "kernels start a median 100.0 ms after their launch"), BUSY, STEP]),
    ("host activity not recorded", [_n("host events", 0, "", "0 host events recorded"), BUSY,
                                    _n("kernels", 1234, "", "1,234 kernels recorded")]),
    ("GPU activity not recorded", [LAUNCHES, _n("kernels recorded", 0, "", "0 kernels recorded"),
                                   _n("GPUs listed", 2, "", "2 GPU(s) in deviceProperties")]),
    ("GPU-bound", [BUSY, STEP, _n("collectives not under compute", 20.0, "%",
                                  "collectives not under compute 20% of the step")]),
])
def test_each_number_in_full(verdict, numbers):
    e = {**EVIDENCE, "queue_delay_us": 100_000.0}
    o = _overall(compile_us=1e10, warmup_us=100_000.0 if verdict == "warm-up" else 3_000.0)
    got = _numbers(verdict, e, o, _result())
    assert got == numbers and all(type(n["value"]) is not bool for n in got)


def test_a_diagnosis_keeps_the_warm_up_table_as_it_is_less_its_index(fake):
    warm = pd.DataFrame({"name": ["a"], "cat": ["cpu_op"], "rank": [0], "ts_us": [1.0], "dur_us": [2.0],
                         "later_median_us": [1.0]}, index=[4])
    fake(cpu=_cpu(warmup=warm))
    d = dg._diagnose(_ftrace(), "N", True)
    assert list(d.warm_up.columns) == list(warm.columns) and d.warm_up.index.tolist() == [0]


def test_host_work_under_a_microsecond_outside_the_steps_is_said(fake):
    fake()
    d = dg._diagnose(_ftrace([{"ts_us": 10.0, "dur_us": 0.5}, {"ts_us": 150.0, "dur_us": 10.0}]), "N", True)
    assert any(w.startswith("outside the profiled steps: 0.00 ms of host work") for w in d.warnings)


def test_a_kernel_warning_comes_after_cpu_bounds(fake):
    fake(cpu=_cpu("GPU-bound"), kernels=PerfkitError("no shapes"))
    assert dg._diagnose(_ftrace(), "N", True).warnings == ("cpu_bound's warning",
                                                           "kernel findings unavailable: no shapes")


def test_diagnose_passes_kernel_fix_on(fake):
    fake(cpu=_cpu("GPU-bound"), kernels=[LEAD])
    assert dg.diagnose(_ftrace())[1].fix.startswith("GEMMs in fp32: Use bf16.")
    assert dg.diagnose(_ftrace(), kernel_fix=False)[1].fix.startswith("the verdict's fix.")


@pytest.mark.parametrize("surface", ["diagnose", "verdict_line"])
def test_a_host_compute_title_on_every_surface_says_where_the_python_time_goes(fake, monkeypatch, surface):
    fake(cpu=_cpu("host-compute-bound"), hot=[("step", "train.py", 42)])
    monkeypatch.setattr(dg, "_numbers", lambda *a: [dict(PY), {"label": "b"}, {"label": "c"}])
    got = dg._diagnose(_ftrace(), "N", True) if surface == "diagnose" else SimpleNamespace(**dg.verdict_line(_ftrace()))
    assert got.title == "host-compute-bound: the title; most in step (train.py:42)"


def test_the_title_never_names_the_verdict_as_its_own_second_cause(fake):
    cpu, sync = fake(cpu=_cpu("input-bound", evidence={"dataloader_idle_share": 0.9}))
    assert dg._headline(_ftrace(), cpu, sync)[2] == "input-bound: the title"


def test_a_sync_bound_verdict_line_without_a_confirmed_site_keeps_its_fix(fake):
    fake(cpu=_cpu("sync-bound"))
    assert dg.verdict_line(_ftrace())["fix"].startswith("the verdict's fix. No prediction")
