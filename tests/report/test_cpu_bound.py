"""``report.cpu_bound``: the fix table's verdict column says which one fix decided the verdict."""
from types import SimpleNamespace

import pytest

from perfkit.report.cpu_bound import verdict_role


@pytest.mark.parametrize("fix, measure, decides, lead, role", [
    ("remove_syncs", False, True, "remove_syncs", "decided it"),
    ("host_compute", True, True, "host_compute", "decided it"),      # the measure saved most: it decided
    ("host_compute", True, True, "amp", "upper bound: measure it"),
    ("amp", False, True, "remove_syncs", ""),                          # ranked, did not decide
    ("amp", False, True, None, ""),                                    # nothing saved enough to decide
    ("pin_copies", False, False, "remove_syncs", "no: within the profiler's margin"),
])
def test_each_fix_says_its_part_in_the_verdict(fix, measure, decides, lead, role):
    assert verdict_role(SimpleNamespace(fix=fix, measure=measure, decides=decides), lead) == role
