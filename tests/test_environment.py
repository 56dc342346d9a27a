"""environment_report fields and findings (env vars via monkeypatch), hardware_defaults."""
import contextlib
import platform
import sys
from types import SimpleNamespace

import pytest

import perfkit.bench.environment as env_mod
from perfkit.bench.environment import EnvironmentReport, environment_report, hardware_defaults
from perfkit.errors import ParameterError

from fakegpu import CUuuid

torch = pytest.importorskip("torch")
WATCHED = ("CUDA_LAUNCH_BLOCKING", "OMP_NUM_THREADS", "NCCL_DEBUG", "CUBLAS_WORKSPACE_CONFIG",
           "TORCH_CUDNN_V8_API_DISABLED", "TORCH_COMPILE_DEBUG", "TORCH_LOGS")


@pytest.fixture
def clean_env(monkeypatch):
    for name in WATCHED:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_report_fields(clean_env):
    r = environment_report()
    assert r.python == platform.python_version() and r.torch_version == torch.__version__
    assert r.cuda_available == torch.cuda.is_available()
    assert r.cpu_logical >= 1 and 1 <= r.cpu_available <= r.cpu_logical and r.cpu_model
    assert r.ram_total_bytes >= r.ram_available_bytes > 0
    assert r.torch_flags["float32_matmul_precision"] in ("highest", "high", "medium")
    frame = r.to_frame()
    assert list(frame.columns) == ["section", "key", "value"]
    assert {"python", "torch", "torch_flags", "cpu", "ram"} <= set(frame["section"])
    assert frame["value"].map(type).eq(str).all()
    if not r.cuda_available:
        assert r.devices == () and r.driver_version is None
        assert "no CUDA GPU" in " ".join(f.title for f in r.findings)
        assert not torch.cuda.is_initialized()  # cheap: no CUDA context on a CPU machine
    assert "EnvironmentReport(" in repr(r) and "<table" in r._repr_html_()


def test_env_vars_captured_by_name_and_prefix(clean_env):
    clean_env.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "1")
    clean_env.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    clean_env.setenv("PERFKIT_UNRELATED", "x")
    env = environment_report().env
    assert env["TORCHINDUCTOR_MAX_AUTOTUNE"] == "1"
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert "PERFKIT_UNRELATED" not in env and "HOME" not in env


def test_cuda_launch_blocking_is_critical(clean_env):
    clean_env.setenv("CUDA_LAUNCH_BLOCKING", "1")
    findings = environment_report().findings
    assert findings[0].severity == "critical" and "CUDA_LAUNCH_BLOCKING" in findings[0].title
    clean_env.setenv("CUDA_LAUNCH_BLOCKING", "0")
    assert all(f.severity != "critical" for f in environment_report().findings)


def test_omp_threads_findings(clean_env):
    clean_env.setattr(env_mod, "available_cores", lambda: 32)
    assert any("OMP_NUM_THREADS is unset on a 32-core" in f.title for f in environment_report().findings)
    clean_env.setattr(env_mod, "available_cores", lambda: 2)
    assert not any("OMP" in f.title for f in environment_report().findings)
    clean_env.setenv("OMP_NUM_THREADS", "64")
    found = [f for f in environment_report().findings if "OMP" in f.title]
    assert found[0].severity == "medium" and "exceeds the 2 available cores" in found[0].title
    clean_env.setenv("OMP_NUM_THREADS", "lots")
    assert any("not an integer" in f.title for f in environment_report().findings)


@pytest.mark.parametrize("name,value,severity,text", [
    ("NCCL_DEBUG", "INFO", "low", "NCCL_DEBUG=INFO"),
    ("CUBLAS_WORKSPACE_CONFIG", ":4096:8", "info", "CUBLAS_WORKSPACE_CONFIG"),
    ("TORCH_CUDNN_V8_API_DISABLED", "1", "low", "legacy API"),
    ("TORCH_COMPILE_DEBUG", "1", "low", "torch.compile debug"),
])
def test_other_env_findings(clean_env, name, value, severity, text):
    clean_env.setenv(name, value)
    found = [f for f in environment_report().findings if text in f.title]
    assert len(found) == 1 and found[0].severity == severity


