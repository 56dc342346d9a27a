"""perfkit gpu-kernels on every real trace, and its GEMM FLOPs against a count by hand from the raw JSON."""
import bisect
import gzip
import json
import math
from pathlib import Path

import orjson
import pytest

from conftest import ROOT, SHARED_TRACES as SHARED, loaded_trace, shared_traces
from perfkit.analysis.gpu_kernels import kernels
from perfkit.cli import main

pytestmark = pytest.mark.slow

DATA = sorted((ROOT / "data" / "traces" / "cpu").glob("*.json.gz")) + [ROOT / "data" / "traces" / "ranks" /
                                                                       "ddp4_slow_dataloader"]
TRACES = shared_traces() + [p for p in DATA if p.exists()]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_runs_on_every_trace(path, capsys):
    assert main(["kernels", str(path)]) == 0
    text = capsys.readouterr().out
    assert main(["kernels", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    if not doc["has_gpu"]:
        assert "no GPU activity" in text and doc["kernels"] == []
        return
    assert doc["kernels"] and "kernel" in text
    # every GPU event is in the table, but those launched before the window (the previous step's tail)
    assert sum(k["calls"] for k in doc["kernels"]) + doc["totals"]["before_window_events"] == _raw_gpu_events(path)
    shapes = any("Input Dims" in (e.get("args") or {}) for e in _events(path))
    assert shapes or any("record_shapes=True" in w for w in doc["warnings"])
    # no figure above its roof, anywhere (a percentage of a peak above 100 is a bug by definition)
    assert all(r["pct_of_peak"] is None or r["pct_of_peak"] <= 100 for r in doc["ops"])
    assert all(r["pct_of_roof"] is None or r["pct_of_roof"] <= 100 for r in doc["shapes"])
    assert doc["totals"]["mfu"] is None or 0 <= doc["totals"]["mfu"] <= 1


if not TRACES:
    def test_real_traces_present():
        pytest.skip("../shared/traces/public not found: real traces live there (absent on a fresh clone)")


def _events(path: Path) -> list:
    files = sorted(path.glob("*.json*")) if path.is_dir() else [path]
    out = []
    for f in files:
        data = f.read_bytes()
        doc = orjson.loads(gzip.decompress(data) if f.name.endswith(".gz") else data)
        out += doc["traceEvents"] if isinstance(doc, dict) else doc
    return out


def _raw_gpu_events(path: Path) -> int:
    return sum(1 for e in _events(path) if e.get("ph") == "X"
               and str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "memcpy", "gpu_memset", "memset"))


# --- GEMM FLOPs by hand: 2*M*N*K over the GEMM ops that are the innermost op around a GPU launch ---------

def _mnk(name, dims):
    a, b = (dims[1], dims[2]) if name in ("aten::addmm", "aten::baddbmm") else (dims[0], dims[1])
    if name == "aten::linear":
        return math.prod(a[:-1]), b[0], a[-1]
    batch = max(math.prod(a[:-2]), math.prod(b[:-2]))
    return batch * (a[-2] if len(a) > 1 else 1), (b[-1] if len(b) > 1 else 1), a[-1]


GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear", "aten::matmul")
KNOWN_TYPES = ("float", "c10::Half", "c10::BFloat16", "double")


def hand_owners(events: list) -> dict:
    """Per GPU event (by id()): the innermost host op around its launch call (correlation id), from the raw events."""
    gpu = {}
    for e in events:
        if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset") and \
                "correlation" in (e.get("args") or {}):
            gpu.setdefault(e["args"]["correlation"], []).append(e)
    ops = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator", "operator") and \
                not str(e["name"]).startswith("ProfilerStep#"):
            ops.setdefault((e["pid"], e["tid"]), []).append(e)
    for thread in ops.values():  # latest start last; at one start, the shortest, then the first recorded, last
        order = {id(o): i for i, o in enumerate(thread)}
        thread.sort(key=lambda o: (o["ts"], -o["dur"], -order[id(o)]))
    starts = {key: [o["ts"] for o in thread] for key, thread in ops.items()}
    owners = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime") and (e.get("args") or {}).get("correlation") \
                in gpu:
            # the innermost op around the launch: of the ops that start at or before it and end at or after
            # it, the latest-starting (the shortest at a tie), found walking back from the last start <= it
            thread = ops.get((e["pid"], e["tid"]), [])
            i = bisect.bisect_right(starts.get((e["pid"], e["tid"]), []), e["ts"])
            while i > 0 and thread[i - 1]["ts"] + thread[i - 1]["dur"] < e["ts"] + e["dur"]:
                i -= 1
            if i > 0:
                for k in gpu[e["args"]["correlation"]]:
                    owners[id(k)] = thread[i - 1]
    return owners


def hand_gemm_flops(events: list) -> float:
    total = 0.0
    for o in {id(o): o for o in hand_owners(events).values()}.values():
        args = o.get("args") or {}
        dims, types = args.get("Input Dims"), args.get("Input type") or []
        if o["name"] in GEMMS and dims and types and types[0] in KNOWN_TYPES:
            m, n, k = _mnk(o["name"], dims)
            total += 2.0 * m * n * k
    return total


WITH_SHAPES = [p for p in shared_traces() if p.stat().st_size < 5_000_000]


@pytest.mark.parametrize("path", WITH_SHAPES, ids=lambda p: p.name)
def test_gemm_flops_match_a_count_by_hand(path):
    events = _events(path)
    if not any("Input Dims" in (e.get("args") or {}) for e in events):
        pytest.skip(f"{path.name} was recorded without record_shapes")
    expected = hand_gemm_flops(events)
    got = kernels(loaded_trace(path)).totals.get("gemm_flops", 0.0)
    assert got == pytest.approx(expected, rel=1e-9)


B200 = SHARED / "tracelens_b200_serving_eager_rank0.json.gz"


@pytest.mark.skipif(not B200.exists(), reason="../shared/traces/public not found (absent on a fresh clone)")
def test_a_kernel_is_classed_by_its_op_not_by_its_template_arguments():
    """The B200 serving trace's quantize kernel, launched in vllm::moe_forward, mentions flashinfer:: in its
    signature (the name alone read "attention"); the KV-cache write kernel is named "..._flash_kernel"."""
    events = _events(B200)
    owners = hand_owners(events)
    table = kernels(loaded_trace(B200)).kernels.set_index("name")
    for needle, op in (("quantize_with_block_size", "vllm::moe_forward"),
                       ("reshape_and_cache_flash_kernel", "_C_cache_ops::reshape_and_cache_flash")):
        mine = [e for e in events if e.get("cat") == "kernel" and needle in e["name"]]
        assert {owners[id(e)]["name"] for e in mine} == {op}
        (name,) = {e["name"] for e in mine}
        assert table.at[name, "class"] == "elementwise"
        assert table.at[name, "calls"] == len(mine) == 36
        assert table.at[name, "total_us"] == pytest.approx(sum(e["dur"] for e in mine))
