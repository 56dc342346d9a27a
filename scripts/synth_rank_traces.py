"""Write the shipped multi-rank example: a synthetic 4-rank data-parallel job, one Kineto trace per rank.

    .venv/bin/python scripts/synth_rank_traces.py                 # -> data/traces/ranks/
    .venv/bin/python scripts/synth_rank_traces.py --out /tmp/r    # elsewhere (the test compares bytes)

perfkit's own workloads run on one CPU, and a multi-rank NCCL job needs several GPUs, so the
``ranks`` notebook's default input is simulated, not recorded. It is written in the shape of the
traces ``torch.profiler`` + ``tensorboard_trace_handler`` write on a multi-GPU DDP run (Kineto
schema 1: ``distributedInfo``, ``deviceProperties``, ``ProfilerStep#N`` and DataLoader annotations,
``cpu_op`` -> ``cudaLaunchKernel`` -> ``kernel`` with correlation ids and ``ac2g`` flows, NCCL
all-reduce kernels on their own stream, ``python_function`` frames as ``with_stack=True`` records
them, whole-microsecond timestamps) and follows the timing rules of a synchronous job (``simulate``):

* each rank loads a batch (DataLoader), copies it to its GPU, runs forward and backward; DDP
  launches one all-reduce per gradient bucket as the bucket's gradients are computed;
* an all-reduce kernel starts on a rank when that rank reaches it and ends on every rank a fixed
  transfer time after the *last* rank reached it (the early ranks wait inside the kernel);
* the optimizer waits for the all-reduces (``cudaStreamWaitEvent``), ``loss.item()`` blocks the host
  until the GPU is done, and the next step starts.

Rank 2's DataLoader takes 2 ms longer every step (``SLOW_RANK``, ``SLOW_LOADER_US``): it reaches
each all-reduce last, the other ranks wait for it, and ``perfkit.ranks`` names it a straggler whose
cause is input. Durations get a seeded few-percent jitter, so the output is byte-for-byte the same on
every run (gzip without a timestamp).
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "ddp4_slow_dataloader"
FORMAT_VERSION = 1
WORLD, STEPS, SEED = 4, 6, 2024
SLOW_RANK, SLOW_LOADER_US = 2, 2000
LOADER_US = 3000             # every other rank's DataLoader time per step
BASE_US = 1_717_000_000_000_000  # timestamps look like Kineto's (microseconds since the epoch)
GPU = {"name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_031_714_816, "computeMajor": 8, "computeMinor": 0,
       "numSms": 108}
COMPUTE, COMM = 7, 20        # CUDA streams: default compute stream, NCCL's stream
LAYERS = 6
GEMM_US, RELU_US, BWD_GEMM_US, ADAM_US = 420, 40, 380, 260
ALLREDUCE_US = 900           # transfer time of the gradients once every rank has arrived
# Layers whose gradients make up each DDP bucket, in backward order: the model is small, so its
# gradients fit in one bucket (DDP's default bucket_cap_mb=25), all-reduced after the backward pass.
BUCKETS = ((5, 4, 3, 2, 1, 0),)
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
GEMM = "sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel"
RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
        "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)>(int)")
ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>"
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


class Rank:
    """The events of one rank's trace and the clocks of its host thread and GPU streams (us)."""

    def __init__(self, rank: int, rng: random.Random):
        self.rank, self.rng = rank, rng
        self.pid = self.tid = 4100 + rank
        self.host = 0.0
        self.stream_free = {COMPUTE: 0.0, COMM: 0.0}
        self.events: list[dict] = []
        self._id = 100 * (rank + 1)
        self._frames: list[dict] = []  # open Python frames, innermost last
        self._python_id = 0

    def next_id(self) -> int:
        self._id += 1
        return self._id

    def jitter(self, us: float, spread: float = 0.03) -> int:
        return max(1, round(us * (1 + self.rng.uniform(-spread, spread))))

    def add(self, cat: str, name: str, ts: float, dur: float, *, pid=None, tid=None, **args) -> dict:
        event = {"ph": "X", "cat": cat, "name": name, "pid": self.pid if pid is None else pid,
                 "tid": self.tid if tid is None else tid, "ts": round(ts), "dur": max(0, round(dur)), "args": args}
        self.events.append(event)
        return event

    def op(self, name: str, dur: float, cat: str = "cpu_op") -> dict:
        """A host range starting now; the caller advances ``host`` past its children."""
        return self.add(cat, name, self.host, dur, **{"External id": self.next_id()})

    def launch(self, kernel: str, gpu_us: float, *, stream: int = COMPUTE, ready: float = 0.0,
               external: int = 0, runtime: str = "cudaLaunchKernel", cat: str = "kernel", **gpu_args) -> dict:
        """A launch call now (8-12 us) and its GPU work: it starts after the call, after the
        stream's previous work and after ``ready``; returns the GPU event."""
        corr = self.next_id()
        call = self.add("cuda_runtime", runtime, self.host, self.jitter(10, 0.2),
                        **{"External id": external, "cbid": 211, "correlation": corr})
        start = max(call["ts"] + 5, self.stream_free[stream], ready)
        gpu = self.add(cat, kernel, start, self.jitter(gpu_us), pid=self.rank, tid=stream,
                       **{"External id": external, "queued": 0, "device": self.rank, "context": 1,
                          "stream": stream, "correlation": corr, **gpu_args})
        self.stream_free[stream] = gpu["ts"] + gpu["dur"]
        self.flow(call, gpu)
        self.host = call["ts"] + call["dur"] + 2
        return gpu

    def flow(self, call: dict, gpu: dict) -> None:
        fid = call["args"]["correlation"]
        self.events.append({"ph": "s", "id": fid, "pid": call["pid"], "tid": call["tid"], "ts": call["ts"],
                            "cat": "ac2g", "name": "ac2g"})
        self.events.append({"ph": "f", "id": fid, "pid": gpu["pid"], "tid": gpu["tid"], "ts": gpu["ts"],
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})

    def close(self, event: dict) -> None:
        """End a host range at the current host time."""
        event["dur"] = round(self.host) - event["ts"]

    def frame(self, name: str) -> dict:
        """Open a Python frame (``python_function``, "file.py(line): func") now, inside the open one."""
        self._python_id += 1
        parent = self._frames[-1]["args"]["Python id"] if self._frames else None
        event = self.add("python_function", name, self.host, 0, **{"Python id": self._python_id,
                                                                    "Python parent id": parent, "Python thread": 0})
        self._frames.append(event)
        self.host += 2
        return event

    def leave(self) -> None:
        """Close the innermost Python frame now."""
        self.host += 1
        self.close(self._frames.pop())


