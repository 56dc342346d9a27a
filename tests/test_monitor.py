"""SystemMonitor: real CPU sampling on this machine, NVML through a fake, the no-NVML paths."""
import math
import sys
import time
from types import SimpleNamespace

import pytest

from perfkit.bench.monitor import CPU_COLUMNS, GPU_METRICS, MonitorResult, SystemMonitor
from perfkit.errors import ParameterError


def _nvml_works() -> bool:
    try:
        import pynvml
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(1000))


class FakeNVMLError(Exception):
    pass


class FakeNVML:
    """Two GPUs; GPU 1 cannot report power. Fails on calls it does not expect."""

    NVMLError = FakeNVMLError
    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self, fail_init=False, count=2, fail_name=False):
        self.fail_init, self.count, self.fail_name = fail_init, count, fail_name
        self.inits = self.shutdowns = 0

    def nvmlInit(self):
        if self.fail_init:
            raise FakeNVMLError("Driver Not Loaded")
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        if self.fail_name:
            raise FakeNVMLError("GPU is lost")
        return b"Fake H100" if h == 0 else "Fake A100"

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=30 + h, memory=5)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=2**30 * (h + 1), total=80 * 2**30)

    def nvmlDeviceGetPowerUsage(self, h):
        if h == 1:
            raise FakeNVMLError("Not Supported")
        return 250_000  # milliwatts

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {1: 1980, 2: 2619}[kind]

    def __getattr__(self, name):
        raise AssertionError(f"unexpected NVML call {name}")


def test_monitor_runs_half_a_second_on_this_machine():
    with SystemMonitor(interval_s=0.1) as mon:
        _busy(0.5)
    result = mon.result()
    frame = result.to_frame()
    assert len(frame) >= 3
    assert frame["time_s"].is_monotonic_increasing and frame["time_s"].iloc[-1] <= 1.5
    assert frame[list(CPU_COLUMNS)].notna().all().all()
    assert (frame["rss_bytes"] > 0).all() and frame["cpu_process_percent"].max() > 10
    if not _nvml_works():
        assert result.gpu_reason and "NVML" in result.gpu_reason
        assert not result.gpu_available and list(frame.columns) == ["time_s", *CPU_COLUMNS]
    summary = result.summary().set_index("metric")
    assert summary.loc["rss_bytes", "samples"] == len(frame)


def test_fake_nvml_gives_per_gpu_columns_and_nan_for_unsupported():
    fake = FakeNVML()
    mon = SystemMonitor(interval_s=0.05, nvml=fake).start()
    time.sleep(0.2)
    result = mon.stop()
    assert fake.shutdowns == 1
    assert result.gpu_available and result.gpu_names == ("Fake H100", "Fake A100")
    frame = result.to_frame()
    assert [c for c in frame.columns if c.startswith("gpu0_")] == [f"gpu0_{m}" for m in GPU_METRICS]
    assert (frame["gpu0_power_w"] == 250.0).all() and frame["gpu1_power_w"].isna().all()
    assert (frame["gpu1_mem_used_bytes"] == 2 * 2**30).all() and (frame["gpu0_sm_clock_mhz"] == 1980).all()
    assert any("gpu1 power_w" in w for w in result.warnings)
    titles = [f.title for f in result.findings]
    assert any("GPU 0 (Fake H100) busy only 30%" in t for t in titles)


def test_nvml_error_at_init_keeps_cpu_data():
    fake = FakeNVML(fail_init=True)
    result = SystemMonitor(interval_s=0.05, nvml=fake).start().stop()
    assert "Driver Not Loaded" in result.gpu_reason and result.gpu_names == ()
    assert fake.shutdowns == 0  # nothing to shut down after a failed init
    assert len(result.rows) >= 1 and not math.isnan(result.rows[0]["cpu_system_percent"])


@pytest.mark.parametrize("kwargs, reason", [(dict(count=0), "0 GPUs"), (dict(fail_name=True), "GPU is lost")])
def test_nvml_init_is_balanced_when_no_gpu_can_be_read(kwargs, reason):
    """NVML counts nvmlInit calls; one left without nvmlShutdown keeps NVML loaded."""
    fake = FakeNVML(**kwargs)
    result = SystemMonitor(interval_s=0.05, nvml=fake).start().stop()
    assert reason in result.gpu_reason and result.gpu_names == () and not result.gpu_available
    assert (fake.inits, fake.shutdowns) == (1, 1)
    assert list(result.to_frame().columns) == ["time_s", *CPU_COLUMNS]


def test_missing_pynvml_and_gpu_off(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    result = SystemMonitor(interval_s=0.05).start().stop()
    assert "nvidia-ml-py is not installed" in result.gpu_reason
    off = SystemMonitor(interval_s=0.05, gpu=False).start().stop()
    assert "gpu=False" in off.gpu_reason


def test_misuse_raises():
    with pytest.raises(ParameterError):
        SystemMonitor(interval_s=0)
    with pytest.raises(ParameterError, match="start"):
        SystemMonitor().stop()
    mon = SystemMonitor(interval_s=0.05, gpu=False).start()
    with pytest.raises(ParameterError, match="already started"):
        mon.start()
    mon.stop()


def test_result_repr_html_and_empty_summary():
    empty = MonitorResult(0.2, (), gpu_reason="no GPU <here>")
    assert empty.to_frame().empty and empty.summary()["samples"].sum() == 0
    assert "gpu_reason='no GPU <here>'" in repr(empty)
    assert "no GPU &lt;here&gt;" in empty._repr_html_()
