"""Multi-rank test inputs: a synthetic synchronous job with exact expectations, and copies of the
real DLRM ranks (symlinked, renumbered or stretched) in a temporary directory."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from conftest import shared_trace
from tracebuilder import TraceBuilder

DLRM = "param_v100_dlrm_rank{}.pt.trace.json.gz"
ALLREDUCE = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
PERIOD_US = 20_000
GEMM_US, TAIL_US, STEP_TAIL_US, OVERLAP_US = 3000, 500, 100, 200


def jitter(rank: int, step: int) -> int:
    """A few microseconds of rank- and step-dependent noise (0..19 us)."""
    return (7 * rank + 13 * step) % 20


def arrival(step: int, load_us: float, early_us: float) -> float:
    """GPU start of a rank's all-reduce: after its DataLoader and its 3 ms GEMM."""
    return step * PERIOD_US - early_us + load_us + 20 + GEMM_US


def sync_job(directory: Path, dataloader_us, *, early_us=None, steps: int = 4) -> Path:
    """One file per rank of a data-parallel job. Step s of rank r starts at ``s * PERIOD_US -
    early_us[r]``: DataLoader for ``dataloader_us[r] + jitter`` us, a 3 ms GEMM, then an all-reduce
    that starts when the rank arrives and ends on every rank ``TAIL_US`` after the last arrival, with
    a 200 us kernel on another stream overlapping it; the step ends ``STEP_TAIL_US`` later."""
    directory.mkdir(parents=True, exist_ok=True)
    early_us = early_us or [0] * len(dataloader_us)
    loads = [[dl + jitter(r, s) for s in range(steps)] for r, dl in enumerate(dataloader_us)]
    ends = [max(arrival(s, loads[r][s], early_us[r]) for r in range(len(loads))) + TAIL_US for s in range(steps)]
    for r in range(len(loads)):
        b = TraceBuilder(rank=r, world_size=len(loads))
        for s in range(steps):
            start = s * PERIOD_US - early_us[r]
            load, a = loads[r][s], arrival(s, loads[r][s], early_us[r])
            b.step(s, start, ends[s] + STEP_TAIL_US - start)
            b.dataloader(start, load)
            b.launch("gemm", start + load, 10, gpu_ts=start + load + 20, gpu_dur=GEMM_US)
            b.launch(ALLREDUCE, start + load + 30, 10, gpu_ts=a, gpu_dur=ends[s] - a, stream=20)
            b.launch("overlapped", start + load + 50, 10, gpu_ts=a + 100, gpu_dur=OVERLAP_US, stream=8)
        b.write(directory / f"rank{r}.json")
    return directory


def dlrm_dir(directory: Path) -> Path:
    """The 8 DLRM ranks, symlinked into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for r in range(8):
        (directory / DLRM.format(r)).symlink_to(shared_trace(DLRM.format(r)))
    return directory


def read(path: Path) -> dict:
    return json.loads(gzip.decompress(Path(path).read_bytes()))


def write(doc: dict, path: Path) -> Path:
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def renumbered(doc: dict, rank: int, world_size: int | None = None) -> dict:
    info = dict(doc.get("distributedInfo", {}), rank=rank)
    return dict(doc, distributedInfo=info if world_size is None else dict(info, world_size=world_size))


def stretched(doc: dict, factor: float) -> dict:
    """Every timestamp at or after the first step start, and every such event's duration, scaled
    by ``factor`` about that start: the rank's timeline runs ``factor`` times slower."""
    events = [dict(e) for e in doc["traceEvents"]]
    s0 = min(e["ts"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    for e in events:
        if isinstance(e.get("ts"), (int, float)) and e["ts"] >= s0:
            e["ts"] = s0 + (e["ts"] - s0) * factor
            if isinstance(e.get("dur"), (int, float)):
                e["dur"] = e["dur"] * factor
    return dict(doc, traceEvents=events)


def copies_of_one_rank(directory: Path, source_rank: int = 0, n: int = 8) -> Path:
    """``n`` copies of one DLRM rank, each claiming its own rank id in a world of ``n`` (or DLRM's 8, if larger)."""
    directory.mkdir(parents=True, exist_ok=True)
    doc = read(shared_trace(DLRM.format(source_rank)))
    for r in range(n):
        write(renumbered(doc, r, max(n, 8)), directory / f"copy_rank{r}.pt.trace.json.gz")
    return directory
