"""SystemMonitor: real CPU sampling on this machine, NVML through a fake, the no-NVML paths."""
import math
import sys
import time
from types import SimpleNamespace

import pytest

from perfkit.bench.monitor import CPU_COLUMNS, GPU_METRICS, MonitorResult, SystemMonitor
from perfkit.errors import ParameterError

from fakegpu import CUuuid


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


UUIDS = ("GPU-0aaa1111-0000-0000-0000-000000000000", "GPU-1bbb2222-0000-0000-0000-000000000001",
         "GPU-2ccc3333-0000-0000-0000-000000000002", "GPU-2cdd4444-0000-0000-0000-000000000003")  # 2c... twice


class FakeNVML:
    """``count`` GPUs (two by default) with UUIDS (bytes, as older pynvml returns them, with
    ``byte_uuids``); GPU ``h`` is ``30 + h`` % busy and GPU 1 cannot report power. Records the
    handles it was asked to read. Fails on calls it does not expect."""

    NVMLError = FakeNVMLError
    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    def __init__(self, fail_init=False, count=2, fail_name=False, byte_uuids=False):
        self.fail_init, self.count, self.fail_name, self.byte_uuids = fail_init, count, fail_name, byte_uuids
        self.inits = self.shutdowns = 0
        self.read = set()

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
        return b"Fake H100" if h == 0 else "Fake A100" if h == 1 else f"Fake GPU {h}"

    def nvmlDeviceGetUUID(self, h):
        return UUIDS[h].encode() if self.byte_uuids else UUIDS[h]

    def nvmlDeviceGetUtilizationRates(self, h):
        self.read.add(h)
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


@pytest.fixture(autouse=True)
def plain_process(monkeypatch):
    """No CUDA_VISIBLE_DEVICES and no torch in the process unless a test sets them."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)
    return monkeypatch


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


class FakeTorchCuda:
    """torch.cuda of a process that initialized CUDA and sees the NVML devices ``nvml_order``
    (in CUDA order); its UUIDs print without "GPU-", like torch's _CUuuid."""

    def __init__(self, nvml_order, initialized=True):
        self.nvml_order, self.initialized = nvml_order, initialized

    def is_initialized(self):
        return self.initialized

    def device_count(self):
        return len(self.nvml_order)

    def get_device_properties(self, i):
        if not self.initialized:
            raise AssertionError("the monitor must not initialize CUDA")
        uuid = UUIDS[self.nvml_order[i]] if self.nvml_order[i] is not None else "GPU-ffff0000-0000"
        return SimpleNamespace(uuid=CUuuid(uuid[4:].upper()))


def _run(fake):
    return SystemMonitor(interval_s=0.05, nvml=fake).start().stop()


def test_cuda_visible_devices_3_monitors_only_nvml_3_as_gpu0(plain_process):
    plain_process.setenv("CUDA_VISIBLE_DEVICES", "3")
    fake = FakeNVML(count=4)
    result = _run(fake)
    assert result.gpus == ({"label": "gpu0", "cuda_index": 0, "nvml_index": 3, "name": "Fake GPU 3",
                            "uuid": UUIDS[3]},)
    frame = result.to_frame()
    assert [c for c in frame.columns if c.startswith("gpu")] == [f"gpu0_{m}" for m in GPU_METRICS]
    assert (frame["gpu0_util_percent"] == 33).all() and fake.read == {3}
    assert "cuda:0 = NVML 3 Fake GPU 3" in repr(result)
    assert UUIDS[3] in result._repr_html_() and result.gpus_frame()["nvml_index"].tolist() == [3]


