"""``report.gpu_kernels.finding_prediction``: the gpu_kernels card says what its own top fix buys when
perfkit replays it, and never leaves a fix the replay says buys nothing as the card's last word."""
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import perfkit
from perfkit.report.gpu_kernels import finding_prediction

STEP = {"sentence": "Predicted: median step 10.00 -> 8.00 ms (1.25x) with the syncs removed"}
GPU = Path(__file__).resolve().parents[2] / "data" / "traces" / "gpu"


def _whatif(share, applies=True, steps=1):
    p = SimpleNamespace(applies=applies, share=share)
    return SimpleNamespace(replay=SimpleNamespace(steps=pd.DataFrame({"step": range(steps)})),
                           prediction=lambda fix: p, fix_text=lambda fix: f"median step 10.00 -> x ms with {fix}")


def _kernels(*keys, has_gpu=True):
    return SimpleNamespace(has_gpu=has_gpu, findings=[SimpleNamespace(evidence=dict.fromkeys(keys, 1.0))])


@pytest.mark.parametrize("result, w, says", [
    (_kernels("memory_bound_us"), _whatif(0.05), "Predicted: median step 10.00 -> x ms with fuse_elementwise"),
    (_kernels("memory_bound_us"), _whatif(0.049), "Replayed: median step 10.00 -> x ms with fuse_elementwise, 5% of the "
     "step (under 5%): other work bounds the step. For the whole step: predicted: median step 10.00 -> 8.00"),
    (_kernels("fp32_cuda_core_us"), _whatif(0.5), "Predicted: median step 10.00 -> x ms with amp"),
    (_kernels("odd_gemm_us"), _whatif(0.5), STEP["sentence"]),                 # a fix perfkit does not replay
    (_kernels("memory_bound_us"), _whatif(0.5, applies=False), STEP["sentence"]),
    (_kernels("memory_bound_us"), _whatif(0.5, steps=0), STEP["sentence"]),    # nothing replayed
    (_kernels("memory_bound_us", has_gpu=False), _whatif(0.5), STEP["sentence"]),
    (SimpleNamespace(has_gpu=True, findings=[]), _whatif(0.5), STEP["sentence"]),
])
def test_the_card_quotes_what_its_own_fix_buys(result, w, says):
    assert finding_prediction(result, w, STEP)["sentence"].startswith(says)


@pytest.mark.parametrize("name, says", [
    ("transformer_bf16", "Replayed: median step 15.61 -> 15.61 ms (1.00x) with the elementwise kernels fused, 0% of"),
    ("transformer_fp32", "Predicted: median step 111.79 -> 13.90 ms (8.04x) with bf16 autocast"),
])
def test_on_shipped_traces_a_fusion_that_buys_nothing_is_said_so(name, says):
    trace = perfkit.load_trace(GPU / f"{name}.pt.trace.json.gz")
    got = finding_prediction(perfkit.kernels(trace), perfkit.whatif(trace), perfkit.diagnose(trace).prediction)
    assert got["sentence"].startswith(says)
