"""``perfkit.profiling.timing``: when a ``perfkit profile`` run's step times and overhead are noise (a loaded
2-core machine read one tiny CPU step 1.4 ms and the next 508 ms, and the overhead +861% then +2169%), and what
``perfkit profile`` prints then."""
from __future__ import annotations

import pytest

from perfkit.cli.profile import format_result, overhead_text
from perfkit.profiling.session import ProfileResult
from perfkit.profiling.timing import (RANK_STEPS, STEADY_SPREAD_PCT, more_active, noise_warnings, overhead_noise_pct, overhead_pct,
                                      overhead_unmeasurable, overhead_warnings)

IDLE, BUSY = (0.3, 2), (3.4, 2)  # (load average over the last minute, CPUs)
# wait 4 (the first is start-up), warm-up 1, active 3: steady wait steps, profiled steps 1.4 ms .. 508 ms
WILD = [0.5, 0.010, 0.010, 0.010, 0.011, 0.0014, 0.508, 0.2]


def test_profiled_steps_that_overlap_the_unprofiled_ones_measure_nothing():
    pct = overhead_pct(WILD, wait=4, warmup=1, active=3)
    assert pct == pytest.approx(1900.0)  # the median profiled step is 20x the median unprofiled one...
    why = overhead_unmeasurable(WILD, 4, 1, 3, IDLE)  # ...and one profiled step is the fastest of all
    assert why == "not measurable: the steps with the profiler (1.4 to 508 ms) and without it (10 to 10 ms) overlap"
    assert "overlap" in overhead_warnings(pct, 4, overhead_noise_pct(WILD, 4, 1, 3), IDLE, why)[0]


STEADY = [0.5, 0.010, 0.0101, 0.0100, 0.011, 0.0130, 0.0131, 0.0129]  # +30%, every profiled step slower


@pytest.mark.parametrize("times, load, says", [
    (STEADY, IDLE, ""),
    (STEADY, BUSY, "the machine was busy (load average 3.4 on 2 CPUs)"),  # steps waited for a CPU
    (STEADY, None, ""),                                                   # no load average (Windows)
    # every profiled step slower, but by +6%, within the +/-43% one fast unprofiled step spreads them
    ([0.5, 0.002, 0.010, 0.0105, 0.011, 0.0106, 0.0107, 0.0106], IDLE, "varied by +/-43%"),
    (STEADY[:4], IDLE, "not measured"),
])
def test_overhead_unmeasurable_table(times, load, says):
    why = overhead_unmeasurable(times, 4, 1, 3, load)
    assert (says in why) if says else why == ""


def test_no_overhead_warning_on_a_busy_machine_only_the_load_one():
    assert overhead_warnings(2169.0, 5, 1.0, BUSY) == []
    said = noise_warnings([0.001, 0.001], BUSY)
    assert len(said) == 1 and "load average 3.4 over the last minute on 2 CPUs" in said[0]


@pytest.mark.parametrize("times, says", [
    ([0.0014, 0.508, 0.2], "took 1.4 to 508 ms"),
    ([0.100, 0.105, 0.102], None),                    # +/-2.5%: steady
    ([0.100, 0.100 * (1 + STEADY_SPREAD_PCT / 50)], None),  # exactly at the bar: steady
    ([0.100, 0.125], "spread +/-11%"),
    ([0.100], None),                                  # one step: no spread to judge
    ([None, None], None),
])
def test_noise_warnings_on_the_recorded_steps(times, says):
    got = noise_warnings(times, IDLE)
    assert (says in got[0] and "--active" in got[0]) if says else got == []


@pytest.mark.parametrize("recorded, says_too_few", [(RANK_STEPS - 1, True), (RANK_STEPS, False)])
def test_too_few_steps_to_rank_causes_are_said(recorded, says_too_few):
    times = [0.100, 0.150] * (recorded // 2) + [0.100] * (recorded % 2)
    said = noise_warnings(times, IDLE, active=recorded)[0]
    assert ("too few to rank causes" in said) is says_too_few
    assert f"--active {more_active(recorded, recorded)})" in said and f"--active {recorded})" not in said


@pytest.mark.parametrize("recorded, warnings, says", [
    (RANK_STEPS - 1, (), "; too few to rank causes whose share moves between steps (under 10): --active 18"),
    (3, (), ": --active 10 for a ranking"), (RANK_STEPS, (), None), (0, (), None),
    (3, ("the 3 recorded steps took ...: 3 steps are too few to rank causes ...",), None)])  # said once, in the warning
def test_a_steady_short_profile_says_its_steps_cannot_rank_causes(recorded, warnings, says):
    steps_line = format_result(_result(steps_recorded=recorded, warnings=warnings,
                                       step_times_s=(0.1, 0.101, 0.1))).splitlines()[1]
    assert ("too few" in steps_line) is (says is not None)
    assert says is None or says in steps_line


@pytest.mark.parametrize("recorded, active, n", [(3, 3, RANK_STEPS), (3, 0, RANK_STEPS), (5, 5, RANK_STEPS),
                                                 (6, 6, 12), (10, 10, 20), (4, 10, 20)])
def test_more_active_is_never_the_count_asked_for(recorded, active, n):
    assert more_active(recorded, active) == n and n > active


def test_more_steps_are_not_advised_on_a_busy_machine():
    said = noise_warnings([0.1, 0.5, 0.2], BUSY, active=3)
    assert "will not steady them while the machine is busy" in said[0] and "--active" not in said[0]


def _result(**kw) -> ProfileResult:
    base = dict(trace=None, steps_recorded=3, step_source="optimizer", overhead_pct=2169.0, diagnosis={},
                diagnosis_text="verdict   CPU-only trace", overhead_noise_pct=3.0,
                step_times_s=(0.0014, 0.508, 0.2), load=IDLE)
    return ProfileResult(**{**base, **kw})


def test_the_screen_shows_the_median_step_and_no_unmeasurable_overhead():
    busy = _result(load=BUSY, overhead_unmeasurable=overhead_unmeasurable(WILD, 4, 1, 3, BUSY))
    text = format_result(busy)
    assert "step time  median 200 ms (1.4 to 508 ms over 3 steps, spread +/-127%, host clock)" in text
    assert "overhead   not measurable: the machine was busy (load average 3.4 on 2 CPUs)\n" in text
    assert "2169" not in text and "2,169" not in text
    assert overhead_text(_result()) == "+2169.0% step time with the profiler on (host clock)"
    r = busy.to_json()
    assert r["step_median_ms"] == pytest.approx(200.0) and r["overhead_measurable"] is False
    assert r["load"] == {"load_1min": 3.4, "cpus": 2} and r["overhead_pct"] == 2169.0  # raw figure kept


@pytest.mark.parametrize("trace, source, steps, nothing", [
    (None, "optimizer", 0, True),
    ("t.gz", "optimizer", 0, True),  # a trace of wait/warm-up steps only
    ("t.gz", "optimizer", 2, False),
    ("t.gz", "window", 0, False),    # a window has no steps by design
])
def test_recorded_nothing(trace, source, steps, nothing):
    assert _result(trace=trace, step_source=source, steps_recorded=steps).recorded_nothing is nothing
