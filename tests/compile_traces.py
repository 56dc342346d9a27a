"""Synthetic torch.compile traces shaped like the ones torch 2.x writes (names checked on a torch
2.13 trace of a compiled MLP and on the compiled MI300X traces in ../shared): ``(dynamo_timed)``
compile phases as nested ``cpu_op`` ranges, Python frames of Triton's compiler, and the run-time
wrappers of compiled code, which are not compile work. Whole-microsecond timestamps, ties and a
zero-length wrapper, as real traces have."""
from __future__ import annotations

from tracebuilder import TraceBuilder

STEP_US = 1_730_000
# Compile work: [10_000, 1_210_000) Dynamo + Inductor, nested phases inside it; then a Triton
# compile frame [1_210_000, 1_330_000) outside every dynamo_timed range (ties at both ends); then
# autotuning on the first run [1_400_000, 1_500_000). Union: 1.2 + 0.12 + 0.1 = 1.42 s.
COMPILE_US = 1_420_000


def compile_dominated(*, with_runtime_wrappers: bool = True) -> TraceBuilder:
    """One 1.73 s step of which 1.42 s (union) is compile work; the rest launches 40 kernels."""
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, STEP_US)
    if with_runtime_wrappers:
        b.python("torch/_dynamo/eval_frame.py(1039): _fn", 5_000, 1_700_000)
        b.cpu_op("Torch-Compiled Region: 0/0", 5_000, 1_700_000)
        b.cpu_op("TorchDynamo Cache Lookup", 5_000, 0)
    b.cpu_op("_compile.compile_inner (dynamo_timed)", 10_000, 1_200_000)
    b.cpu_op("OutputGraph.call_user_compiler (dynamo_timed)", 300_000, 900_000)
    b.cpu_op("compile_fx_inner (dynamo_timed)", 300_000, 900_000)          # tie with its parent
    b.cpu_op("GraphLowering.compile_to_module (dynamo_timed)", 700_000, 500_000)
    b.cpu_op("aten::empty", 800_000, 0)                                     # fake-tensor work inside
    b.python("triton/compiler/compiler.py(226): compile", 1_210_000, 120_000)
    b.cpu_op("CachingAutotuner.benchmark_all_configs (dynamo_timed)", 1_400_000, 100_000)
    if with_runtime_wrappers:
        b.cpu_op("CompiledFunction", 1_500_000, 200_000)
        b.python("triton/compiler/compiler.py(487): launch_metadata", 1_500_000, 10)
    for i in range(40):
        t = 1_500_000 + 5_000 * i
        b.launch(f"triton_poi_fused_add_{i}" if i % 2 else "void at::native::gemm_kernel", t, 10, t + 20, 100)
    return b


def runtime_only() -> TraceBuilder:
    """A compiled model after warm-up: run-time wrappers and Triton launches, no compile work."""
    b = TraceBuilder(with_stack=True)
    b.step(0, 0, 10_000)
    b.python("torch/_dynamo/eval_frame.py(1039): _fn", 0, 9_000)
    b.cpu_op("Torch-Compiled Region: 0/0", 0, 9_000)
    b.cpu_op("Torch-Compiled Region: 1/0", 4_000, 4_000)   # a resume function after a graph break
    b.cpu_op("CompiledFunction", 100, 3_000)
    b.annotation("## Call CompiledFxGraph fal4xpiah2v6 ##", 100, 3_000)
    b.python("triton/compiler/compiler.py(487): launch_metadata", 200, 5)
    b.python("triton/compiler/compiler.py(380): __init__", 210, 2)
    b.cpu_op("guard_collective (dynamo_timed)", 9_000, 500)
    for i in range(4):
        b.launch(f"triton_red_fused_sum_{i}", 300 + 100 * i, 10, 400 + 100 * i, 50)
    b.launch("void at::native::gemm_kernel", 800, 10, 900, 150)
    return b
