"""What NVML and torch each say about the visible GPUs, and perfkit's environment report and system
monitor on them, with CUDA_VISIBLE_DEVICES unset, set to an index and set to a UUID (scripts/gpu/session.py nvml)."""
import os
import subprocess
import sys
import time

CHILD = "PERFKIT_NVML_PROBE_CHILD"


def probe() -> None:
    import pynvml
    import torch

    import perfkit
    from perfkit.bench.monitor import SystemMonitor

    print("CUDA_VISIBLE_DEVICES =", os.environ.get("CUDA_VISIBLE_DEVICES"))
    pynvml.nvmlInit()
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        print("nvml", i, pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h),
              pynvml.nvmlDeviceGetPciInfo(h).busId)
    pynvml.nvmlShutdown()
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print("torch", i, p.name, repr(p.uuid), str(p.uuid), getattr(p, "pci_bus_id", None),
              getattr(p, "pci_device_id", None), getattr(p, "pci_domain_id", None))
    print(perfkit.environment_report())
    print(perfkit.environment_report().devices)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    with SystemMonitor(interval_s=0.1) as mon:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            a @ a
        torch.cuda.synchronize()
    result = mon.result()
    print(result)
    print(result.gpus)
    print(result.summary().to_string())
    print([f.title for f in result.findings])


if __name__ == "__main__":
    if os.environ.get(CHILD):
        probe()
        sys.exit()
    import pynvml

    pynvml.nvmlInit()
    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
    pynvml.nvmlShutdown()
    for visible in (None, "0", uuid if isinstance(uuid, str) else uuid.decode()):
        env = {**os.environ, CHILD: "1"}
        env.pop("CUDA_VISIBLE_DEVICES", None)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        subprocess.run([sys.executable, __file__], env=env, check=False)
