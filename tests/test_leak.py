"""Leak hunt: verdicts on the leaky trainer's variants, the growth fit, the rule, findings."""
import gc
import math
import tracemalloc

import numpy as np
import pytest

from perfkit.bench.leak import _verdict, growth_per_1000, hunt_leak
from perfkit.bench.leak_result import COLUMNS, SeriesGrowth, is_user_line
from perfkit.errors import ParameterError
from perfkit.workloads import leaky

EXPECTED = {"keep_graph_losses": "leak", "unbounded_history": "leak", "accumulating_callback": "leak",
            "clean": "no leak"}


@pytest.fixture(scope="module")
def hunts():
    """One hunt per variant (300 CPU steps each, ~1 s), shared by the tests below."""
    out = {}
    for name, config in leaky.variants().items():
        trainer = leaky.make(config, device="cpu")
        out[name] = (hunt_leak(trainer.step, steps=300, device="cpu"), trainer.retained)
        trainer.close()
    return out


def test_variants_are_each_leak_alone_and_clean():
    variants = leaky.variants()
    assert set(variants) == set(EXPECTED)
    assert variants["clean"].leaks == ()
    for name in leaky.LEAK_SWITCHES:
        assert variants[name].leaks == (name,)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_verdict_for_each_variant(hunts, name):
    result, retained = hunts[name]
    assert result.verdict == EXPECTED[name], (result, result.growth_frame())
    assert (retained > 0) == (name != "clean")
    lo, hi = result.ci
    if result.verdict == "leak":
        assert lo > result.decision.threshold
    else:
        assert hi < result.decision.threshold


def test_graph_losses_show_as_tensor_objects_with_the_item_fix(hunts):
    result, _ = hunts["keep_graph_losses"]
    assert result.decided_by == "objects"
    types = result.types_frame().set_index("type")
    assert types.loc["torch.Tensor", "growth"] >= 290  # one loss tensor per step
    fixes = " ".join(f.fix for f in result.findings)
    assert "loss.item()" in fixes


def test_unbounded_history_points_at_the_appending_line(hunts):
    result, _ = hunts["unbounded_history"]
    assert result.decided_by == "tracemalloc_bytes"
    # 64 x (16 + 64) float32 per step = 20 KiB: ~20 MiB per 1,000 steps
    assert 19e6 < result.per_1000 < 23e6
    assert "leaky.py" in result.lines_frame()["location"].iloc[0]
    assert any("deque(maxlen" in f.fix for f in result.findings)
    assert result.findings[0].severity == "critical"


@pytest.mark.parametrize("name", ["keep_graph_losses", "unbounded_history", "accumulating_callback"])
def test_the_top_fix_names_the_cause_and_the_users_growing_line(hunts, name):
    """The leak's own finding (the card's top fix) says what to change, not "see below", and where: the
    user's line (the reference workload's) ranks above torch's and the standard library's."""
    result, _ = hunts[name]
    top = result.findings[0]
    assert top.severity == "critical" and "see the growing" not in top.fix and top.fix
    first = result.top_lines[0][0]
    assert "perfkit/workloads/leaky.py:" in first, result.top_lines
    assert f"the growing line in your code: {first}" in top.fix


@pytest.mark.parametrize("filename, mine", [
    ("/home/me/project/train.py", True),
    ("/opt/perfkit/perfkit/workloads/leaky.py", True),                    # the reference loop stands in for yours
    ("/usr/lib/python3.11/site-packages/torch/nn/functional.py", False),
    ("/usr/lib/python3.11/collections/__init__.py", False),               # standard library
    ("/opt/perfkit/perfkit/bench/monitor.py", False),                     # perfkit's own harness
    ("<frozen importlib._bootstrap>", False),
])
def test_is_user_line_table(filename, mine):
    assert is_user_line(filename) is mine


@pytest.mark.parametrize("relative, own", [
    ("bench/monitor.py", True),             # its system monitor thread, sampling while the hunt runs
    ("bench/leak.py", True),
    ("workloads/leaky.py", False),           # the reference loop stands in for the user's
])
def test_perfkit_own_lines_table(relative, own):
    from perfkit.bench.leak import _PERFKIT, _own

    assert _own(_PERFKIT + relative) is own
    assert not _own("/home/me/project/train.py") and not _own("/usr/lib/python3.11/site-packages/psutil/_pslinux.py")


def test_growing_lines_never_list_perfkits_monitor_and_the_libraries_come_after_the_users():
    import perfkit

    kept = []
    with perfkit.SystemMonitor(interval_s=0.01):
        result = hunt_leak(lambda: kept.append(bytearray(10_000)), steps=100, warmup=5, device="cpu",
                           track_objects=False)
    places = [line for line, _, _ in result.top_lines]
    assert places and "test_leak.py" in places[0]
    assert not any("/perfkit/bench/" in p or "/perfkit/report/" in p for p in places), places
    users = [is_user_line(p.rsplit(":", 1)[0]) for p in places]
    assert users == sorted(users, reverse=True)  # every user line before every library line


def test_clean_has_no_leak_findings(hunts):
    result, _ = hunts["clean"]
    assert [f.severity for f in result.findings] == ["info"]
    assert result.warnings == ()


def test_samples_table(hunts):
    frame = hunts["clean"][0].to_frame()
    assert list(frame.columns) == list(COLUMNS)
    assert frame["step"].tolist() == list(range(0, 301, 10))
    assert (frame["rss_bytes"] > 0).all() and (frame["tracemalloc_bytes"] > 0).all()
    assert frame["cuda_allocated_bytes"].isna().all()  # CPU run
    assert (frame["objects"] >= 0).all()


