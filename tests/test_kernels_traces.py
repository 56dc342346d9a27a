"""perfkit gpu-kernels on every real trace, and its GEMM FLOPs against a count by hand from the raw JSON."""
import gzip
import json
import math
from pathlib import Path

import orjson
import pytest

from conftest import ROOT, SHARED_TRACES as SHARED, loaded_trace, shared_traces
from rawcount import launch_owners, union_length
from perfkit.analysis.gpu_kernels import kernels
from perfkit.cli import main

pytestmark = pytest.mark.slow

DATA = sorted((ROOT / "data" / "traces" / "cpu").glob("*.json.gz")) + [ROOT / "data" / "traces" / "ranks" /
                                                                       "ddp4_slow_dataloader"] + \
    sorted((ROOT / "data" / "traces" / "gpu").glob("*.json.gz"))
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
    # no figure above its roof, anywhere, but one marked as read from L2 (a modeling error never shows a percentage)
    assert all(r["pct_of_peak"] is None or r["pct_of_peak"] <= 100 or r["bound"] == "memory (L2)" for r in doc["ops"])
    assert all(r["pct_of_roof"] is None or r["pct_of_roof"] <= 100 or r["bound"] == "memory (L2)"
               for r in doc["shapes"])
    cached = [r for r in doc["shapes"] if r["bound"] == "memory (L2)"]
    assert not cached or any("fit in the GPU's L2" in w for w in doc["warnings"])
    assert doc["totals"]["mfu"] is None or 0 <= doc["totals"]["mfu"] <= 1
    # a finding prints values: no recorded JSON (Input Dims spread over lines by some exporters) in its evidence
    for f in doc["findings"]:
        assert not any(isinstance(v, str) and ("\n" in v or v.startswith("[[")) for v in f["evidence"].values()), f


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


def hand_gemm_flops(events: list) -> float:
    total = 0.0
    for o in {id(o): o for o in launch_owners(events).values()}.values():
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
    owners = launch_owners(events)
    table = kernels(loaded_trace(B200)).kernels.set_index("name")
    for needle, op in (("quantize_with_block_size", "vllm::moe_forward"),
                       ("reshape_and_cache_flash_kernel", "_C_cache_ops::reshape_and_cache_flash")):
        mine = [e for e in events if e.get("cat") == "kernel" and needle in e["name"]]
        assert {owners[id(e)]["name"] for e in mine} == {op}
        (name,) = {e["name"] for e in mine}
        assert table.at[name, "class"] == "elementwise"
        assert table.at[name, "calls"] == len(mine) == 36
        assert table.at[name, "total_us"] == pytest.approx(sum(e["dur"] for e in mine))


# --- FLOP and byte models by hand, each on the real trace that showed it wrong ------------------------------

GPU_TRACES = ROOT / "data" / "traces" / "gpu"
SIZE = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "long int": 8, "bool": 1}


def owned(path: Path, name: str) -> list:
    """The ops called ``name`` that launched GPU work (each the innermost op around a launch), from the raw events."""
    return list({id(o): o for o in launch_owners(_events(path)).values() if o["name"] == name}.values())


def _numel(shape) -> int:
    return math.prod(shape)


def _perfkit_sum(path: Path, name: str, column: str) -> float:
    inst = kernels(loaded_trace(path)).instances
    mine = inst[inst["op"] == name]
    assert mine["modeled"].astype(bool).all(), set(mine["reason"])
    return float(mine[column].sum())


def _attention_flops(op: dict, q: int, layout: str, causal: bool, backward: bool) -> float:
    b, s1, s2, d = op["args"]["Input Dims"][q]
    h, s = (s1, s2) if layout == "bhsd" else (s2, s1)
    return 4.0 * b * h * s * s * d / (2 if causal else 1) * (2.5 if backward else 1)


