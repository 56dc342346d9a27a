"""Memory-vs-size sweeps: the CPU allocator read, the fit, the budget prediction, OOM handling,
the CUDA path on a fake GPU, and the MPPI planner's analytically known growth."""
import math
import tracemalloc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from perfkit.bench import memsweep  # noqa: E402
from perfkit.bench.memsweep import MemoryPoint, MemorySweep, memory_sweep, workload_memory_sweep  # noqa: E402
from perfkit.stats import fit_slope
from perfkit.errors import ParameterError, PerfkitError  # noqa: E402

HORIZON, DIM = 16, 32
GIB = 2**30


def planted(samples):
    """Holds samples x horizon x dim float32 (plus a 4-byte sum): 2,048 bytes per sample."""
    plan = torch.zeros(int(samples), HORIZON, DIM)
    return plan.sum()


def test_planted_workload_budget_prediction_within_20_percent():
    sweep = memory_sweep(planted, [256, 512, 1024, 2048, 4096], device="cpu", budget_bytes=GIB)
    analytic = GIB / (4 * HORIZON * DIM)  # 524,288 samples fill 1 GiB
    assert sweep.predicted_size == pytest.approx(analytic, rel=0.20)
    assert sweep.predicted_size == pytest.approx(analytic, rel=0.01)  # measured: 0.03% off
    assert sweep.bytes_per_unit == pytest.approx(4 * HORIZON * DIM, rel=0.01)
    low, high = sweep.predicted_size_ci
    assert low <= sweep.predicted_size <= high
    assert sweep.fit.r2 > 0.999 and sweep.method.startswith("torch profiler CPU allocator")
    assert any("extrapolates 128x" in w for w in sweep.warnings)  # 524,288 / 4,096