def test_pure_python_leak_without_object_tracking():
    kept = []
    result = hunt_leak(lambda: kept.append(bytearray(10_000)), steps=100, warmup=5, device="cpu",
                       track_objects=False)
    assert result.verdict == "leak" and result.decided_by == "tracemalloc_bytes"
    assert 9e6 < result.per_1000 < 11e6
    assert result.to_frame()["objects"].isna().all()
    assert result.top_types == ()


def test_hunt_restores_gc_and_tracemalloc_state():
    assert not tracemalloc.is_tracing()
    hunt_leak(lambda: None, steps=20, sample_every=5, device="cpu")
    assert not tracemalloc.is_tracing()
    assert gc.get_freeze_count() == 0
    calls = []

    def failing_step():
        calls.append(1)
        if len(calls) > 12:
            raise RuntimeError("step failed")

    with pytest.raises(RuntimeError, match="step failed"):
        hunt_leak(failing_step, steps=20, warmup=5, sample_every=5, device="cpu")
    assert not tracemalloc.is_tracing() and gc.get_freeze_count() == 0


def test_last_sample_is_taken_at_the_last_step():
    calls = []
    result = hunt_leak(lambda: calls.append(1), steps=25, warmup=3, sample_every=10, device="cpu")
    assert result.to_frame()["step"].tolist() == [0, 10, 20, 25]
    assert len(calls) == 28


@pytest.mark.parametrize("kwargs", [dict(steps=0), dict(sample_every=0), dict(steps=10, sample_every=10),
                                    dict(warmup=-1), dict(tracemalloc_frames=0), dict(confidence=1.5)])
def test_bad_parameters_raise(kwargs):
    with pytest.raises(ParameterError):
        hunt_leak(lambda: None, **kwargs)


def test_fit_growth_exact_line_and_noise():
    x = np.arange(0, 310, 10)
    slope, lo, hi = growth_per_1000(x, 5 * x + 3)
    assert slope == pytest.approx(5000) and lo == pytest.approx(5000) and hi == pytest.approx(5000)
    rng = np.random.default_rng(0)
    slope, lo, hi = growth_per_1000(x, 2 * x + rng.normal(0, 50, len(x)))
    assert lo < 2000 < hi and hi - lo > 100
    assert all(math.isnan(v) for v in growth_per_1000([1, 2], [3, 4]))


def _g(series, lo, hi, threshold=100.0):
    return SeriesGrowth(series, "bytes", (lo + hi) / 2, lo, hi, threshold, 30)


@pytest.mark.parametrize("growth,expected", [
    ((_g("tracemalloc_bytes", 10, 20), _g("objects", 500, 600), _g("rss_bytes", 0, 1)), ("leak", "objects")),
    ((_g("tracemalloc_bytes", 10, 20), _g("objects", -5, 5), _g("rss_bytes", -9, 9)), ("no leak", "tracemalloc_bytes")),
    ((_g("tracemalloc_bytes", 10, 20), _g("objects", 50, 150), _g("rss_bytes", 0, 1)), ("inconclusive", "objects")),
    # RSS is supporting evidence: flat heap and objects but confidently growing RSS is not "no leak"
    ((_g("tracemalloc_bytes", 10, 20), _g("objects", -5, 5), _g("rss_bytes", 200, 300)), ("inconclusive", "rss_bytes")),
    ((_g("rss_bytes", 200, 300),), ("inconclusive", "rss_bytes")),
])
def test_verdict_rule(growth, expected):
    assert _verdict(growth) == expected


def test_repr_and_html(hunts):
    result, _ = hunts["keep_graph_losses"]
    assert "verdict='leak'" in repr(result)
    html = result._repr_html_()
    assert "Leak hunt" in html and "torch.Tensor" in html


# --- the leaky trainer itself -----------------------------------------------------------------

def test_leaky_trainer_follows_the_workload_contract():
    trainer = leaky.make(device="cpu", unbounded_history=True, batch_size=8)
    assert trainer.name == "leaky" and trainer.device == "cpu"
    assert trainer.config.batch_size == 8 and trainer.config.leaks == ("unbounded_history",)
    run = trainer.run(5)
    assert run.steps == 5 and all(math.isfinite(m["loss"]) for m in run.metrics)
    assert trainer.retained == 5
    trainer.close()
    assert trainer.retained == 0


def test_leaky_trainer_learns_and_is_deterministic():
    a, b = leaky.make(device="cpu"), leaky.make(device="cpu")
    losses_a = [a.step()["loss"] for _ in range(200)]
    assert losses_a == [b.step()["loss"] for _ in range(200)]
    assert np.mean(losses_a[-20:]) < 0.5 * np.mean(losses_a[:20])


@pytest.mark.parametrize("overrides,match", [(dict(bogus=1), "bogus"), (dict(hidden=0), "hidden"),
                                             (dict(keep_graph_losses="yes"), "keep_graph_losses"),
                                             (dict(lr=0.0), "lr")])
def test_leaky_config_errors(overrides, match):
    with pytest.raises(ParameterError, match=match):
        leaky.make(device="cpu", **overrides)


class _Held:
    pass


@pytest.mark.parametrize("grew, floor, listed", [(30, 30.0, True), (29, 30.0, False), (1, 0.5, True),
                                                  (0, 0.0, False)])
def test_only_types_growing_past_the_objects_threshold_are_listed(grew, floor, listed):
    from collections import Counter

    from perfkit.bench.leak import _top_types

    first, last = Counter({_Held: 5, int: 9}), Counter({_Held: 5 + grew, int: 9})
    got = _top_types(first, last, 10, floor)
    assert got == ((f"{__name__}._Held", 5, 5 + grew),) if listed else got == ()
