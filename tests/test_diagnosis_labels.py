"""What bounds the steps of every GPU trace in ../shared/traces/public, written down by hand from the
raw events (``rawcount.raw_facts``: plain json, no perfkit), and every surface checked against it.

Each label says why, in numbers anyone can recount from the raw file; the test recounts them
(``RAW``) and then asks perfkit's diagnosis, cpu_bound, step_anatomy, summary and the critical-path
command for the verdict: they must all give the label.
"""
import json

import pytest

import perfkit
import perfkit.cli
from perfkit.analysis.step.whatif import whatif
from perfkit.analysis.summary import summarize

from conftest import SHARED_TRACES, loaded_trace, shared_trace
from rawcount import raw_facts, supports

pytestmark = pytest.mark.slow

LABELS = {  # trace: (verdict, why, from the raw events)
    "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz": (
        "warm-up", "one 6.5 ms first hipLaunchKernel holds 70% of the 9.3 ms window: it measures start-up (the "
                   "rest, 14 launches and GPU busy 2%, looks launch-bound)"),
    "hta_critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz": (
        "warm-up", "the first aten::to (CUDA context creation, 29.9 s) and first conv2d hold 98% of the window"),
    "hta_critical_path__cuda_event_sync__event_sync_trace.json.gz": (
        "host-compute-bound", "aten::empty (a 2.19 ms allocation that launches nothing) is 69% of a 3.15 ms step; "
                              "4 launches, GPU busy 2%"),
    "hta_cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz": (
        "GPU activity not recorded", "77 launch calls, 0 kernels/copies/memsets, 8 A100s in deviceProperties"),
    "hta_df_index_resolver__df_index_resolver.json.gz": (
        "launch-bound", "3,874 launches per 346 ms step (V100, no stacks), median kernel 8 us, GPU busy 58% with 21% "
                        "of it collectives not under compute: CUDA graphs take the step to 186 ms; fp32 GEMMs on the "
                        "CUDA cores are 40% of GPU time, but AMP saves nothing until the launches are cheaper"),
    "hta_nccl_parser_config__nccl_data.json.gz": (
        "launch-bound", "900 launches per 220 ms step, median kernel 16 us, GPU busy 24%, collectives exposed 6%"),
    "hta_timeline_analysis__sampled_rank-0.json.gz": (
        "communication-bound", "GPU busy 45%, of which collectives with no compute under them 27% of the step"),
    "hta_trace_diff__control__control.json.gz": ("GPU-bound", "GPU busy 84% of 6 steps"),
    "hta_trace_diff__test__test.json.gz": ("GPU-bound", "GPU busy 96% of 6 steps"),
    "hta_triton_example__triton_example.json.gz": (
        "host-compute-bound", "one 1.8 us Triton kernel in a window of untraced host time (no steps)"),
    "kineto_h100_out_of_order_after_fix.json.gz": (
        "host-compute-bound", "1 launch, GPU busy 7%, the rest untraced host time"),
    "kineto_h100_out_of_order_before_fix.json.gz": (
        "host-compute-bound", "1 launch, GPU busy 7%, the rest untraced host time"),
    "kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz": (
        "input-bound", "DataLoader __next__ 40% of the step (num_workers=0), GPU busy 56%"),
    "kineto_v100_resnet50_dataloader_nw4.pt.trace.json.gz": (
        "launch-bound", "DataLoader 1% with 4 workers; 1,478 launches per step, median kernel 2 us, GPU busy 72%"),
    "param_rtx2080ti_resnet_train.json.gz": ("input-bound", "DataLoader ranges 51% of the window, GPU busy 29%"),
    "param_v100_dlrm_rank0.pt.trace.json.gz": (
        "launch-bound", "NCCL kernels with nothing under them 38% of the step (waiting 5.6 ms for peers: perfkit "
                        "ranks), but every rank runs the same 246 launches of 3 us kernels: CUDA graphs on all of "
                        "them take the step 14.5 -> 7.5 ms, the wait for peers kept"),
    "param_v100_dlrm_rank1.pt.trace.json.gz": ("communication-bound", "exposed NCCL 56% of the step, 11 ms waiting"),
    "param_v100_dlrm_rank2.pt.trace.json.gz": (
        "launch-bound", "exposed NCCL 25%; the host issuing 246 launches (median kernel 3 us) holds more"),
    "param_v100_dlrm_rank3.pt.trace.json.gz": (
        "launch-bound", "exposed NCCL 49% of the step, kept as the peers' skew; the 246 launches of 3 us kernels "
                        "around it: CUDA graphs save 37%, overlapping the collectives 29%"),
    "param_v100_dlrm_rank4.pt.trace.json.gz": (
        "launch-bound", "exposed NCCL 36% of the step, kept as the peers' skew; 251 launches of 3 us kernels: CUDA "
                        "graphs save 44%, overlapping the collectives 27%"),
    "param_v100_dlrm_rank5.pt.trace.json.gz": (
        "launch-bound", "exposed NCCL 35% of the step, kept as the peers' skew; CUDA graphs save 45%, overlapping "
                        "the collectives 25%"),
    "param_v100_dlrm_rank6.pt.trace.json.gz": (
        "launch-bound", "exposed NCCL 25%; the host issuing 246 launches (median kernel 3 us) holds more"),
    "param_v100_dlrm_rank7.pt.trace.json.gz": (
        "launch-bound", "the rank the others wait for (last at 5 collectives): exposed NCCL 13%, GPU busy 21%, "
                        "246 launches of 3 us kernels"),
    "sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz": (
        "launch-bound", "16 launches per 0.8 ms step, median kernel 7 us, GPU busy 14%: module forwards issuing kernels"),
    "tracelens_b200_serving_eager_rank0.json.gz": (
        "launch-bound", "768 launches per step, median kernel 6 us, GPU busy 13% (eager serving)"),
    "tracelens_h100_bert_small_infer_bf16.json.gz": (
        "launch-bound", "60 launches, median kernel 5 us, GPU busy 7%: HF module Python around each launch"),
    "tracelens_h100_qwen05b_infer_bf16.json.gz": (
        "launch-bound", "GPU busy 92% of the window, but 13.5 ms of it is kernels the previous call launched; the "
                        "work this step launches keeps the GPU busy 64% while the host issues 1,029 launches: CUDA "
                        "graphs take 47.2 -> 31.9 ms"),
    "tracelens_h100_timesformer_infer_bf16.json.gz": (
        "host-compute-bound", "the GPU idles 218 ms of the 383 ms window in one gap while the host runs Python "
                              "(run_on_input) that launches nothing; once started, its kernels queue 62.6 ms deep"),
    "tracelens_mi300x_bert_small_infer_bf16.json.gz": ("launch-bound", "60 launches, median kernel 5 us, GPU busy 10%"),
    "tracelens_mi300x_compile_triton_small.json.gz": ("GPU-bound", "GPU busy 96%"),
    "tracelens_mi300x_norm_layers_fwdbwd.json.gz": (
        "warm-up", "first calls of each norm layer (batch_norm 332 ms, group_norm 211 ms, ...) hold 98% of the window"),
    "tracelens_mi300x_resnet_ddp_actckpt_bf16_rank0.json.gz": (
        "communication-bound", "GPU busy 95%, of which RCCL all-reduce not under compute 66% of the step"),
    "tracelens_mi300x_timesformer_infer_bf16.json.gz": (
        "host-compute-bound", "the GPU idles 270 ms of the 391 ms window while the host runs Python that launches "
                              "nothing; then its kernels queue 46.6 ms deep"),
    "tracelens_mi300x_vllm_piecewise_graph_exec.json.gz": (
        "GPU-bound (host ahead)", "graph-replayed kernels start a median 214 ms after their launch"),
    "tracelens_mi300x_xdit_sd35_compiled.json.gz": (
        "launch-bound", "8,042 launches per step (compiled Triton kernels, median 22 us), GPU busy 60%"),
}
CPU_ONLY = {"hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"}
# What the user should do, read off the same raw events: a phrase the printed fix must hold. By verdict, with
# the traces whose fix differs (already compiled, workers already on, an allocation in the step, no stacks).
VERDICT_FIXES = {"warm-up": "--wait", "communication-bound": "no_sync()", "input-bound": "num_workers>0",
                 "launch-bound": "fewer, larger GPU operations", "GPU activity not recorded": "ProfilerActivity.CUDA",
                 "GPU-bound (host ahead)": "removing syncs or launch overhead will not shorten the step",
                 "host-compute-bound": "Python does the work", "GPU-bound": "Fuse chains of elementwise ops"}