def load_and_forward(r: Rank) -> None:
    r.frame("torch/utils/data/dataloader.py(701): __next__")
    loader = r.op(LOADER, 0, cat="user_annotation")
    r.host += r.jitter(LOADER_US + (SLOW_LOADER_US if r.rank == SLOW_RANK else 0))
    r.close(loader)
    r.leave()
    r.frame("<built-in method to of Tensor object at 0x7f3a2c1e5d00>")
    to = r.op("aten::to", 0)
    r.host += 6
    r.launch("Memcpy HtoD (Pinned -> Device)", 170, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
             external=to["args"]["External id"], bytes=4 * 2**20)
    r.close(to)
    r.leave()
    r.frame("train.py(31): forward")
    for _ in range(LAYERS):
        for frame, name, kernel, us in (("torch/nn/modules/linear.py(125): forward", "aten::linear", GEMM, GEMM_US),
                                        ("torch/nn/functional.py(1704): relu", "aten::relu", RELU, RELU_US)):
            r.frame(frame)
            op = r.op(name, 0)
            r.host += r.jitter(18)
            r.launch(kernel, us, external=op["args"]["External id"])
            r.close(op)
            r.leave()
    r.leave()


def backward(r: Rank) -> list[dict]:
    """Gradient kernels, layer by layer; DDP's all-reduce of each bucket, launched on the host as
    soon as the bucket's last gradient kernel is launched, starts on the GPU once that kernel is
    done. Returns the all-reduce kernels (their ends are set by ``finish_collectives``)."""
    reduces = []
    r.frame("torch/_tensor.py(626): backward")
    for bucket in BUCKETS:
        for _layer in bucket:
            op = r.op("autograd::engine::evaluate_function: AddmmBackward0", 0)
            r.host += r.jitter(25)
            for _ in range(2):  # grad of the input and of the weight
                r.launch(GEMM, BWD_GEMM_US, external=op["args"]["External id"])
            r.close(op)
        op = r.op("nccl:all_reduce", 0, cat="cpu_op")
        r.host += r.jitter(15)
        reduces.append(r.launch(ALLREDUCE, 1, stream=COMM, ready=r.stream_free[COMPUTE],
                                external=op["args"]["External id"]))
        r.close(op)
    r.leave()
    return reduces


def finish_collectives(ranks: list[Rank], reduces: list[list[dict]]) -> None:
    """Each all-reduce ends on every rank ALLREDUCE_US after the last rank's kernel started."""
    for kernels in zip(*reduces):
        end = max(k["ts"] for k in kernels) + ALLREDUCE_US
        for r, k in zip(ranks, kernels):
            k["dur"] = end - k["ts"] + r.rng.randint(0, 2)
            r.stream_free[COMM] = k["ts"] + k["dur"]