@pytest.mark.parametrize("path, name, q, layout, flag, causal_values, backward", [
    # fp32 SDPA on an H200: the efficient kernels' causal flag is custom_mask_type (an int), not argument 9 == "True"
    (GPU_TRACES / "transformer_fp32.pt.trace.json.gz", "aten::_efficient_attention_forward", 0, "bshd", 9, ("1", "2"),
     False),
    (GPU_TRACES / "transformer_fp32.pt.trace.json.gz", "aten::_efficient_attention_backward", 1, "bshd", 14, ("1", "2"),
     True),
    # bf16 SDPA on torch 2.11 runs cuDNN's kernels: unmodeled before (9% of GPU time)
    (GPU_TRACES / "transformer_bf16.pt.trace.json.gz", "aten::_cudnn_attention_forward", 0, "bhsd", 10, ("True",), False),
    (GPU_TRACES / "transformer_bf16.pt.trace.json.gz", "aten::_cudnn_attention_backward", 1, "bhsd", 14, ("True",), True),
])
def test_attention_flops_match_a_count_by_hand(path, name, q, layout, flag, causal_values, backward):
    ops = owned(path, name)
    assert len(ops) == 6 and all(o["args"]["Concrete Inputs"][flag] in causal_values for o in ops)  # causal, all six
    expected = sum(_attention_flops(o, q, layout, True, backward) for o in ops)
    assert _perfkit_sum(path, name, "flops") == pytest.approx(expected, rel=1e-12)


def _elementwise_bytes(path: Path, name: str, per_op) -> None:
    ops = owned(path, name)
    assert ops
    assert _perfkit_sum(path, name, "bytes") == pytest.approx(sum(per_op(o["args"]) for o in ops), rel=1e-12)


def _out_softmax(a) -> int:  # _softmax(self, dim, half_to_float, out): self read, out written (was 1.5x)
    assert len(a["Input Dims"]) == 4 and a["Input Dims"][0] == a["Input Dims"][3]
    return 2 * SIZE[a["Input type"][0]] * _numel(a["Input Dims"][0])


def _rotary(a) -> int:  # positions, query and key read and written, one cache row per position (was all 131,072)
    pos, query, key, _, cache, _ = a["Input Dims"]
    return 8 * pos[0] + 2 * 2 * (_numel(query) + _numel(key)) + 2 * pos[0] * cache[1]


def _isnan_ne(a) -> int:  # ne(x, x) inside isnan: x read once, a bool written (140% when read twice)
    (x, y), t = a["Input Dims"], a["Input type"][0]
    assert x == y
    return SIZE[t] * _numel(x) + _numel(x)


def _upsample(a) -> int:  # upsample_nearest1d(self, output_size, scales): the larger output written
    x, size = a["Input Dims"][0], int(a["Concrete Inputs"][1].strip("[]"))
    return 2 * _numel(x) + 2 * x[0] * x[1] * size


def _triton(a) -> int:  # Inductor's buffers, each at most xnumel elements
    space = int(a["Concrete Inputs"][-1])
    return sum(SIZE[t] * min(_numel(d), space) for d, t in zip(a["Input Dims"], a["Input type"]) if d)


def _vector_norm(a) -> int:  # a reduction: its input read, a scalar written
    return SIZE[a["Input type"][0]] * _numel(a["Input Dims"][0])


@pytest.mark.parametrize("file, name, per_op", [
    ("sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz", "aten::_softmax", _out_softmax),
    ("tracelens_b200_serving_eager_rank0.json.gz", "_C::rotary_embedding", _rotary),
    ("tracelens_h100_timesformer_infer_bf16.json.gz", "aten::upsample_nearest1d", _upsample),
    ("tracelens_mi300x_compile_triton_small.json.gz", "triton_poi_fused__unsafe_view_add_3", _triton),
])
def test_bytes_match_a_count_by_hand(file, name, per_op):
    path = SHARED / file
    if not path.exists():
        pytest.skip("../shared/traces/public not found (absent on a fresh clone)")
    _elementwise_bytes(path, name, per_op)


@pytest.mark.parametrize("file, name, per_op", [
    ("item_logging.pt.trace.json.gz", "aten::linalg_vector_norm", _vector_norm),
])
def test_bytes_of_the_shipped_traces_match_a_count_by_hand(file, name, per_op):
    _elementwise_bytes(GPU_TRACES / file, name, per_op)