FIXES = {
    "hta_critical_path__cuda_event_sync__event_sync_trace.json.gz": "Allocate the buffers once",
    "hta_triton_example__triton_example.json.gz": "with_stack=True",
    "kineto_h100_out_of_order_after_fix.json.gz": "with_stack=True",
    "kineto_h100_out_of_order_before_fix.json.gz": "with_stack=True",
    "param_rtx2080ti_resnet_train.json.gz": "already runs worker processes",  # _MultiProcessingDataLoaderIter
    "tracelens_b200_serving_eager_rank0.json.gz": "already runs torch.compile'd code",
    "tracelens_mi300x_xdit_sd35_compiled.json.gz": "already runs torch.compile'd code",
    "tracelens_mi300x_compile_triton_small.json.gz": "already runs torch.compile'd code",
}


def test_every_shared_gpu_trace_has_a_label():
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"{SHARED_TRACES} not found: real traces live in ../shared/traces")
    present = {p.name for p in SHARED_TRACES.glob("*.json.gz")}
    assert present - CPU_ONLY == set(LABELS), "label every GPU trace by hand before it is added"


@pytest.mark.parametrize("name", sorted(LABELS), ids=[n[:48] for n in sorted(LABELS)])
def test_every_report_gives_the_hand_label(name, capsys):
    path = shared_trace(name)
    verdict, _why = LABELS[name]
    supports(verdict, raw_facts(path))
    trace = loaded_trace(path)
    d = perfkit.diagnose(trace)
    assert d.verdict == verdict, (d.title, d.numbers)
    assert perfkit.cpu_bound(trace).verdict == verdict
    assert perfkit.step_anatomy(trace).verdict == verdict
    assert summarize(trace)["diagnosis"]["verdict"] == verdict
    assert perfkit.cli.main(["critical-path", str(path), "--json"]) == 0
    quick = perfkit.diagnose(trace, kernel_fix=False)  # critical-path's line: the same title and fix
    assert json.loads(capsys.readouterr().out)["diagnosis"] == {"verdict": verdict, "title": quick.title, "fix": quick.fix}
    assert FIXES.get(name, VERDICT_FIXES[verdict]) in d.fix, d.fix
    assert d.fix.endswith(d.prediction["sentence"] + ".")  # what the fix buys, or why nothing says
    w = whatif(trace)
    assert w.verdict in (verdict, "") and (d.decided_by == "replay") is (not w.replay.steps.empty), w.rule
    # a fix that sends the user the wrong way is worse than none
    if verdict in ("host-compute-bound", "GPU activity not recorded", "warm-up", "input-bound"):
        assert "reduce-overhead" not in d.fix
    if verdict == "host-compute-bound":
        assert "will not shorten the step" in d.fix  # says why compiling or graphing is not the fix