def _gpu_report(**flags):
    base = {"cudnn.benchmark": False, "cudnn.deterministic": False, "float32_matmul_precision": "highest",
            "deterministic_algorithms": False, "num_threads": 8}
    return EnvironmentReport("3.11", "Linux", "2.13.0", "12.8", "91000", "570.1", True,
                             ({"index": 0, "name": "NVIDIA A100", "capability": "8.0", "memory_bytes": 80 * 2**30},),
                             "Xeon", 16, 8, 16, 2**36, 2**35, {}, {**base, **flags})


def test_gpu_findings_from_flags():
    titles = [f.title for f in _gpu_report().findings]
    assert any("TF32 matmuls are off" in t for t in titles)
    assert any("cudnn.benchmark is off" in t for t in titles)
    tuned = [f.title for f in _gpu_report(**{"cudnn.benchmark": True, "float32_matmul_precision": "high"}).findings]
    assert not any("TF32" in t or "benchmark" in t for t in tuned)
    volta = _gpu_report()
    volta.devices[0]["capability"] = "7.0"
    assert not any("TF32" in f.title for f in volta.findings)


def test_hardware_defaults_cpu(monkeypatch):
    monkeypatch.setattr(env_mod, "available_cores", lambda: 6)
    d = hardware_defaults("cpu")
    assert (d.device, d.dtype, d.pin_memory, d.compile_mode, d.num_workers) == ("cpu", "float32", False, None, 5)
    assert set(d.to_frame()["setting"]) == {"dtype", "num_workers", "pin_memory", "compile_mode", "matmul_precision"}
    assert d.to_frame()["reason"].str.len().gt(10).all()
    monkeypatch.setattr(env_mod, "available_cores", lambda: 1)
    assert hardware_defaults("cpu").num_workers == 0


class FakeCuda:
    """torch.cuda for GPUs of the given capabilities: is_bf16_supported() answers for the
    current device and, like torch's default, counts emulated bf16 (any GPU) as supported."""

    def __init__(self, *capabilities):
        self.capabilities, self.current = capabilities, 0

    def get_device_capability(self, dev):
        return self.capabilities[int(str(dev).partition(":")[2] or self.current)]

    @contextlib.contextmanager
    def device(self, dev):
        before, self.current = self.current, int(str(dev).partition(":")[2] or self.current)
        try:
            yield
        finally:
            self.current = before

    def is_bf16_supported(self, including_emulation=True):
        return including_emulation or self.capabilities[self.current][0] >= 8


@pytest.mark.parametrize("capabilities,dev,dtype,precision", [
    (((9, 0),), "cuda", "bfloat16", "high"),
    (((7, 0),), "cuda", "float32", "highest"),  # V100: bf16 only emulated
    (((7, 5), (8, 0)), "cuda:1", "bfloat16", "high"),  # asks about cuda:1, not the current GPU
    (((8, 0), (7, 5)), "cuda:1", "float32", "highest"),
])
def test_hardware_defaults_cuda_logic(capabilities, dev, dtype, precision):
    cuda = FakeCuda(*capabilities)
    d = env_mod._cuda_defaults(SimpleNamespace(cuda=cuda), dev, 4, {})
    assert (d.dtype, d.pin_memory, d.compile_mode, d.matmul_precision) == (dtype, True, "default", precision)
    assert "pinned" in d.reasons["pin_memory"] and cuda.current == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_hardware_defaults_cuda_without_gpu_raises():
    with pytest.raises(ParameterError, match="no CUDA GPU"):
        hardware_defaults("cuda")


