"""The gpu_kernels investigation: its notebook on a shipped CPU-only trace (no GPU kernels, said so)
and on a shared H100 trace with shapes (the leading finding, the tables, the perf-log rows), its
roofline figure's no-GPU / unknown-device / no-shapes cases, and its perf-log rows. GEMM FLOPs are
checked against a count from the raw JSON (2*M*K*N over aten::addmm's Input Dims)."""
from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

import perfkit
from conftest import shared_trace
from nbsession import KernelSession, html_text, outputs
from perfkit.analysis.gpu_kernels.result import KernelsResult
from perfkit.report import gpu_kernels as kernel_tables, plots
from perfkit.report.card import MIME
from perfkit.report.gpu_kernels import kernel_rows
from perfkit.report.perflog import PerfLog
from perfkit.report.publish.params import notebook_parameters

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "gpu_kernels.py"
BERT = "tracelens_h100_bert_small_infer_bf16.json.gz"


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    s = KernelSession(tmp_path_factory.mktemp("kernel"))
    yield s
    s.close()


def _card(nb) -> dict:
    first = outputs(nb)[0]
    assert MIME in first.get("data", {}), "the verdict card is not the first output"
    return first["data"][MIME]


def _addmm_flops(path: Path) -> float:
    """2*M*K*N of every aten::addmm (bias, mat1 [M,K], mat2 [K,N]) from the raw events."""
    events = json.load(gzip.open(path))["traceEvents"]
    total = 0.0
    for e in events:
        if e.get("ph") == "X" and e.get("name") == "aten::addmm":
            _, (m, k), (_, n) = e["args"]["Input Dims"][:3]
            total += 2.0 * m * k * n
    return total


@pytest.mark.slow
def test_notebook_on_a_cpu_only_trace_says_there_are_no_gpu_kernels(session, tmp_path):
    log = tmp_path / "log.csv"
    nb = session.run(NOTEBOOK, {"trace_path": "cpu/mppi_float_tensor.json.gz", "perf_log_path": str(log)})
    card = _card(nb)
    assert card["investigation"] == "gpu_kernels" and card["device"] == "cpu"
    assert card["verdict"] == "no kernel finding: no GPU kernels in this trace" and card["numbers"] == []
    text = html_text(nb)
    assert "No GPU kernels in this trace" in text and "no GPU activity" in text  # the analysis' warning
    assert sum("image/png" in o.get("data", {}) for o in outputs(nb)) == 1  # the roofline's "no GPU" figure
    assert not log.exists()  # nothing measured, nothing logged


@pytest.mark.slow
def test_notebook_on_a_gpu_trace_with_shapes(session, tmp_path):
    path = shared_trace(BERT)
    log = tmp_path / "log.csv"
    nb = session.run(NOTEBOOK, {"trace_path": str(path), "perf_log_path": str(log), "change": "bert"})
    result = perfkit.kernels(perfkit.load_trace(path))
    card = _card(nb)
    assert card["verdict"] == result.findings[0].title and "not multiples of 8" in card["verdict"]
    assert card["device"] == "NVIDIA H100 80GB HBM3" and card["fix"].startswith("Pad the dimensions")
    assert [n["label"] for n in card["numbers"]] == ["GEMM throughput", "GEMM time on Tensor Cores",
                                                     "model FLOP/s utilisation"]
    text = html_text(nb)
    assert f"{_addmm_flops(path) / 1e9:,.3f} GFLOP" in text  # the hand count, as the totals table shows it
    assert "cutlass_80_wmma_tensorop_bf16" in text and "aten::_flash_attention_forward" in text
    for column in ("% of GPU busy", "Tensor Cores", "TFLOP/s", "% of peak", "bound", "% of GEMM time"):
        assert f"<th>{column}</th>" in text
    assert "NaN" not in text and "nan" not in text.replace("nano", "")
    logged = PerfLog(log).read("gpu_kernels").set_index("metric")["value"]
    assert logged["tensor_core_share_pct"] == 100.0  # every GEMM kernel here is cutlass tensorop / sm90 xmma
    assert logged["gemm_tflops_per_s"] == pytest.approx(result.totals["gemm_tflops_per_s"])
    assert logged["mfu_pct"] == pytest.approx(100 * result.totals["mfu"])


def test_parameters_are_trace_only_with_a_device_override():
    declared = notebook_parameters(NOTEBOOK)
    assert {"trace_path", "device", "top", "interactive", "perf_log_path", "change", "run_label"} <= set(declared)
    assert "mode" not in declared and declared["device"]["default"] == '"auto"'


