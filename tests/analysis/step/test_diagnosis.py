"""``analysis.step.diagnosis``: the cause named beside the verdict, the per-step share rows, the three numbers
behind each verdict, and what ran outside the profiled steps, each from small synthetic evidence."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis.step.diagnosis import (SHARES, _numbers, _step_rows, outside_note, outside_steps, second_cause,
                                             with_prediction)
from perfkit.analysis.step.rules import LAUNCH_MIN_PER_STEP, QUEUED_OVER_WALL, SECOND_CAUSE_SHARE, SYNCS_BEFORE_GRAPHS

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
    note = outside_note({"host_busy_us": 1500.0, "syncs": syncs})
    assert note.startswith(says) and note.endswith("not in the per-step figures or the verdict")


def test_with_prediction_appends_the_sentence_once():
    assert with_prediction("Pin the memory.  ", {"sentence": "Predicted: x"}) == "Pin the memory. Predicted: x."