def test_isnan_reads_its_input_once_on_the_ppo_trace():
    path = GPU_TRACES / "ppo_sync_checks.json.gz"
    events = _events(path)
    isnan = [o for o in events if o.get("name") == "aten::isnan"]
    ops = [o for o in owned(path, "aten::ne")  # the ne ops inside an isnan: same thread, within its span
           if any(p["tid"] == o["tid"] and p["ts"] <= o["ts"] and o["ts"] + o["dur"] <= p["ts"] + p["dur"] for p in isnan)]
    assert len(ops) == 300
    inst = kernels(loaded_trace(path)).instances
    labels = _labels_of(loaded_trace(path), ops)
    got = inst.set_index("label").loc[labels, "bytes"].sum()
    assert got == sum(_isnan_ne(o["args"]) for o in ops)


def _labels_of(trace, ops: list) -> list:
    """The events-table labels of raw op events, by their External id (unique per op in a file)."""
    ev = trace.events
    wanted = {o["args"]["External id"] for o in ops}
    mine = ev[(ev["cat"] == "cpu_op").to_numpy() & ev["external_id"].isin(wanted).to_numpy()]
    return list(mine.index)


def test_a_mixed_type_op_writes_the_promoted_type():
    """xDiT's mul(BFloat16[1, 256, 4096], Float[1, 256, 1]) writes fp32: 4 bytes an element, not bf16's 2."""
    path = SHARED / "tracelens_mi300x_xdit_sd35_compiled.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces/public not found (absent on a fresh clone)")
    ops = [o for o in owned(path, "aten::mul") if o["args"]["Input type"] == ["c10::BFloat16", "float"]
           and o["args"]["Input Dims"] == [[1, 256, 4096], [1, 256, 1]]]
    assert len(ops) == 98
    trace = loaded_trace(path)
    got = kernels(trace).instances.set_index("label").loc[_labels_of(trace, ops), "bytes"]
    assert set(got) == {2 * 256 * 4096 + 4 * 256 + 4 * 256 * 4096}


def test_the_gpu_timeline_split_matches_a_count_by_hand():
    """MI300X ResNet DDP rank 0, by hand from the raw events over its ProfilerStep# windows: computation (kernels but
    RCCL's), exposed communication, exposed copies and idle; work with no launch before the first launched one left out."""
    path = SHARED / "tracelens_mi300x_resnet_ddp_actckpt_bf16_rank0.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces/public not found (absent on a fresh clone)")
    events = _events(path)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    launched = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in (e.get("args") or {})}
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    first = min(e["ts"] for e in gpu if e["args"].get("correlation") in launched)
    gpu = [e for e in gpu if e["args"].get("correlation") in launched or e["ts"] >= first]
    comm = [e for e in gpu if e["cat"] == "kernel" and "nccl" in e["name"].lower()]
    compute = [e for e in gpu if e["cat"] == "kernel" and e not in comm]

    def cover(group):
        return sum(union_length([(max(e["ts"], a), min(e["ts"] + e["dur"], b)) for e in group
                                 if e["ts"] < b and e["ts"] + e["dur"] > a]) for a, b in steps)

    total = sum(b - a for a, b in steps)
    t = kernels(loaded_trace(path)).timeline
    assert len(steps) == 3 and t["total_us"] == pytest.approx(total)
    assert t["computation_us"] == pytest.approx(cover(compute))
    assert t["exposed_comm_us"] == pytest.approx(cover(compute + comm) - cover(compute))
    assert t["exposed_memcpy_us"] == pytest.approx(cover(gpu) - cover(compute + comm))
    assert t["idle_us"] == pytest.approx(total - cover(gpu))
    assert t["exposed_comm_us"] > 0.2 * total  # a quarter of the steps: RCCL all-reduces with no compute beside



def test_the_unfused_attention_finding_names_the_scores_shape_as_a_value():
    """TimeSformer's Input Dims are pretty-printed over many lines; the finding gives the shape, 8x12x3137x3137."""
    path = SHARED / "tracelens_h100_timesformer_infer_bf16.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces/public not found (absent on a fresh clone)")
    (found,) = [f for f in kernels(loaded_trace(path)).findings if "unfused" in f.title]
    softmax = [o for o in owned(path, "aten::_softmax") if o["args"]["Input Dims"][0][-1] == 3137]
    assert found.evidence["scores_shape"] == "x".join(map(str, softmax[0]["args"]["Input Dims"][0])) == "8x12x3137x3137"
