import math

import pytest

from perfkit.bench import compare as compare_mod
from perfkit.bench import timing
from perfkit.bench.compare import ABResult, compare
from perfkit.stats import VERDICTS
from perfkit.errors import ParameterError


class FakeWorld:
    """A fake clock that only moves when a fake callable runs, and a log of every call."""

    def __init__(self):
        self.now = 0.0
        self.log: list[str] = []

    def clock(self) -> float:
        return self.now

    def work(self, name: str, seconds: float):
        def fn():
            i = self.log.count(name)
            self.log.append(name)
            self.now += seconds * (1 + 0.01 * (i % 7))  # same deterministic jitter on both sides

        return fn


@pytest.fixture
def world(monkeypatch):
    w = FakeWorld()
    monkeypatch.setattr(timing, "synchronize", lambda device: w.log.append(f"sync:{device}"))
    return w


def _calls(log):
    return [x for x in log if not x.startswith("sync")]


def test_rounds_are_interleaved_in_seeded_random_order(world):
    result = compare(world.work("A", 1.0), world.work("B", 1.2), repeats=30, warmup=2,
                     clock=world.clock, device="cpu", seed=1)
    calls = _calls(world.log)
    assert calls[:4] == ["A", "B", "A", "B"]  # warm-up rounds
    timed = calls[4:]
    rounds = [tuple(timed[i:i + 2]) for i in range(0, len(timed), 2)]
    assert len(rounds) == 30 and all(sorted(r) == ["A", "B"] for r in rounds)
    assert {("A", "B"), ("B", "A")} <= set(rounds)  # both orders occur
    assert "".join("AB"[s] for s in result.order) == "".join(timed)


def test_order_is_reproducible_from_the_seed(world):
    first = compare(world.work("A", 1.0), world.work("B", 1.0), repeats=20, clock=world.clock, device="cpu", seed=5)
    again = compare(world.work("A", 1.0), world.work("B", 1.0), repeats=20, clock=world.clock, device="cpu", seed=5)
    other = compare(world.work("A", 1.0), world.work("B", 1.0), repeats=20, clock=world.clock, device="cpu", seed=6)
    assert first.order == again.order != other.order


def test_every_call_is_synchronized_and_warmed_up(world):
    compare(world.work("A", 1.0), world.work("B", 1.0), repeats=10, warmup=3, clock=world.clock, device="cpu")
    log = world.log
    assert len(_calls(log)) == 2 * 3 + 2 * 10
    for i, entry in enumerate(log):
        if not entry.startswith("sync"):
            assert log[i - 1] == "sync:cpu" and log[i + 1] == "sync:cpu"
    assert log.count("sync:cpu") == 2 * len(_calls(log))


def test_inner_calls_are_averaged_per_sample(world):
    result = compare(world.work("A", 1.0), world.work("B", 2.0), repeats=6, warmup=1, inner=5,
                     clock=world.clock, device="cpu")
    assert len(_calls(world.log)) == 2 * 1 + 2 * 6 * 5
    assert len(result.samples_a) == 6
    assert all(1.0 <= s <= 1.07 for s in result.samples_a)
    assert all(2.0 <= s <= 2.14 for s in result.samples_b)


def test_planted_slowdown_and_no_change_with_fake_clock(world):
    slower = compare(world.work("A", 1.0), world.work("B", 1.2), repeats=40, clock=world.clock, device="cpu")
    assert slower.verdict == "slower"
    assert slower.ratio == pytest.approx(1.2, rel=0.01)
    assert slower.speedup == pytest.approx(1 / 1.2, rel=0.01)
    assert slower.ci_low > 1.02 and slower.p_value < 0.05
    same = compare(world.work("C", 1.0), world.work("D", 1.0), repeats=40, clock=world.clock, device="cpu")
    assert same.verdict == "no change"
    faster = compare(world.work("E", 1.0), world.work("F", 0.7), repeats=40, clock=world.clock, device="cpu")
    assert faster.verdict == "faster" and faster.speedup_ci[0] > 1.3


