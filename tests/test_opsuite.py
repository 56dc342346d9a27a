"""The op suite: timings with CIs, comparisons across dtypes, threads and devices (a fake GPU),
the environment report beside them."""
import math

import pytest

torch = pytest.importorskip("torch")

from perfkit.bench import opsuite_result  # noqa: E402
from perfkit.bench.environment import environment_report  # noqa: E402
from perfkit.bench.opsuite import OPS, OpSpec, Preset, op_suite  # noqa: E402
from perfkit.errors import ParameterError  # noqa: E402

TINY = Preset(matmul_n=64, conv=(1, 4, 8, 3), elements=2**12, min_time_s=0.01, min_repeats=6)


@pytest.fixture(scope="module")
def env():
    return environment_report()


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def test_cpu_suite_times_every_op_and_compares_dtypes_and_threads(env, restore_threads):
    result = op_suite(preset=TINY, devices=("cpu",), dtypes=("float32", "bfloat16"), threads=(1, 2),
                      environment=env)
    frame = result.to_frame()
    assert set(frame["op"]) == set(OPS) and len(frame) == 3 * len(OPS)  # fp32 1 thr, bf16 1 thr, fp32 2 thr
    assert set(zip(frame["dtype"], frame["threads"])) == {("float32", 1), ("bfloat16", 1), ("float32", 2)}
    assert (frame["ci_low_ms"] <= frame["median_ms"]).all() and (frame["median_ms"] <= frame["ci_high_ms"]).all()
    assert (frame["throughput"] > 0).all() and (frame["n"] >= TINY.min_repeats).all()
    assert dict(zip(frame["op"], frame["unit"]))["matmul"] == "GFLOP/s"
    comparisons = result.comparisons_frame()
    assert sorted(comparisons["axis"].value_counts().items()) == [("dtype", len(OPS)), ("threads", len(OPS))]
    judged = {"faster", "slower", "no change", "insufficient data"}  # or the loaded machine's own answer:
    assert all(v in judged or v.startswith("inconclusive: re-run on a quiet machine (") for v in comparisons["verdict"])
    assert torch.get_num_threads() == restore_threads  # put back
    html = result._repr_html_()
    assert "Op suite (custom)" in html and "Environment" in html  # the environment report beside it
    assert "timings" in repr(result)


def test_throughput_is_work_over_the_median():
    s = opsuite_result.Setting("cpu", "float32", 1)
    timing = opsuite_result.OpTiming("matmul", s, (0.002, 0.001, 0.003), 2.0 * 64**3, "GFLOP/s")
    assert timing.median_s == 0.002 and timing.throughput == pytest.approx(2 * 64**3 / 0.002 / 1e9)
    low, high = timing.ci_s
    assert 0.001 <= low <= 0.002 <= high <= 0.003
    assert OPS["conv2d"].work(TINY, 4) == 2 * 1 * 4 * 8 * 8 * 4 * 9
    assert OPS["copy"].work(TINY, 2) == 2 * 2**12 * 2  # read + write, bf16


class ThreadClock:
    """A clock whose work costs depend on the current thread count, and a log of clock reads
    and thread switches in order."""

    def __init__(self, cost):
        self.now, self.log, self.cost = 0.0, [], cost

    def clock(self):
        self.log.append("clock")
        return self.now

    def work(self):
        self.log.append("work")
        self.now += self.cost[torch.get_num_threads()]


def test_thread_counts_switch_only_between_timed_calls_and_slow_threads_get_advice(env, restore_threads,
                                                                                   monkeypatch):
    fake = ThreadClock({1: 1e-3, 2: 3e-3})
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: fake.log.append(f"set{n}") or real(n))
    spec = OpSpec("fake", "GB/s", lambda device, dtype, p: fake.work, lambda p, s: 1e6)
    result = op_suite(preset=TINY, ops=[spec], devices=("cpu",), dtypes=("float32",), threads=(1, 2),
                      environment=env, clock=fake.clock)
    inside = False
    for entry in fake.log:
        if entry == "clock":
            inside = not inside
        assert not (inside and entry.startswith("set")), "thread count switched inside a timed call"
    c = result.comparisons[0]
    assert c.axis == "threads" and c.ab.verdict == "slower" and c.ab.speedup == pytest.approx(1 / 3)
    assert c.ab.order[:3] == (0, 0, 0) and 1 in c.ab.order  # blocks, not per-call alternation
    finding = result.findings[0]
    assert finding.severity == "medium" and "3.00x slower" in finding.title and "set_num_threads" in finding.fix


