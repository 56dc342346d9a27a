"""summary: torch.compile facts (key ``compile``) and device naming, on synthetic traces and on the
shared traces (device names checked by hand against each file's deviceProperties and GPU events)."""
import gzip
import json

import pytest

import compile_traces
from conftest import shared_trace
from perfkit.analysis.compile import compile_facts, is_compile_span
from perfkit.analysis.summary import device_name, summarize
from perfkit.cli import main
from perfkit.trace import load_trace
from tracebuilder import TraceBuilder


def load(tmp_path, builder, name="t.json"):
    return load_trace(builder.write(tmp_path / name), use_cache=False)


# --- compile facts -------------------------------------------------------------------------------

def test_compile_facts_of_a_compiling_trace(tmp_path, capsys):
    trace = load(tmp_path, compile_traces.compile_dominated())
    facts = summarize(trace)["compile"]
    assert facts == {"kernels": 40, "triton_kernels": 20, "triton_time_share": 0.5,
                     "compile_s": pytest.approx(1.42), "compiled_regions": 1}
    assert main(["summary", "--no-cache", str(trace.files[0].path)]) == 0
    out = capsys.readouterr().out
    assert "20 of 40 kernels are Triton (50% of kernel time); compiling 1.420 s" in out
    assert "one compiled region: no sign of graph breaks" in out


def test_regions_beyond_one_are_the_sign_of_graph_breaks(tmp_path, capsys):
    path = compile_traces.runtime_only().write(tmp_path / "rt.json")
    assert main(["summary", "--json", "--no-cache", str(path)]) == 0
    facts = json.loads(capsys.readouterr().out)["compile"]
    assert facts == {"kernels": 5, "triton_kernels": 4, "triton_time_share": pytest.approx(200 / 350),
                     "compile_s": 0.0, "compiled_regions": 2}
    assert main(["summary", "--no-cache", str(path)]) == 0
    assert "2 compiled regions: more than one per compiled function means graph breaks" in capsys.readouterr().out


def test_a_trace_without_torch_compile_has_no_compile_facts(tmp_path, capsys):
    b = TraceBuilder()
    b.step(0, 0, 100)
    b.launch("void at::native::vectorized_elementwise_kernel", 10, 5, 20, 30)
    path = b.write(tmp_path / "eager.json")
    assert summarize(load_trace(path, use_cache=False))["compile"] is None
    assert main(["summary", "--no-cache", str(path)]) == 0
    assert "compile " not in capsys.readouterr().out


@pytest.mark.parametrize("name, compile_work", [
    ("_compile.compile_inner (dynamo_timed)", True),
    ("GraphLowering.compile_to_module (dynamo_timed)", True),
    ("guard_collective (dynamo_timed)", False),                     # runs on every guarded call
    ("torch/_dynamo/convert_frame.py(1633): _compile", True),
    ("C:\\env\\Lib\\site-packages\\torch\\_inductor\\compile_fx.py(788): compile_fx_inner", True),
    ("triton/compiler/compiler.py(226): compile", True),
    ("triton/compiler/compiler.py(487): launch_metadata", False),  # launching a compiled kernel
    ("triton/compiler/compiler.py(380): __init__", False),
    ("torch/_dynamo/eval_frame.py(1039): _fn", False),
    ("Torch-Compiled Region: 0/0", False),
    ("CompiledFunction", False),
    ("## Call CompiledFxGraph fal4xpiah2v6 ##", False),
    ("torch/_compile.py(41): inner", False),
])
def test_compile_span_classification(name, compile_work):
    assert is_compile_span(name) is compile_work


def _raw_kernels(path):
    events = json.loads(gzip.open(path).read())["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]


@pytest.mark.parametrize("name, regions", [("tracelens_mi300x_xdit_sd35_compiled.json.gz", 1),
                                           ("tracelens_mi300x_compile_triton_small.json.gz", 1),
                                           ("tracelens_mi300x_vllm_piecewise_graph_exec.json.gz", 0)])
def test_compile_facts_of_real_compiled_traces_match_the_raw_json(name, regions):
    """These traces were recorded after warm-up: Triton kernels and compiled regions, no compiling."""
    path = shared_trace(name)
    kernels = _raw_kernels(path)
    triton = [k for k in kernels if k["name"].startswith("triton_")]
    facts = compile_facts(load_trace(path))
    assert facts["kernels"] == len(kernels) and facts["triton_kernels"] == len(triton) > 0
    assert facts["triton_time_share"] == pytest.approx(sum(k["dur"] for k in triton) / sum(k["dur"] for k in kernels))
    assert facts["compile_s"] == 0.0 and facts["compiled_regions"] == regions


# --- device names --------------------------------------------------------------------------------

def _rocm_like(tmp_path, properties):
    b = TraceBuilder(device=2)
    b.step(0, 0, 100)
    b.launch("k", 10, 5, 20, 30)
    doc = b.to_dict()
    doc["deviceProperties"] = properties
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps(doc))
    return summarize(load_trace(path, use_cache=False))["devices"]