@pytest.mark.parametrize("visible, nvml, warning", [
    ("2,0", [2, 0], None),
    (" 1 , 3", [1, 3], None),
    ("GPU-2CDD", [3], None),  # a unique UUID prefix, any case
    ("2ccc3333-0000-0000-0000-000000000002", [2], None),  # a full UUID without "GPU-"
    ("1gpu2", [1], None),  # CUDA reads numbers like strtoul
    ("1,7,2", [1], "'7', '2' are ignored"),  # NVML lists 4 GPUs: 7 is invalid and ends the list
    ("2,GPU-2c,0", [2], "'GPU-2c', '0' are ignored"),  # "2c" starts two UUIDs: ambiguous, invalid
])
def test_cuda_visible_devices_order_prefix_and_truncation(plain_process, visible, nvml, warning):
    plain_process.setenv("CUDA_VISIBLE_DEVICES", visible)
    fake = FakeNVML(count=4)
    result = _run(fake)
    assert [g["nvml_index"] for g in result.gpus] == nvml and fake.read == set(nvml)
    assert [g["label"] for g in result.gpus] == [f"gpu{i}" for i in range(len(nvml))]
    assert (result.to_frame()["gpu0_util_percent"] == 30 + nvml[0]).all()
    matching = [w for w in result.warnings if "power_w" not in w]  # NVML 1 reads no power
    assert any(warning in w for w in matching) if warning else not matching


@pytest.mark.parametrize("visible, reason", [
    ("-1", "hides every GPU"), ("", "hides every GPU"), ("9", "index below 4"), ("1,1", "twice")])
def test_cuda_visible_devices_that_hide_every_gpu(plain_process, visible, reason):
    plain_process.setenv("CUDA_VISIBLE_DEVICES", visible)
    fake = FakeNVML(count=4)
    result = _run(fake)
    assert reason in result.gpu_reason and "CUDA_VISIBLE_DEVICES" in result.gpu_reason
    assert result.gpus == () and not result.gpu_available and fake.read == set()
    assert (fake.inits, fake.shutdowns) == (1, 1)
    assert list(result.to_frame().columns) == ["time_s", *CPU_COLUMNS]


def test_torch_uuids_decide_when_cuda_is_initialized(plain_process):
    """CUDA's FASTEST_FIRST order can differ from NVML's: the UUID match follows torch's order."""
    plain_process.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # would say NVML 0, 1
    plain_process.setitem(sys.modules, "torch", SimpleNamespace(cuda=FakeTorchCuda([2, 0, None])))
    fake = FakeNVML(count=4, byte_uuids=True)
    result = _run(fake)
    assert [(g["cuda_index"], g["nvml_index"], g["uuid"]) for g in result.gpus] == [(0, 2, UUIDS[2]),
                                                                                     (1, 0, UUIDS[0])]
    assert (result.to_frame()["gpu1_util_percent"] == 30).all() and fake.read == {0, 2}
    assert any("cuda:2 (UUID GPU-ffff0000-0000) matches no NVML device" in w for w in result.warnings)


def test_torch_imported_without_cuda_uses_cuda_visible_devices(plain_process):
    plain_process.setenv("CUDA_VISIBLE_DEVICES", "1")
    plain_process.setitem(sys.modules, "torch", SimpleNamespace(cuda=FakeTorchCuda([0], initialized=False)))
    result = _run(FakeNVML(count=4))
    assert [g["nvml_index"] for g in result.gpus] == [1]


def test_mig_entries_list_every_gpu_with_a_warning(plain_process):
    plain_process.setenv("CUDA_VISIBLE_DEVICES", "MIG-0aaa1111-0000")
    result = _run(FakeNVML(count=3))
    assert [(g["label"], g["cuda_index"], g["nvml_index"]) for g in result.gpus] == [
        ("gpu0", None, 0), ("gpu1", None, 1), ("gpu2", None, 2)]
    assert any("MIG" in w and "NVML index" in w for w in result.warnings)


def test_zero_gpus_keeps_its_message_whatever_cuda_visible_devices_says(plain_process):
    plain_process.setenv("CUDA_VISIBLE_DEVICES", "0")
    result = _run(FakeNVML(count=0))
    assert result.gpu_reason == "NVML reports 0 GPUs"
