"""A tiny builder of synthetic Kineto (Chrome-trace) JSON for tests with exact expectations.

Each method appends events shaped like the ones torch.profiler writes and returns the host-side
event (a dict), so a test can state its expectations from the numbers it passed in::

    b = TraceBuilder()
    b.step(0, ts=0, dur=1000)
    with_op = b.cpu_op("aten::linear", ts=10, dur=100)
    b.launch("gemm", ts=20, dur=5, gpu_ts=40, gpu_dur=30)
    trace = load_trace(b.write(tmp_path / "t.json"))

Times are microseconds relative to ``base_us`` (added on write so timestamps look real).
Correlation and external ids are assigned automatically; GPU events get an ``ac2g`` flow like
Kineto's. Copies: ``memcpy("HtoD", "Pageable", ...)`` writes ``Memcpy HtoD (Pageable -> Device)``.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

_COPY_ENDS = {"HtoD": ("{mem}", "Device"), "DtoH": ("Device", "{mem}"), "DtoD": ("Device", "Device")}


class TraceBuilder:
    def __init__(self, *, pid: int = 1000, tid: int = 1000, device: int = 0, stream: int = 7,
                 base_us: float = 1_000_000_000_000.0, rank: int | None = None, with_stack: bool = False,
                 gpu_name: str = "NVIDIA Test GPU", world_size: int | None = None):
        self.world_size = world_size  # distributedInfo's, with a rank: 8 (one job of up to 8 ranks) unless given
        self.pid, self.tid, self.device, self.stream = pid, tid, device, stream
        self.base_us, self.rank, self.with_stack, self.gpu_name = base_us, rank, with_stack, gpu_name
        self.events: list[dict] = []
        self._next_id = 1
        self._python_stack: list[tuple[int, float]] = []
        self._devices: list[dict] | None = None
        self.metadata: dict = {}  # more top-level keys (e.g. "perfkit_profile": {...})

    def device_properties(self, devices: list[dict]) -> None:
        """Write these ``deviceProperties`` entries instead of the one test GPU."""
        self._devices = devices

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _add(self, cat: str, name: str, ts: float, dur: float, *, pid=None, tid=None, **args) -> dict:
        event = {"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
                 "tid": self.tid if tid is None else tid, "ts": ts, "dur": dur,
                 "args": {k: v for k, v in args.items() if v is not None}}
        self.events.append(event)
        return event

    # --- host side ---------------------------------------------------------------------------
    def cpu_op(self, name: str, ts: float, dur: float, *, tid=None, external_id=None) -> dict:
        return self._add("cpu_op", name, ts, dur, tid=tid, **{"External id": external_id or self._id()})

    def annotation(self, name: str, ts: float, dur: float, *, tid=None) -> dict:
        """A record_function range (``user_annotation``), e.g. ``"## train/sample ##"``."""
        return self._add("user_annotation", name, ts, dur, tid=tid, **{"External id": self._id()})

    def step(self, number: int, ts: float, dur: float) -> dict:
        return self.annotation(f"ProfilerStep#{number}", ts, dur)

    def dataloader(self, ts: float, dur: float) -> dict:
        return self.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ts, dur)

    def runtime(self, name: str, ts: float, dur: float, *, tid=None, correlation=None, cat="cuda_runtime",
                **args) -> dict:
        """A CUDA runtime (or driver, ``cat="cuda_driver"``) call such as ``cudaStreamSynchronize``."""
        return self._add(cat, name, ts, dur, tid=tid, correlation=correlation or self._id(), **args)

    def python(self, name: str, ts: float, dur: float, *, tid=None) -> dict:
        """A python_function frame, e.g. ``"train.py(42): step"``; parent ids follow time nesting."""
        while self._python_stack and self._python_stack[-1][1] <= ts:
            self._python_stack.pop()
        parent = self._python_stack[-1][0] if self._python_stack else None
        pid_ = self._id()
        self._python_stack.append((pid_, ts + dur))
        return self._add("python_function", name, ts, dur, tid=tid,
                         **{"Python id": pid_, "Python parent id": parent})

    # --- GPU side ----------------------------------------------------------------------------
    def gpu(self, cat: str, name: str, ts: float, dur: float, *, correlation=None, stream=None, device=None,
            **args) -> dict:
        stream = self.stream if stream is None else stream
        device = self.device if device is None else device
        return self._add(cat, name, ts, dur, pid=device, tid=stream, device=device, stream=stream,
                         correlation=correlation, **args)

    def kernel(self, name: str, ts: float, dur: float, **kw) -> dict:
        return self.gpu("kernel", name, ts, dur, **kw)

    def launch(self, kernel: str, ts: float, dur: float, gpu_ts: float, gpu_dur: float, *,
               launch_name="cudaLaunchKernel", cat="cuda_runtime", tid=None, stream=None) -> tuple[dict, dict]:
        """A launch call and the kernel it starts, linked by correlation id and an ac2g flow."""
        host = self.runtime(launch_name, ts, dur, tid=tid, cat=cat)
        gpu = self.kernel(kernel, gpu_ts, gpu_dur, correlation=host["args"]["correlation"], stream=stream)
        self._flow(host, gpu)
        return host, gpu

    def memcpy(self, direction: str, memory: str, ts: float, dur: float, gpu_ts: float, gpu_dur: float,
               nbytes: int, *, launch_name="cudaMemcpyAsync", tid=None, stream=None) -> tuple[dict, dict]:
        """A copy launch and its GPU copy: ``direction`` HtoD/DtoH/DtoD, ``memory`` Pageable/Pinned."""
        src, dst = (end.format(mem=memory) for end in _COPY_ENDS[direction])
        host = self.runtime(launch_name, ts, dur, tid=tid)
        gpu = self.gpu("gpu_memcpy", f"Memcpy {direction} ({src} -> {dst})", gpu_ts, gpu_dur,
                       correlation=host["args"]["correlation"], stream=stream, bytes=nbytes)
        self._flow(host, gpu)
        return host, gpu

    def memset(self, ts: float, dur: float, gpu_ts: float, gpu_dur: float, nbytes: int = 0) -> tuple[dict, dict]:
        host = self.runtime("cudaMemsetAsync", ts, dur)
        gpu = self.gpu("gpu_memset", "Memset (Device)", gpu_ts, gpu_dur,
                       correlation=host["args"]["correlation"], bytes=nbytes)
        return host, gpu

    def sync(self, name: str, ts: float, dur: float, *, gpu_kind: str | None = None, gpu_ts=None, gpu_dur=0.0,
             tid=None) -> dict:
        """A blocking runtime call; ``gpu_kind`` (e.g. "Stream Sync") also writes its cuda_sync event."""
        host = self.runtime(name, ts, dur, tid=tid)
        if gpu_kind:
            self.gpu("cuda_sync", gpu_kind, ts if gpu_ts is None else gpu_ts, gpu_dur,
                     correlation=host["args"]["correlation"], cuda_sync_kind=gpu_kind)
        return host

    def _flow(self, host: dict, gpu: dict) -> None:
        fid = host["args"]["correlation"]
        self.events.append({"ph": "s", "id": fid, "pid": host["pid"], "tid": host["tid"], "ts": host["ts"],
                            "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": fid, "pid": gpu["pid"], "tid": gpu["tid"], "ts": gpu["ts"],
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})

    # --- output ------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        events = []
        for e in self.events:
            e = dict(e, args=dict(e.get("args", {})))
            e["ts"] = e["ts"] + self.base_us
            events.append(e)
        devices = self._devices if self._devices is not None else [{"id": self.device, "name": self.gpu_name}]
        doc = {"schemaVersion": 1, "deviceProperties": devices, "traceEvents": events}
        if self.rank is not None:
            world = self.world_size if self.world_size is not None else max(8, self.rank + 1)
            doc["distributedInfo"] = {"rank": self.rank, "world_size": world}
        if self.with_stack:
            doc["with_stack"] = 1
        return {**doc, **self.metadata}

    def write(self, path) -> Path:
        """Write JSON (gzip when the name ends in .gz) and return the path."""
        path = Path(path)
        data = json.dumps(self.to_dict()).encode()
        path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
        return path