def test_repeats_none_fills_min_time(world):
    result = compare(world.work("A", 0.01), world.work("B", 0.01), min_time_s=1.0, warmup=1,
                     clock=world.clock, device="cpu")
    assert 45 <= result.n <= 50  # ~0.0206 s per round
    capped = compare(world.work("C", 0.01), world.work("D", 0.01), min_time_s=100.0, max_repeats=30,
                     clock=world.clock, device="cpu")
    assert capped.n == 30
    floor = compare(world.work("E", 10.0), world.work("F", 10.0), min_time_s=1.0, min_repeats=12,
                    clock=world.clock, device="cpu")
    assert floor.n == 12


def test_too_few_samples_is_insufficient_data(world):
    result = compare(world.work("A", 1.0), world.work("B", 3.0), repeats=3, clock=world.clock, device="cpu")
    assert result.verdict == "insufficient data"
    assert any("insufficient data" in w for w in result.warnings)
    assert math.isnan(result.ci_low)


def test_result_frame_summary_and_rendering(world):
    result = compare(world.work("A", 1.0), world.work("B", 1.5), repeats=25, labels=("<eager>", "compiled"),
                     clock=world.clock, device="cpu")
    frame = result.to_frame()
    assert list(frame.columns) == ["side", "seconds", "round", "position"]
    assert len(frame) == 50 and set(frame["side"]) == {"<eager>", "compiled"}
    assert frame.loc[frame["side"] == "compiled", "seconds"].tolist() == list(result.samples_b)
    assert frame.groupby("round").size().eq(2).all()
    summary = result.summary()
    assert summary["verdict"] == "slower" and summary["n"] == 25 and summary["paired"] is True
    assert summary["median_compiled_s"] == result.median_b
    html = result._repr_html_()
    assert "&lt;eager&gt;" in html and "<eager>" not in html
    assert repr(result).startswith("ABResult(compiled/<eager>=1.5") and "slower" in repr(result)
    assert result.environment["device"] == "cpu" and result.environment["clock"] == "clock"
    with pytest.raises(Exception):
        result.test = None  # frozen


def test_noisy_samples_and_load_produce_warnings(world, monkeypatch):
    times = iter([1.0, 1.0] + [1.0, 5.0, 1.0, 1.0] * 20)

    def noisy():
        world.now += next(times)

    monkeypatch.setattr(compare_mod, "load_average", lambda: 9.0)
    monkeypatch.setattr(compare_mod, "available_cores", lambda: 4)  # 9 runnable on 16 cores (the H100 host) is no load
    result = compare(noisy, world.work("B", 1.0), repeats=40, warmup=1, clock=world.clock, device="cpu")
    text = " ".join(result.warnings)
    assert "robust coefficient of variation" in text or "3x the median" in text
    assert "load average 9.0" in text


@pytest.mark.parametrize("kwargs", [{"repeats": 0}, {"warmup": -1}, {"inner": 0}, {"min_time_s": 0},
                                    {"labels": ("x", "x")}, {"min_effect": 2.0}, {"confidence": 0.3},
                                    {"device": "tpu"}])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ParameterError):
        compare(lambda: None, lambda: None, **{"repeats": 5, **kwargs})


def test_non_callables_raise():
    with pytest.raises(ParameterError, match="callables"):
        compare(1, lambda: None)


def test_cuda_without_gpu_raises_parameter_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(ParameterError, match="no CUDA GPU"):
        compare(lambda: None, lambda: None, device="cuda")


def test_real_clock_smoke():
    result = compare(lambda: sum(range(2000)), lambda: sum(range(2000)), repeats=30, warmup=2)
    assert isinstance(result, ABResult) and result.verdict in VERDICTS
    assert len(result.samples_a) == 30 and min(result.samples_a) > 0
    assert result.environment["torch"] is not None


def test_time_callable_fake_clock(world):
    fixed = timing.time_callable(world.work("A", 0.5), repeats=7, warmup=2, clock=world.clock, device="cpu")
    assert fixed.n == 7 and fixed.method == "fixed" and fixed.warmup == 2
    assert fixed.median == pytest.approx(0.5, rel=0.05)
    assert list(fixed.to_frame().columns) == ["sample", "seconds"]
    filled = timing.time_callable(world.work("B", 0.1), min_time_s=2.0, clock=world.clock, device="cpu")
    assert filled.method == "target-time" and 19 <= filled.n <= 20
    assert "TimingResult(median=" in repr(filled) and "<table" in filled._repr_html_()