def test_roofline_says_no_gpu_unknown_device_and_no_shapes():
    empty = KernelsResult.empty(None, "", ("no GPU activity",))
    assert "no GPU" in _texts(plots.roofline(empty))
    result = perfkit.kernels(perfkit.load_trace(shared_trace(BERT)))
    fig = plots.roofline(result)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["memory roof 3,350 GB/s", "matrix bf16 989.4 TFLOP/s", "vector fp32 67.0 TFLOP/s"]
    unknown = dataclasses.replace(result, device=None, device_name="Mystery GPU 9000")
    assert "no roofs: unknown device Mystery GPU 9000 (use --peaks" in _texts(plots.roofline(unknown))
    shapeless = dataclasses.replace(result, instances=result.instances.iloc[0:0])
    assert "record_shapes=True" in _texts(plots.roofline(shapeless))


def _texts(fig) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in [ax.title, *ax.texts])


def test_kernel_rows_and_tables():
    result = perfkit.kernels(perfkit.load_trace(shared_trace(BERT)))
    rows = kernel_rows(result, "trace bert", "H100")
    assert [(r["metric"], r["unit"]) for r in rows] == [("gemm_tflops_per_s", "TFLOP/s"),
                                                         ("tensor_core_share_pct", "%"), ("mfu_pct", "%")]
    assert all(r["higher_is_better"] and r["ci_low"] == r["ci_high"] == r["value"] for r in rows)
    assert kernel_rows(KernelsResult.empty(None, "", ()), "trace x", "cpu") == []
    table = kernel_tables.kernel_table(result, 5)
    assert len(table) == 5 and table["kernel"].str.len().max() <= 90
    assert table["% of GPU busy"].iloc[0] == pytest.approx(100 * result.kernels["share"].iloc[0])
    ops = kernel_tables.op_table(result)
    assert ops.set_index("op").at["aten::index_select", "TFLOP/s"] == "-"  # no model: shown, never guessed


def _arm_rows(nb) -> list[tuple[str, ...]]:
    import re

    text = html_text(nb)
    return [tuple(re.findall(r"<td>(.*?)</td>", tr, flags=re.S)) for tr in re.findall(r"<tr>(.*?)</tr>", text, re.S)]


@pytest.mark.slow
def test_amp_regression_shows_each_arms_gemm_dtypes_and_tensor_core_share(session, tmp_path):
    before, after = shared_trace("sidnb13_h100_transformer_fwd_tf32.pt.trace.json.gz"), shared_trace(BERT)
    nb = session.run(ROOT / "notebooks" / "amp_regression.py", {
        "mode": "trace", "trace_path": str(before), "trace_path_b": str(after), "perf_log_path": str(tmp_path / "l.csv")})
    text = html_text(nb)
    assert "<th>GEMM time on Tensor Cores</th>" in text and "<th>% of GEMM time</th>" in text
    rows = [r for r in _arm_rows(nb) if len(r) == 6 and r[2] in ("yes", "no", "?")]  # the per-dtype table
    summary = {r[0]: r for r in _arm_rows(nb) if len(r) == 6 and r[3].endswith(" %")}
    assert summary["before"][3] == summary["after"][3] == "100.0 %"
    expected = {arm: perfkit.kernels(perfkit.load_trace(p)).gemm_by_dtype() for arm, p in
                (("before", before), ("after", after))}
    for arm, table in expected.items():
        shown = [r for r in rows if r[0] == arm]
        assert [(r[1], r[2]) for r in shown] == list(zip(table["dtype"], table["tensor_core"]))
    assert [r[1] for r in rows if r[0] == "before"][0] == "tf32"  # fp32 model, TF32 matmuls
    assert [r[1] for r in rows if r[0] == "after"] == ["bf16"]


@pytest.mark.slow
def test_amp_regression_on_cpu_traces_says_neither_has_gemms(session, tmp_path):
    nb = session.run(ROOT / "notebooks" / "amp_regression.py", {"mode": "trace", "trace_path": "cpu/ppo_item_logging.json.gz",
                     "trace_path_b": "cpu/ppo_batched_metrics.json.gz", "perf_log_path": str(tmp_path / "l.csv")})
    text = html_text(nb)
    assert "Neither trace has GEMM kernels." in text and text.count("no GPU kernels") == 2