def test_single_listed_gpu_names_the_device_on_another_index(tmp_path):
    """ROCm writes GPU events on the HSA agent index (CPU agents first), here 2, while
    deviceProperties lists the one GPU the process sees as id 0."""
    assert _rocm_like(tmp_path, [{"id": 0, "name": "AMD Instinct MI300X VF"}]) == [
        {"id": 2, "name": "AMD Instinct MI300X VF"}]


def test_gpus_of_different_models_and_no_matching_id_stay_unnamed(tmp_path):
    assert _rocm_like(tmp_path, [{"id": 0, "name": "A"}, {"id": 1, "name": "B"}]) == [{"id": 2, "name": ""}]


@pytest.mark.parametrize("properties, device, expected", [
    ([{"id": 0, "name": "A"}, {"id": 1, "name": "B"}], 1, "B"),   # the id matches: its own name
    ([{"id": 0, "name": "A"}, {"id": 1, "name": "A"}], 5, "A"),   # identical GPUs
    ([{"id": 0, "name": ""}, {"id": 1, "name": ""}], 0, ""),       # names not recorded (vLLM MI300X)
    ([], 0, ""),
    ([{"id": "0", "name": "A"}], 0, "A"),                          # id written as a string
])
def test_device_name_rule(properties, device, expected):
    assert device_name(properties, device) == expected


# Checked by hand: GPU events' pid/args.device against each file's deviceProperties.
SHARED_DEVICES = {
    "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz": [(2, "AMD Radeon Graphics")],
    "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz": [],
    # no GPU activity events: the 8 GPUs deviceProperties lists, each marked inactive
    "hta_cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz": [(i, "NVIDIA A100-PG509-200") for i in range(8)],
    "hta_timeline_analysis__sampled_rank-0.json.gz": [(0, "")],                   # no deviceProperties
    "hta_trace_diff__control__control.json.gz": [(3, "NVIDIA A100-PG509-200")],
    "hta_trace_diff__test__test.json.gz": [(1, "Tesla V100-SXM2-16GB")],
    "param_v100_dlrm_rank5.pt.trace.json.gz": [(5, "Tesla V100-SXM2-32GB")],
    "tracelens_mi300x_bert_small_infer_bf16.json.gz": [(2, "AMD Instinct MI300X VF")],
    "tracelens_mi300x_timesformer_infer_bf16.json.gz": [(2, "AMD Instinct MI300X VF")],
    "tracelens_mi300x_compile_triton_small.json.gz": [(2, "AMD Instinct MI300X")],
    "tracelens_mi300x_xdit_sd35_compiled.json.gz": [(2, "AMD Instinct MI300X")],
    "tracelens_mi300x_norm_layers_fwdbwd.json.gz": [(2, "AMD Instinct MI300X")],
    "tracelens_mi300x_vllm_piecewise_graph_exec.json.gz": [(2, "")],              # all 8 entries unnamed
    "tracelens_h100_timesformer_infer_bf16.json.gz": [(0, "NVIDIA H100 80GB HBM3")],
}


@pytest.mark.parametrize("name", sorted(SHARED_DEVICES))
def test_shared_trace_devices(name):
    devices = summarize(load_trace(shared_trace(name)))["devices"]
    assert [(d["id"], d["name"]) for d in devices] == SHARED_DEVICES[name]
    assert all(d.get("active", True) for d in devices) == ("cupti" not in name)


@pytest.mark.parametrize("name, regions", [("ppo_compiled", 2), ("ppo_flag_flip", 3), ("ppo_tensor_branch", 4)])
def test_project_compiled_traces_count_their_regions(name, regions, capsys):
    """Recorded after warm-up (no compiling): ppo_compiled recompiles once (0/5, 0/6), the flag flip
    adds a graph (0/2-0/4), the tensor branch's graph break adds a frame (0/0, 0/1, 1/0, 1/1)."""
    from conftest import ROOT
    path = ROOT / "data" / "traces" / "cpu" / f"{name}.json.gz"
    facts = summarize(load_trace(path))["compile"]
    assert facts == {"kernels": 0, "triton_kernels": 0, "triton_time_share": None, "compile_s": 0.0,
                     "compiled_regions": regions}
    assert main(["summary", str(path)]) == 0
    assert f"{regions} compiled regions: more than one per compiled function means graph breaks" in \
        capsys.readouterr().out