class FakePynvml:
    """pynvml for a node whose GPUs have ``uuids`` (bytes, as older pynvml returns them)."""

    class NVMLError(Exception):
        pass

    def __init__(self, uuids):
        self.uuids, self.inits, self.shutdowns = uuids, 0, 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self):
        return b"580.159.04"

    def nvmlDeviceGetCount(self):
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return self.uuids[h].encode()

    def __getattr__(self, name):
        raise AssertionError(f"unexpected NVML call {name}")


NODE_UUIDS = [f"GPU-{i}aaa0000-1111-2222-3333-44445555666{i}" for i in range(4)]


def _fake_cuda_process(monkeypatch, torch_uuids):
    """environment_report on a process whose torch sees GPUs with ``torch_uuids`` (CUDA order)."""
    props = [SimpleNamespace(name="NVIDIA H100", major=9, minor=0, total_memory=80 * 2**30,
                             multi_processor_count=132, uuid=CUuuid(u)) for u in torch_uuids]
    fake_torch = SimpleNamespace(cuda=SimpleNamespace(get_device_properties=props.__getitem__))
    devices = tuple(env_mod._device_row(fake_torch, i) for i in range(len(props)))
    info = {"torch_version": "2.11.0", "cuda_version": "13.0", "cudnn_version": None, "cuda_available": True,
            "devices": devices, "torch_flags": {}}
    monkeypatch.setattr(env_mod, "_torch_info", lambda warnings: info)


def test_device_rows_carry_uuid_and_nvml_index(clean_env):
    """CUDA_VISIBLE_DEVICES=3,1 on a 4-GPU node: cuda:0 is NVML 3; a UUID NVML lacks gets None."""
    nvml = FakePynvml(NODE_UUIDS)
    clean_env.setitem(sys.modules, "pynvml", nvml)
    _fake_cuda_process(clean_env, ["3aaa0000-1111-2222-3333-444455556663", "1AAA0000-1111-2222-3333-444455556661",
                                   "ffff0000-0000-0000-0000-000000000000"])
    r = environment_report()
    assert [(d["index"], d["nvml_index"], d["uuid"]) for d in r.devices] == [
        (0, 3, NODE_UUIDS[3]), (1, 1, NODE_UUIDS[1]), (2, None, "GPU-ffff0000-0000-0000-0000-000000000000")]
    assert r.driver_version == "580.159.04" and (nvml.inits, nvml.shutdowns) == (1, 1)
    assert any(w.startswith("cuda:2 (UUID GPU-ffff0000") and "matches no NVML device" in w for w in r.warnings)
    values = r.to_frame().set_index("key")["value"]
    assert "NVML 3" in values["cuda:0"] and NODE_UUIDS[3] in values["cuda:0"] and "NVML" not in values["cuda:2"]


def test_device_rows_without_nvml_have_no_nvml_index(clean_env):
    clean_env.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    _fake_cuda_process(clean_env, ["3aaa0000-1111-2222-3333-444455556663"])
    r = environment_report()
    assert r.devices[0]["nvml_index"] is None and r.devices[0]["uuid"] == NODE_UUIDS[3]
    assert any("NVML indices unknown" in w for w in r.warnings) and r.driver_version is None
    assert len(_gpu_report().to_frame()) > 0  # rows built without uuid/nvml_index still print


def test_unreadable_uuids_keep_the_driver_version(clean_env):
    class NoUUIDs(FakePynvml):
        def nvmlDeviceGetUUID(self, h):
            raise self.NVMLError("Not Supported")

    nvml = NoUUIDs(NODE_UUIDS)
    clean_env.setitem(sys.modules, "pynvml", nvml)
    _fake_cuda_process(clean_env, ["3aaa0000-1111-2222-3333-444455556663"])
    r = environment_report()
    assert r.driver_version == "580.159.04" and r.devices[0]["nvml_index"] is None
    assert any(w.startswith("NVML cannot read the GPUs' UUIDs (Not Supported)") for w in r.warnings)
    assert (nvml.inits, nvml.shutdowns) == (1, 1)