def test_an_unsupported_dtype_is_skipped_with_a_warning(env, restore_threads):
    def build(device, dtype, p):
        if dtype == torch.float16:
            raise RuntimeError('"addmm" not implemented for \'Half\'\nmore')
        return lambda: None

    spec = OpSpec("picky", "GFLOP/s", build, lambda p, s: 1.0)
    result = op_suite(preset=TINY, ops=[spec], devices=("cpu",), dtypes=("float32", "float16"), threads=(1,),
                      environment=env)
    assert any("picky skipped for cpu float32, 1 thr vs cpu float16, 1 thr: \"addmm\" not implemented" in w
               for w in result.warnings)
    assert result.comparisons == () and result.to_frame().empty


def test_a_single_setting_is_timed_without_a_comparison(env, restore_threads):
    result = op_suite(preset=TINY, ops=["add"], devices=("cpu",), dtypes=("float32",), threads=(1,), environment=env)
    assert len(result.to_frame()) == 1 and result.comparisons == ()
    assert any("no thread-count comparison" in w for w in result.warnings)


class FakeGPU:
    """torch.cuda's visibility and synchronize, a clock, and work that costs more on the host."""

    def __init__(self):
        self.log, self.now = [], 0.0

    def synchronize(self, device=None):
        self.log.append(("sync", str(device)))

    def clock(self):
        self.log.append(("clock",))
        return self.now

    def op(self, device):
        def work():
            self.log.append(("work", device))
            self.now += 4e-3 if device == "cpu" else 1e-3
        return work


def test_two_devices_are_compared_with_both_sides_synchronized(env, restore_threads, monkeypatch):
    gpu = FakeGPU()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "synchronize", gpu.synchronize)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Fake GPU")
    spec = OpSpec("fake", "GFLOP/s", lambda device, dtype, p: gpu.op(device), lambda p, s: 1e9)
    result = op_suite(preset=TINY, ops=[spec], dtypes=("float32",), threads=(1,), environment=env, clock=gpu.clock)
    device_rows = result.comparisons_frame()
    assert device_rows[["axis", "a", "b", "verdict"]].values.tolist() == [
        ["device", "cpu float32, 1 thr", "cuda float32", "faster"]]
    assert device_rows["speedup"].iloc[0] == pytest.approx(4.0)
    for i, entry in enumerate(gpu.log):  # every clock read right after a CUDA synchronize
        if entry == ("clock",):
            assert gpu.log[i - 1] == ("sync", "cuda")
    frame = result.to_frame().set_index("device")
    assert frame.loc["cuda", "throughput"] == pytest.approx(1e9 / 1e-3 / 1e9)
    assert math.isnan(frame.loc["cuda", "threads"]) or frame.loc["cuda", "threads"] is None
    assert result.findings[0].severity == "info" and "4.00x faster" in result.findings[0].title


@pytest.mark.parametrize("kwargs, match", [
    ({"preset": "huge"}, "preset"), ({"ops": ["fft"]}, "ops"), ({"ops": []}, "ops"),
    ({"dtypes": ("float99",)}, "dtypes"), ({"threads": (0,)}, "threads"), ({"devices": ("tpu",)}, "device"),
    ({"devices": ()}, "devices"),
])
def test_bad_arguments_raise_parameter_error(kwargs, match, env):
    with pytest.raises(ParameterError, match=match):
        op_suite(environment=env, **kwargs)
