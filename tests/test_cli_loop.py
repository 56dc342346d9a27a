"""Every trace command on every trace: ``summary``, ``syncs``, ``whatif`` (text and ``--json``) on each trace in
data/traces and ../shared/traces/public, and ``diff`` (text and ``--json``) on before/after pairs.
Each must exit 0, print no traceback and, with ``--json``, print strict JSON (no NaN)."""
import json
from pathlib import Path

import pytest

from conftest import ROOT, SHARED_TRACES, shared_trace, shared_traces
from perfkit.analysis.trace_diff.diff import VERDICTS as DIFF_VERDICTS
from perfkit.cli import main

PROJECT = sorted((ROOT / "data" / "traces").rglob("*.json.gz"))
SHARED = shared_traces()
CPU = ROOT / "data" / "traces" / "cpu"
PROJECT_PAIRS = [("mppi_float_tensor", "mppi_from_numpy"), ("ppo_item_logging", "ppo_batched_metrics"),
                 ("ppo_sync_checks", "ppo_batched_metrics"), ("replay_host_normalize", "replay_device_normalize"),
                 ("leaky_clean", "leaky_keep_graph_losses")]
SHARED_PAIRS = [  # before/after, the same model on two GPUs, two ranks, and traces of different kinds
    ("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz", "kineto_v100_resnet50_dataloader_nw4.pt.trace.json.gz"),
    ("kineto_h100_out_of_order_before_fix.json.gz", "kineto_h100_out_of_order_after_fix.json.gz"),
    ("tracelens_h100_bert_small_infer_bf16.json.gz", "tracelens_mi300x_bert_small_infer_bf16.json.gz"),
    ("tracelens_mi300x_bert_small_infer_bf16.json.gz", "tracelens_mi300x_compile_triton_small.json.gz"),
    ("param_v100_dlrm_rank0.pt.trace.json.gz", "param_v100_dlrm_rank1.pt.trace.json.gz"),
    ("hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    ("hta_cupti_profiler__benchmark_result_924719_1679055439_trace.json.gz", "hta_triton_example__triton_example.json.gz"),
]


def _strict(text: str):
    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")
    return json.loads(text, parse_constant=refuse)


def run(capsys, argv) -> str:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, f"perfkit {' '.join(argv)} exited {code}: {err[-2000:]}"
    assert "Traceback" not in out + err, err[-2000:]
    if "--json" in argv:
        for line in out.splitlines():
            _strict(line)
    return out


def check_trace(capsys, path: Path) -> None:
    """summary and syncs, text and JSON; the first call writes the cache the others read."""
    p = str(path)
    summary = _strict(run(capsys, ["summary", "--json", p]))
    assert summary["events"]["total"] > 0
    assert run(capsys, ["summary", p]).startswith("trace ")
    assert "total" in _strict(run(capsys, ["syncs", "--json", p]))
    assert "sync points" in run(capsys, ["syncs", p])
    wi = _strict(run(capsys, ["whatif", "--json", p]))
    assert all(0 <= f["share"] <= 1 for f in wi["fixes"] if f["applies"]) and wi["prediction"]["sentence"]
    assert "verdict    " in run(capsys, ["whatif", p])


@pytest.mark.parametrize("path", PROJECT, ids=[p.name for p in PROJECT])
def test_trace_commands_on_project_traces(path, capsys):
    check_trace(capsys, path)


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.skipif(not SHARED, reason=f"{SHARED_TRACES} not found: real traces live in ../shared/traces")
@pytest.mark.parametrize("path", SHARED, ids=[p.name[:60] for p in SHARED])
def test_trace_commands_on_shared_traces(path, capsys):
    check_trace(capsys, path)


def check_diff(capsys, a: Path, b: Path) -> None:
    out = _strict(run(capsys, ["diff", "--json", str(a), str(b)]))
    assert out["step_change"]["verdict"] in DIFF_VERDICTS  # "inconclusive" too: 3-step shipped pairs have wide CIs
    assert "median step B/A" in run(capsys, ["diff", str(a), str(b)])


@pytest.mark.parametrize("a, b", PROJECT_PAIRS, ids=[f"{a}-{b}" for a, b in PROJECT_PAIRS])
def test_diff_on_project_pairs(a, b, capsys):
    check_diff(capsys, CPU / f"{a}.json.gz", CPU / f"{b}.json.gz")


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.parametrize("a, b", SHARED_PAIRS, ids=[f"{a[:25]}-{b[:25]}" for a, b in SHARED_PAIRS])
def test_diff_on_shared_pairs(a, b, capsys):
    check_diff(capsys, shared_trace(a), shared_trace(b))
