"""A/B verdict lines (``prose.ab_verdict``): timing that drifted or spread too far states no verdict."""
from perfkit.bench.compare import ABResult
from perfkit.report.prose import ab_verdict, ab_word
from perfkit.stats import ratio_test


class FakeAMP:
    """What ab_verdict reads of an AMPResult or CompileABResult: the verdict, speedup CI and timing."""

    def __init__(self, a, b):
        self.timing = ABResult(("fp32", "amp"), tuple(a), tuple(b), tuple(i % 2 for i in range(2 * len(a))),
                               ratio_test(a, b))
        self.verdict = self.timing.verdict

    def summary(self) -> dict:
        low, high = self.timing.speedup_ci
        return {"speedup": self.timing.speedup, "ci_low": low, "ci_high": high}


STEADY = [1.0 + 0.01 * (i % 3) for i in range(20)]


def test_a_steady_ab_keeps_its_own_verdict_and_ci():
    result = FakeAMP(STEADY, [x * 0.5 for x in STEADY])
    assert ab_word(result) == "faster"
    assert ab_verdict("autocast (bfloat16)", result).startswith("autocast (bfloat16): faster (2x speedup, CI 1.9")


def test_timing_that_drifted_is_inconclusive_not_no_change():
    # the first half runs 3x slower than the second (a loaded machine that quietened), noisy throughout
    a = [3.0, 0.4, 5.0, 2.5, 3.5, 1.0, 4.0, 2.0, 6.0, 3.0] + [1.0, 0.2, 1.6, 0.9, 1.2, 0.3, 1.4, 0.7, 2.0, 1.0]
    result = FakeAMP(a, [x * 1.05 for x in reversed(a)])
    line = ab_verdict("autocast (bfloat16)", result)
    assert line.startswith("autocast (bfloat16): inconclusive: re-run on a quiet machine (timing drifted ")
    assert "no change" not in line and "speedup" not in line
    assert f"CV {result.timing.spread:.0%}" in line
