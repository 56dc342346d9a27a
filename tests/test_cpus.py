"""``perfkit.cpus``: the one rule for "the machine was busy" that profile, A/B timings and the perf log
share: a 1-minute load average above the CPUs this process may run on."""
import pytest

from perfkit import cpus
from perfkit.profiling.timing import busy as profile_busy
from perfkit.report.rows import load_note


@pytest.mark.parametrize("load, cores, is_busy", [
    (2.01, 2, True),    # more runnable tasks than CPUs
    (2.0, 2, False),    # at the line: every task had a CPU
    (9.0, 16, False),   # the H100 host's 9 runnable tasks on 16 cores
    (None, 2, False),   # no load average (Windows): never called busy
])
def test_busy_table(load, cores, is_busy):
    assert cpus.busy(load, cores) is is_busy
    assert profile_busy(None if load is None else (load, cores)) is is_busy
    assert bool(load_note(load, cores)) is is_busy if load is not None else True


def test_available_cores_and_load_average_are_what_the_os_says():
    assert cpus.available_cores() >= 1
    load = cpus.load_average()
    assert load is None or load >= 0