def test_timing_warns_on_tiny_calls():
    warnings = timing.sample_warnings("x", [2e-6] * 10, inner=1)
    assert any("inner=10" in w for w in warnings)
    assert timing.sample_warnings("x", [2e-6] * 10, inner=10) == ()


def _ab(a, b) -> ABResult:
    from perfkit.stats import ratio_test

    return ABResult(("A", "B"), tuple(a), tuple(b), tuple(i % 2 for i in range(2 * len(a))), ratio_test(a, b))


def test_steady_timing_is_reliable():
    steady = [1.0 + 0.01 * (i % 3) for i in range(20)]
    ab = _ab(steady, [x * 1.01 for x in steady])
    assert abs(ab.drift) < 0.05 and ab.spread < 0.05 and ab.unreliable == ""
    assert compare_mod.inconclusive_finding(ab, "x") is None


def test_timing_that_drifts_by_half_supports_no_verdict():
    # A's median falls by two thirds from the first half of the run to the second (the issue's -66%)
    a = [3.0 + 0.1 * (i % 3) for i in range(10)] + [1.0 + 0.03 * (i % 3) for i in range(10)]
    ab = _ab(a, [x * 1.02 for x in a])
    assert ab.drift == pytest.approx(-0.666, abs=0.01)
    assert ab.unreliable.startswith("timing drifted -67%, CV ")
    finding = compare_mod.inconclusive_finding(ab, "torch.compile (inductor) A/B")
    assert finding.title.startswith("torch.compile (inductor) A/B: inconclusive, timing drifted -67%")
    assert "quiet machine" in finding.fix and finding.evidence["drift_pct"] == pytest.approx(100 * ab.drift)


def test_timing_that_spreads_past_half_its_median_supports_no_verdict():
    noisy = [0.2, 3.0, 1.0, 0.1, 2.5, 1.0, 0.3, 2.8, 1.0, 0.2] * 2  # the same in both halves: no drift
    ab = _ab(noisy, list(reversed(noisy)))
    assert ab.drift == 0 and ab.spread > compare_mod.UNRELIABLE_CV and "CV" in ab.unreliable


def _drifting_slower() -> ABResult:
    # B takes twice A in every round, and both arms' medians rise by 73% between the halves of the run
    # (the "slower" beside "timing drifted +73%")
    a = [1.0 + 0.01 * (i % 3) for i in range(10)] + [1.73 + 0.01 * (i % 3) for i in range(10)]
    return _ab(a, [2.0 * x for x in a])


@pytest.mark.parametrize("drifts, stated", [(False, "slower"), (True, "inconclusive: re-run on a quiet machine")])
def test_every_surface_of_an_ab_states_the_one_conclusion(drifts, stated):
    from perfkit.report.prose import ab_verdict, ab_word
    from perfkit.report.rows import ab_rows

    steady = [1.0 + 0.01 * (i % 3) for i in range(20)]
    ab = _drifting_slower() if drifts else _ab(steady, [1.3 * x for x in steady])
    assert ab.verdict == "slower"  # the test on the ratio alone
    assert ab.conclusion.startswith(stated) and bool(ab.unreliable) == drifts
    surfaces = {"str": str(ab), "repr": repr(ab), "html": ab._repr_html_(), "summary": ab.summary()["verdict"],
                "word": ab_word(ab), "line": ab_verdict("x", ab)}
    assert {name: stated in text for name, text in surfaces.items()} == dict.fromkeys(surfaces, True)
    assert {name: "slower" in text for name, text in surfaces.items()} == dict.fromkeys(surfaces, not drifts)
    speedup = next(r for r in ab_rows("compare", ab, ("a_ms", "b_ms"), "live x", "cpu") if r["metric"] == "speedup")
    assert ("inconclusive" in speedup["quality"]) == drifts  # the perf log judges no change on it