def test_tracemalloc_alone_does_not_see_torch_tensors():
    """Why the CPU read goes through the profiler: c10 allocates outside Python's allocator."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        planted(4096)  # 8 MiB
        seen = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert seen < 0.01 * 4096 * 4 * HORIZON * DIM


def test_python_heap_is_added_on_cpu():
    def numpy_buffer(n):
        return np.ones(int(n) * 1024, dtype=np.float64).sum()  # 8 KiB per unit, on the Python heap

    sweep = memory_sweep(numpy_buffer, [64, 128, 256], device="cpu", budget_bytes=GIB)
    frame = sweep.to_frame()
    assert (frame["allocator_bytes"] < 4096).all()
    assert frame["python_bytes"].iloc[-1] == pytest.approx(256 * 8192, rel=0.05)
    assert sweep.bytes_per_unit == pytest.approx(8192, rel=0.05)
    off = memory_sweep(numpy_buffer, [64, 128, 256], device="cpu", budget_bytes=GIB, python_heap=False)
    assert (off.to_frame()["python_bytes"] == 0).all() and "tracemalloc" not in off.method


def test_cpu_allocator_peak_is_the_largest_running_sum_in_time_order():
    cpu = torch._C._autograd.DeviceType.CPU

    class Event:
        def __init__(self, t, nbytes, name="[memory]", device=cpu):
            self.t, self.b, self.n, self.d = t, nbytes, name, device

        def start_ns(self):
            return self.t

        def nbytes(self):
            return self.b

        def name(self):
            return self.n

        def device_type(self):
            return self.d

    events = [Event(3, -100), Event(1, 100), Event(2, 50), Event(4, 30), Event(5, 999, name="aten::add"),
              Event(6, 10**9, device=torch._C._autograd.DeviceType.CUDA)]
    assert memsweep.cpu_allocator_peak(events) == 150
    assert memsweep.cpu_allocator_peak([]) == 0


def test_a_profiler_already_running_is_a_clear_error():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        with pytest.raises(PerfkitError, match="profiler is already running"):
            memory_sweep(planted, [1, 2, 3], device="cpu", budget_bytes=GIB, warmup=0)


def test_out_of_memory_stops_the_sweep_and_is_reported():
    def run(n):
        if n >= 400:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return planted(n)

    sweep = memory_sweep(run, [100, 200, 300, 400, 800], device="cpu", budget_bytes=GIB)
    assert sweep.oom_size == 400 and sweep.sizes == (100, 200, 300)
    assert sweep.findings[0].severity == "high" and "out of memory at size=400" in sweep.findings[0].title
    early = memory_sweep(run, [200, 400, 800], device="cpu", budget_bytes=GIB)
    assert early.fit is None and math.isnan(early.predicted_size)
    assert any("a growth line needs 3" in w for w in early.warnings)


def test_other_errors_propagate():
    def run(n):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        memory_sweep(run, [1, 2, 3], device="cpu")


def _sweep(peaks, sizes=(1, 2, 3, 4), power=1.0, budget=1000.0):
    points = tuple(MemoryPoint(s, p, p) for s, p in zip(sizes, peaks))
    fit = fit_slope([s**power for s in sizes], peaks)
    return memsweep._with_warnings(MemorySweep(points, fit, power, budget, "given", "cpu", "test"))


def test_prediction_algebra_power_flat_growth_and_curvature_warning():
    quadratic = _sweep([10 + 5 * s**2 for s in (1, 2, 3, 4)], power=2.0, budget=10 + 5 * 100)
    assert quadratic.predicted_size == pytest.approx(10.0) and quadratic.bytes_at(10) == pytest.approx(510)
    assert quadratic.size_at(10 + 5 * 36) == pytest.approx(6.0)
    flat = _sweep([100, 100, 100, 100])
    assert flat.predicted_size == math.inf and any("does not grow" in w for w in flat.warnings)
    assert not [f for f in flat.findings if "runs out" in f.title]
    curved = _sweep([1, 4, 9, 16, 25, 36, 49, 400], sizes=(1, 2, 3, 4, 5, 6, 7, 20))
    assert any("not a straight line" in w for w in curved.warnings)
    over = _sweep([1100, 1200, 1300, 1400], budget=500)
    assert over.predicted_size == 0.0  # the budget is already spent below the smallest size


def test_result_frame_summary_repr_and_html():
    sweep = _sweep([100, 200, 300, 400], budget=1000)
    frame = sweep.to_frame()
    assert list(frame.columns) == ["size", "peak_bytes", "allocator_bytes", "python_bytes", "reserved_bytes",
                                   "fitted_bytes", "seconds"]
    assert frame["fitted_bytes"].tolist() == pytest.approx([100, 200, 300, 400])
    summary = sweep.summary()
    assert summary["predicted_size"] == pytest.approx(10) and summary["bytes_per_unit"] == pytest.approx(100)
    assert "runs out at 10" in repr(sweep)
    assert "<table" in sweep._repr_html_() and "runs out at size=10" in sweep.findings[0].title


@pytest.mark.parametrize("kwargs, match", [
    ({"sizes": [1, 2]}, "at least 3"), ({"sizes": [0, 1, 2]}, "positive"), ({"sizes": ["a", 1, 2]}, "numbers"),
    ({"power": 0}, "power"), ({"budget_bytes": -1}, "budget_bytes"), ({"warmup": -1}, "warmup"),
    ({"run": 3}, "callable"), ({"device": "tpu"}, "device"),
])
def test_bad_arguments_raise_parameter_error(kwargs, match):
    args = {"run": planted, "sizes": [1, 2, 3], **kwargs}
    with pytest.raises(ParameterError, match=match):
        memory_sweep(args.pop("run"), args.pop("sizes"), **args)


def test_default_cpu_budget_is_available_ram():
    import psutil

    budget, source = memsweep.default_budget("cpu")
    assert 0 < budget <= psutil.virtual_memory().total and "available RAM" in source


# --- CUDA path on a fake GPU ------------------------------------------------------------------

class FakeCudaMemory:
    """torch.cuda's memory counters with one log of calls in order; ``allocate`` moves them."""

    def __init__(self):
        self.log, self.allocated, self.peak, self.reserved = [], 1000, 10**9, 4000

    def allocate(self, nbytes):
        self.log.append(("work", nbytes))
        self.peak = max(self.peak, self.allocated + nbytes)
        self.reserved = max(self.reserved, self.allocated + nbytes)

    def install(self, monkeypatch):
        def record(name, value):
            return lambda device=None: self.log.append((name, str(device))) or value()

        def reset(device=None):
            self.log.append(("reset", str(device)))
            self.peak = self.allocated

        for name, value in (("memory_allocated", lambda: self.allocated), ("max_memory_allocated", lambda: self.peak),
                            ("memory_reserved", lambda: self.reserved),
                            ("max_memory_reserved", lambda: self.reserved), ("synchronize", lambda: None),
                            ("mem_get_info", lambda: (10**6, 10**7))):
            monkeypatch.setattr(torch.cuda, name, record(name, value))
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_cuda_sweep_reads_max_memory_allocated_around_synchronized_calls(monkeypatch):
    fake = FakeCudaMemory()
    fake.install(monkeypatch)
    sweep = memory_sweep(lambda n: fake.allocate(100 * n), [1, 2, 4], device="cuda:1", warmup=1)
    assert sweep.method == "cuda max_memory_allocated" and sweep.device == "cuda:1"
    assert [p.peak_bytes for p in sweep.points] == [100, 200, 400]  # not the stale 1 GB peak
    assert sweep.budget_bytes == 10**6 + (4000 - 1000)  # free + this process's cached blocks
    i = fake.log.index(("work", 400))
    assert fake.log[i - 3:i] == [("synchronize", "cuda:1"), ("reset", "cuda:1"), ("memory_allocated", "cuda:1")]
    assert fake.log[i + 1:i + 4] == [("synchronize", "cuda:1"), ("max_memory_allocated", "cuda:1"),
                                     ("max_memory_reserved", "cuda:1")]
    assert sum(1 for e in fake.log if e[0] == "work") == 4  # one warm-up, three measured