def optimizer_and_item(r: Rank) -> None:
    r.frame("torch/optim/adam.py(213): step")
    opt = r.op("Optimizer.step#Adam.step", 0, cat="user_annotation")
    r.add("cuda_runtime", "cudaStreamWaitEvent", r.host, 4, **{"External id": 0, "cbid": 147,
                                                                "correlation": r.next_id()})
    r.host += 6
    op = r.op("aten::_fused_adam_", 0)
    r.host += r.jitter(30)
    r.launch(ADAM, ADAM_US, ready=r.stream_free[COMM], external=op["args"]["External id"])
    r.close(op)
    r.close(opt)
    r.leave()
    r.frame("train.py(52): log_loss")
    r.frame("<built-in method item of Tensor object at 0x7f3a2c1e5e40>")
    item = r.op("aten::item", 0)
    dense = r.op("aten::_local_scalar_dense", 0)
    copy = r.launch("Memcpy DtoH (Device -> Pageable)", 3, runtime="cudaMemcpyAsync", cat="gpu_memcpy",
                    external=dense["args"]["External id"], bytes=4)
    done = copy["ts"] + copy["dur"]
    sync = r.add("cuda_runtime", "cudaStreamSynchronize", r.host, max(2, done + 3 - r.host),
                 **{"External id": 0, "cbid": 131, "correlation": r.next_id()})
    r.host = sync["ts"] + sync["dur"] + 2
    r.close(dense)
    r.host += 3
    r.close(item)
    r.leave()
    r.host += r.jitter(40)  # logging, the training loop's bookkeeping
    r.leave()


def simulate(seed: int = SEED) -> list[Rank]:
    """Every rank's events over ``STEPS`` profiled steps (see the module doc)."""
    rng = random.Random(seed)
    ranks = [Rank(i, random.Random(rng.random())) for i in range(WORLD)]
    for r in ranks:
        r.host = r.stream_free[COMPUTE] = r.stream_free[COMM] = 1000.0 + r.rng.randint(0, 30)
    for step in range(STEPS):
        steps = [r.op(f"ProfilerStep#{step}", 0, cat="user_annotation") for r in ranks]
        for r in ranks:
            r.host += 8
            r.frame("train.py(44): train_step")
            load_and_forward(r)
        reduces = [backward(r) for r in ranks]
        finish_collectives(ranks, reduces)
        for r, marker in zip(ranks, steps):
            optimizer_and_item(r)
            r.leave()
            r.close(marker)
            r.host += 5
    return ranks


def document(r: Rank) -> dict:
    meta = [{"ph": "M", "name": "process_name", "pid": r.pid, "tid": 0, "args": {"name": f"python (rank {r.rank})"}},
            {"ph": "M", "name": "process_name", "pid": r.rank, "tid": 0, "args": {"name": f"GPU {r.rank}"}},
            {"ph": "M", "name": "thread_name", "pid": r.pid, "tid": r.tid, "args": {"name": "main thread"}}]
    events = sorted(r.events, key=lambda e: (e["ts"], e["ph"] != "X", -e.get("dur", 0)))
    for e in events:
        e["ts"] += BASE_US
    return {"schemaVersion": 1,
            "deviceProperties": [{"id": i, **GPU} for i in range(WORLD)],
            "distributedInfo": {"backend": "nccl", "rank": r.rank, "world_size": WORLD},
            "with_stack": 1,
            "perfkit_synthetic": {"generator": "scripts/synth_rank_traces.py", "seed": SEED,
                                  "slow_rank": SLOW_RANK, "slow_loader_us": SLOW_LOADER_US},
            "traceEvents": meta + events}


def write(out: Path) -> list[dict]:
    """Write ``out/NAME/rank{r}.pt.trace.json.gz`` and ``out/MANIFEST.json``; returns the manifest rows."""
    folder = out / NAME
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for r in simulate():
        data = json.dumps(document(r), indent=1).encode()
        path = folder / f"rank{r.rank}.pt.trace.json.gz"
        path.write_bytes(gzip.compress(data, mtime=0))
        files.append({"file": f"{NAME}/{path.name}", "rank": r.rank, "events": len(r.events), "bytes": path.stat().st_size})
    manifest = {"format_version": FORMAT_VERSION, "generator": "scripts/synth_rank_traces.py", "synthetic": True,
                "sets": {NAME: {"world_size": WORLD, "steps": STEPS, "seed": SEED, "slow_rank": SLOW_RANK,
                                "slow_loader_us": SLOW_LOADER_US, "loader_us": LOADER_US, "gpu": GPU["name"]}},
                "files": files}
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return files


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "data" / "traces" / "ranks", help="output folder")
    args = p.parse_args(argv)
    files = write(args.out)
    total = sum(f["bytes"] for f in files)
    print(f"wrote {len(files)} rank traces ({total / 1024:.0f} KiB) to {args.out / NAME}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