def test_cuda_out_of_memory_empties_the_cache(monkeypatch):
    fake = FakeCudaMemory()
    fake.install(monkeypatch)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: fake.log.append(("empty_cache",)))

    def run(n):
        if n > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        fake.allocate(100 * n)

    sweep = memory_sweep(run, [1, 2, 3, 4], device="cuda", budget_bytes=GIB)
    assert sweep.oom_size == 3 and ("empty_cache",) in fake.log


# --- the MPPI planner -------------------------------------------------------------------------

def test_mppi_planning_memory_grows_by_its_sampling_buffers_per_horizon_step():
    """With inference_mode and preallocated buffers, one more horizon step adds the noise and
    action buffers of every sample: 2 x samples x action_dim float32 (32 B per sample)."""
    samples = 512
    sweep = workload_memory_sweep("mppi", "horizon", [4, 8, 16, 32], device="cpu", budget_bytes=GIB,
                                  overrides={"samples": samples})
    assert sweep.bytes_per_unit == pytest.approx(2 * samples * 4 * 4, rel=0.10)
    assert sweep.fit.r2 > 0.99 and sweep.label == "horizon"
    by_samples = workload_memory_sweep("mppi", "samples", [128, 256, 512, 1024], device="cpu", budget_bytes=GIB)
    assert by_samples.bytes_per_unit > 0 and by_samples.fit.r2 > 0.99
    assert math.isfinite(by_samples.predicted_size) and by_samples.predicted_size > 1024


def test_workload_sweep_rejects_unknown_fields_and_workloads():
    with pytest.raises(ParameterError, match="valid fields are .*samples"):
        workload_memory_sweep("mppi", "particles", [1, 2, 3], device="cpu")
    with pytest.raises(ParameterError, match="unknown workload"):
        workload_memory_sweep("dreamer", "samples", [1, 2, 3], device="cpu")
