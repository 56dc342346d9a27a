"""The reports read back the verdicts of issue 10 as they are meant: "compiling" with its compile
seconds, "GPU-bound (host ahead)" with the launch delay against the step, a CPU-only trace without
GPU figures; sync points apart from host scalar reads; a diff's improvements apart from its
regressions, with its waits, ranges and dropped partial steps; one memory snapshot never called a
leak. Helpers are checked on their own, then each notebook is executed on a trace that exercises it."""
from __future__ import annotations

import gzip
import html
import pickle
import re
from pathlib import Path

import pytest

from compile_traces import COMPILE_US, compile_dominated
from conftest import SHARED_MEMORY, shared_trace
from nbsession import KernelSession, html_text, outputs
from perfkit.analysis.step.cpu_bound import cpu_bound
from perfkit.analysis.trace_diff.diff import diff
from perfkit.analysis.sync_points.find import syncs
from perfkit.errors import ParameterError
from perfkit.report import rows, memory_leak as snapshots
from perfkit.report.card import MIME
from perfkit.report.perflog import PerfLog
from perfkit.trace import load_trace
from perfkit.report import cpu_bound as cpu_bound_report
from perfkit.report import htod as htod_report
from perfkit.report import sync_points
from perfkit.report import trace_diff
from perfkit.report import memory_leak
from tracebuilder import TraceBuilder

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CPU = ROOT / "data" / "traces" / "cpu"
HOST_AHEAD = "tracelens_mi300x_vllm_piecewise_graph_exec.json.gz"
TIMESFORMER = "tracelens_h100_timesformer_infer_bf16.json.gz"
DLRM = "param_v100_dlrm_rank0.pt.trace.json.gz"
MIB = 2**20


@pytest.fixture(scope="module")
def compiling_path(tmp_path_factory):
    return compile_dominated().write(tmp_path_factory.mktemp("compile") / "compiling.json")


def copy_trace(path, *, pinned: bool, steps: int = 3):
    """``steps`` full steps and an 18 us stub step. Pageable: aten::to whose cudaMemcpyAsync blocks
    440 us for a 417 us copy; pinned: an 8 us call, a 183 us copy, and the wait moves into a 174 us
    cudaEventSynchronize. A ``## sample ##`` range shrinks from 700 to 500 us."""
    b = TraceBuilder()
    step = 1_800 if pinned else 2_000
    to_us, call_us, copy_us, sync_us = (27, 8, 183, 174) if pinned else (462, 440, 417, 5)
    for s in range(steps):
        t = s * step
        b.step(s, t, step)
        b.annotation("## sample ##", t + 5, 500 if pinned else 700)
        b.cpu_op("aten::to", t + 10, to_us)
        b.memcpy("HtoD", "Pinned" if pinned else "Pageable", t + 12, call_us, t + 17, copy_us, 20 * MIB)
        b.launch("void at::native::elementwise_kernel", t + 12 + to_us, 5, t + 30 + to_us + copy_us, 500)
        b.sync("cudaEventSynchronize", t + 40 + to_us, sync_us)
    b.step(steps, steps * step, 18)
    return b.write(path)


def snapshot_file(path, blocks_mib, history=()):
    """A CUDA memory snapshot pickle holding allocated blocks of the given sizes (MiB) and an
    allocation history of (action, address, MiB) events."""
    frames = [{"filename": "/job/train.py", "line": 12, "name": "step"}]
    blocks = [{"address": i * 4 * MIB, "size": s * MIB, "requested_size": s * MIB, "state": "active_allocated",
               "frames": frames} for i, s in enumerate(blocks_mib)]
    size = sum(b["size"] for b in blocks)
    segment = {"device": 0, "address": 0, "total_size": max(size, 2 * MIB), "allocated_size": size,
               "active_size": size, "requested_size": size, "stream": 0, "segment_type": "large", "blocks": blocks}
    trace = [{"action": a, "addr": addr, "size": mib * MIB, "stream": 0, "time_us": 1000 * i, "frames": frames}
             for i, (a, addr, mib) in enumerate(history)]
    Path(path).write_bytes(gzip.compress(pickle.dumps({"segments": [segment], "device_traces": [trace]})))
    return path


# -- cpu_bound helpers ---------------------------------------------------------------------------

def test_compiling_text_gives_compile_seconds_and_the_steps_that_compiled(compiling_path):
    result = cpu_bound(load_trace(compiling_path))
    assert result.verdict == "compiling"
    text = cpu_bound_report.verdict_text(result)
    assert f"compiled for {COMPILE_US / 1e6:.2f} s" in text and "1 of 1 step(s) compiled (step 0)" in text
    assert "profile after warm-up" in text
    assert f"torch.compile compiling {COMPILE_US / 1e3:,.2f} ms" in cpu_bound_report.cpu_bound_text(result)
    facts = cpu_bound_report.compile_table(result.compile).set_index("metric")["value"]
    assert facts.iloc[0] == "1.42" and facts["Triton kernels (triton_*)"] == "20"
    evidence = cpu_bound_report.cpu_bound_evidence(result)
    assert evidence.loc[evidence["decided"] == "yes", "gives"].tolist() == ["compiling"]  # the replay's row, alone
    spans = evidence.set_index("evidence").loc["compile spans"]
    assert spans["gives"] == "compiling" and spans["share of step"] == f"{COMPILE_US / 1_730_000:.1%}"


def test_compile_time_in_the_text_only_when_there_was_some():
    result = cpu_bound(load_trace(CPU / "ppo_item_logging.json.gz"))
    assert "compiling" not in cpu_bound_report.cpu_bound_text(result) and result.compile is None


def test_cpu_bound_rows_log_compile_seconds_second_when_compiling(compiling_path):
    result = cpu_bound(load_trace(compiling_path))
    out = cpu_bound_report.cpu_bound_rows(result, "trace c", "NVIDIA Test GPU")
    assert [r["metric"] for r in out][:3] == ["median_step_ms", "compile_s", "host_busy_ms_per_step"]
    assert out[1]["value"] == pytest.approx(COMPILE_US / 1e6) and out[1]["ci_low"] == out[1]["ci_high"]
    compiled_not_compiling = cpu_bound(load_trace(CPU / "ppo_compiled.json.gz"))
    out = cpu_bound_report.cpu_bound_rows(compiled_not_compiling, "trace p", "cpu")
    assert [r["metric"] for r in out] == ["median_step_ms", "host_busy_ms_per_step", "compile_s"]
    assert out[-1]["value"] == 0.0


def test_host_ahead_text_reads_the_delay_against_the_step():
    result = cpu_bound(load_trace(shared_trace(HOST_AHEAD)))
    assert result.verdict == "GPU-bound (host ahead)"
    text = cpu_bound_report.verdict_text(result)
    delay = result.evidence["queue_delay_us"] / 1e3
    assert f"starts {delay:,.3g} ms after its launch call" in text and "Make the GPU work itself faster" in text
    evidence = cpu_bound_report.cpu_bound_evidence(result)
    assert evidence.loc[evidence["decided"] == "yes", "gives"].tolist() == ["GPU-bound (host ahead)"]
    rule = evidence[evidence["evidence"].str.startswith("launch-to-kernel delay")].iloc[0]
    assert rule["gives"] == "GPU-bound (host ahead)" and f"median {delay:,.3g} ms" in rule["evidence"]


# -- syncs helpers -------------------------------------------------------------------------------

def test_sync_text_heads_with_sync_points_and_keeps_host_reads_apart():
    result = syncs(load_trace(shared_trace(DLRM)))
    text = sync_points.sync_text(result)
    assert text.startswith("11 sync points (the host waited on the GPU)")
    assert "57 host scalar reads with no GPU wait" in text and "confirmed" not in text
    # 10 of the 11 inside the one profiled step; the 11th (a sync after it) is named apart
    assert sync_points.sync_verdict(result).startswith("10 sync points per step, 2.17 ms blocked per step "
                                                 "(1 more outside the profiled steps)")
    logged = {r["metric"]: r["value"] for r in sync_points.sync_rows(result, load_trace(shared_trace(DLRM)), "t", "d")}
    assert logged == {"sync_points_per_step": 10.0, "sync_blocked_ms_per_step": pytest.approx(2.171),
                      "host_scalar_reads_per_step": 57.0}


def test_sync_site_labels_and_table_show_user_and_inner_frames():
    result = syncs(load_trace(shared_trace(TIMESFORMER)))
    sites = result.to_frame()
    labels = sync_points.site_labels(sites)
    assert labels[0] == "memcpy_dtoh: run_on_input @ model.py:40 via _device.py:100"
    table = sync_points.sync_site_table(sites)
    assert list(table.columns[:4]) == ["kind", "count", "per_step", "blocked_ms"]
    first = table.iloc[0]
    assert first["user frame (function start)"].endswith("pipeline/model.py:40 (run_on_input)")
    assert first["inner frame"] == "torch/utils/_device.py:100 (__torch_function__)"
    assert "where the enclosing function starts" in sync_points.sync_text(result)
    assert "perfkit detect SCRIPT" in sync_points.sync_text(result)


def test_sync_site_table_without_stacks_has_no_empty_frame_columns():
    table = sync_points.sync_site_table(syncs(load_trace(shared_trace(DLRM))).to_frame())
    assert "user frame (function start)" not in table and table["op"].iloc[0] == "aten::index (via aten::copy_)"


# -- diff helpers --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pinned_pair(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pair")
    return copy_trace(folder / "pageable.json", pinned=False), copy_trace(folder / "pinned.json", pinned=True)


def test_diff_text_counts_improvements_apart_and_names_dropped_steps(pinned_pair):
    result = diff(*(load_trace(p) for p in pinned_pair))
    text = trace_diff.diff_text(result)
    assert "over 3 and 3 full step(s) (A and B: partial steps at the window's edge dropped" in text
    assert "0 regression(s) and " in text
    assert trace_diff.diff_fix(result) == ""  # an improvement's note is not the report's fix


def test_trace_step_rows_leave_out_the_stub_step(pinned_pair):
    (out,) = rows.trace_step_rows("compile_ab", load_trace(pinned_pair[1]), "s", "d")
    assert out["value"] == 1.8 and (out["ci_low"], out["ci_high"]) == (1.8, 1.8)  # not down to 0.018 ms


def test_summary_pair_matches_rows_by_metric(compiling_path):
    pair = trace_diff.summary_pair(load_trace(CPU / "ppo_item_logging.json.gz"), load_trace(compiling_path))
    compiled = pair.set_index("metric").loc["compile_s"]
    assert (compiled["before"], compiled["after"]) == ("n/a", "1.42")
    assert pair.set_index("metric").at["steps", "before"] == "3"


# -- memory snapshots ----------------------------------------------------------------------------

def test_one_snapshot_is_growth_within_its_window_never_a_leak(tmp_path):
    path = snapshot_file(tmp_path / "one.pickle.gz", [30], [("alloc", 0, 30), ("alloc", 8 * MIB, 5),
                                                             ("free_completed", 8 * MIB, 5)])
    source = snapshots.load_snapshots([path])
    verdict = snapshots.snapshot_verdict(source)
    assert verdict == "one snapshot: live memory grew 30.0 MiB within its window (not a leak test)"
    assert "leak" not in verdict.replace("not a leak test", "")
    assert {r["metric"]: r["value"] for r in memory_leak.snapshot_rows(source)} == {"window_growth_mib": 30.0,
                                                                             "window_peak_mib": 35.0}
    assert "three or more later steps" in snapshots.snapshot_text(source)


def test_several_snapshots_are_judged_by_snapshot_growth(tmp_path):
    paths = [snapshot_file(tmp_path / f"s{i}.pickle.gz", sizes) for i, sizes in
             enumerate([[100], [100, 10], [100, 10, 10], [100, 10, 10, 10]])]
    source = snapshots.load_snapshots(paths)
    assert snapshots.snapshot_verdict(source) == "leak across 4 snapshots"
    assert {r["metric"]: r["value"] for r in memory_leak.snapshot_rows(source)} == {"snapshot_leak": 1.0,
                                                                             "growth_mib_per_interval": 10.0}
    assert source.subject == "snapshots s0.pickle.gz .. s3.pickle.gz (4)" and source.device == "cuda:0"
    shown = snapshots.in_mib(source.result.to_frame())
    assert shown["allocated_mib"].tolist() == [100.0, 110.0, 120.0, 130.0]
    sites = snapshots.in_mib(source.result.sites)
    assert list(sites.columns) == ["frame", "mib_before", "mib_after", "growth_mib"]
    assert sites["growth_mib"].tolist() == [20.0]  # after the first step: 110 -> 130 MiB


def test_snapshot_mode_errors_name_the_parameter(tmp_path):
    with pytest.raises(ParameterError, match="needs snapshot_paths"):
        snapshots.load_snapshots([])
    with pytest.raises(ParameterError, match=r"snapshot_paths\[0\]='nope.pickle.gz': no such file"):
        snapshots.load_snapshots(["nope.pickle.gz"])
    with pytest.raises(ParameterError, match="'snapshot'"):
        snapshots.check_mode("snapshots")


# -- the notebooks -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def session(tmp_path_factory):
    s = KernelSession(tmp_path_factory.mktemp("kernel"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    return tmp_path_factory.mktemp("log") / "perf_log.csv"


def _card(nb) -> dict:
    return outputs(nb)[0]["data"][MIME]


def _text(nb) -> str:
    """The notebook's HTML outputs as plain text (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", html_text(nb)))


def _figures(nb) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs(nb))


@pytest.mark.slow
def test_cpu_bound_notebook_on_a_compiling_trace(session, log_path, compiling_path):
    nb = session.run(NOTEBOOKS / "cpu_bound.py", {"trace_path": str(compiling_path), "perf_log_path": str(log_path)})
    card, text = _card(nb), _text(nb)
    assert card["verdict"] == "compiling"
    assert [n["label"] for n in card["numbers"]] == ["median step", "compile time", "host busy per step"]
    assert card["numbers"][1]["value"] == pytest.approx(1.42)
    assert "torch.compile compiled for 1.42 s" in text and "1 of 1 step(s) compiled (step 0)" in text
    assert "torch.compile in this trace" in text and "One compiled region: no sign of graph breaks" in text
    log = PerfLog(log_path).read("cpu_bound")
    assert log.loc[log["metric"] == "compile_s", "value"].tolist() == [pytest.approx(1.42)]


@pytest.mark.slow
def test_cpu_bound_notebook_on_a_cpu_only_trace_has_no_gpu_figure(session, log_path):
    nb = session.run(NOTEBOOKS / "cpu_bound.py", {"trace_path": "cpu/ppo_compiled.json.gz",
                                                   "perf_log_path": str(log_path)})
    assert _card(nb)["verdict"] == "CPU-only trace"
    text = _text(nb)
    assert "the GPU figures (GPU busy bars, launch delays) are left out" in text
    assert "Optimizer.step#Adam.step" in text  # the record_function ranges
    # step split (host bars only), timeline (host lanes only), top host ops: no launch-delay figure
    assert _figures(nb) == 3


@pytest.mark.slow
def test_cpu_bound_notebook_on_a_host_ahead_trace_shows_the_launch_delays(session, log_path):
    nb = session.run(NOTEBOOKS / "cpu_bound.py", {"trace_path": str(shared_trace(HOST_AHEAD)),
                                                   "perf_log_path": str(log_path)})
    assert _card(nb)["verdict"] == "GPU-bound (host ahead)"
    delay = cpu_bound(load_trace(shared_trace(HOST_AHEAD))).evidence["queue_delay_us"] / 1e3
    assert f"The median kernel starts {delay:,.3g} ms after its launch call" in _text(nb)
    assert _figures(nb) == 5  # the three above, the launch-delay histogram and each fix's predicted step


@pytest.mark.slow
def test_sync_points_notebook_heads_with_waits_and_lists_host_reads_apart(session, log_path):
    nb = session.run(NOTEBOOKS / "sync_points.py", {"trace_path": str(shared_trace(DLRM)),
                                                     "perf_log_path": str(log_path)})
    card, text = _card(nb), _text(nb)
    assert card["verdict"].startswith("10 sync points per step")  # the 11th runs after the profiled step
    assert [n["label"] for n in card["numbers"]] == ["sync points per step", "host blocked in syncs per step",
                                                     "host scalar reads per step (no GPU wait)"]
    assert "57 host scalar reads, no GPU wait" in text and "confirmed by" not in text
    metrics = set(PerfLog(log_path).read("sync_points")["metric"])
    assert {"sync_points_per_step", "host_scalar_reads_per_step"} <= metrics and "syncs_per_step" not in metrics


@pytest.mark.slow
def test_diff_notebook_shows_improvements_apart_waits_ranges_and_dropped_steps(session, log_path, pinned_pair):
    nb = session.run(NOTEBOOKS / "compile_ab.py", {"mode": "trace", "trace_path": str(pinned_pair[0]),
                                                    "trace_path_b": str(pinned_pair[1]),
                                                    "perf_log_path": str(log_path)})
    card, text = _card(nb), _text(nb)
    assert card["verdict"].startswith("after vs before") and card["fix"] == ""
    assert "No problem found" in text and "Improvements and notes (severity info)" in text
    assert "HtoD copy time per step fell by 0.234 ms" in text
    assert "Host waits on the GPU, by kind" in text and "HtoD copy call" in text and "event_sync" in text
    assert "record_function ranges" in text and "## sample ##" in text
    assert "A: dropped 1 partial step(s) at the edge of the profiler window" in text


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_MEMORY / "cs336_nothanmin_memsnap_fwd_fp32.pickle.gz").exists(),
                    reason="real memory snapshots live in ../shared/traces/memory")
def test_memory_leak_notebook_on_one_real_snapshot_never_says_leak(session, log_path):
    nb = session.run(NOTEBOOKS / "memory_leak.py", {
        "mode": "snapshot", "perf_log_path": str(log_path),
        "snapshot_paths": [str(SHARED_MEMORY / "cs336_nothanmin_memsnap_fwd_fp32.pickle.gz")]})
    card, text = _card(nb), _text(nb)
    assert card["verdict"] == "one snapshot: live memory grew 11,460.2 MiB within its window (not a leak test)"
    assert "leak found" not in [n["label"] for n in card["numbers"]]
    assert "within the recorded window" in text and str(SHARED_MEMORY) not in html_text(nb)


@pytest.mark.slow
def test_memory_leak_notebook_compares_several_snapshots(session, log_path, tmp_path):
    paths = [str(snapshot_file(tmp_path / f"s{i}.pickle.gz", sizes))
             for i, sizes in enumerate([[10], [500], [500], [500]])]
    nb = session.run(NOTEBOOKS / "memory_leak.py", {"mode": "snapshot", "snapshot_paths": paths,
                                                     "perf_log_path": str(log_path)})
    assert _card(nb)["verdict"] == "first-step growth across 4 snapshots"
    text = _text(nb)
    assert "state created once (optimizer state, workspaces, caches), not a leak" in text
    assert str(tmp_path) not in html_text(nb)  # file names, not local paths


def test_htod_text_reports_the_host_wait_of_pageable_copies():
    from perfkit.analysis.htod import htod

    trace = load_trace(shared_trace(DLRM))
    result = htod(trace)
    text = htod_report.htod_text(result)
    assert "The host waited 1.19 ms in pageable host-to-device copy calls and 0.91 ms in device-to-host" in text
    assert "against 0.01 ms of GPU copy time" in text
    assert "host blocked 1.19 ms in their copy calls" in result.findings[0].title  # the figure the finding quotes


def test_cpu_bound_rows_put_the_queued_gpu_work_on_the_card_when_the_host_ran_ahead():
    gpu = Path(__file__).resolve().parents[1] / "data" / "traces" / "gpu"
    out = cpu_bound_report.cpu_bound_rows(cpu_bound(load_trace(gpu / "mlp_fp32.pt.trace.json.gz")), "trace f", "H100")
    assert [r["metric"] for r in out][:3] == ["median_step_ms", "queued_gpu_ms_per_step", "host_busy_ms_per_step"]
    assert round(out[1]["value"], 2) == 7.19 and round(out[0]["value"], 2) == 3.2
    in_step = cpu_bound_report.cpu_bound_rows(cpu_bound(load_trace(gpu / "mlp_bf16.pt.trace.json.gz")), "trace b", "H100")
    assert "queued_gpu_ms_per_step" not in [r["metric"] for r in in_step]


def test_the_fix_table_ranks_what_applies_and_says_why_the_rest_does_not():
    from perfkit.analysis.step.whatif import whatif

    w = whatif(load_trace(ROOT / "data" / "traces" / "gpu" / "dataloader_workers0.pt.trace.json.gz"))
    table = cpu_bound_report.whatif_table(w)
    assert table["fix"].iloc[0] == "dataloader_workers" and table["saves"].iloc[0] == "78.1%"
    assert table["predicted step (ms)"].iloc[0] == pytest.approx(w.top.predicted_step_us / 1e3)
    row = table.set_index("fix").loc["skip_warmup (mean step)"]  # a one-time cost is read on the mean step
    assert row["speedup"] == pytest.approx(w.replay.steps["measured_us"].mean() / w.prediction("skip_warmup")
                                           .predicted_mean_us)
    roles = table.set_index("fix")["verdict"]
    assert roles["host_compute"] == "upper bound: measure it" and roles["dataloader_workers"] == "decided it"
    assert (roles == "decided it").sum() == 1 and roles["cuda_graphs"] == "" and roles["overlap_comm"] == ""
    assert table.set_index("fix").loc["overlap_comm", "assumes"] == "does not apply: no collective"
    text = cpu_bound_report.whatif_text(w)
    assert "the median step, 26.60 ms, replays within 0.0% (median)" in text
    assert text.endswith("The saving decides: dataloader_workers saves most: 78% of the median step (>= 5%).")


def test_a_trace_nothing_is_replayed_on_says_so_and_shows_no_fix_table():
    from perfkit.analysis.step.whatif import whatif

    w = whatif(load_trace(CPU / "ppo_item_logging.json.gz"))
    assert cpu_bound_report.whatif_text(w) == ("No fix was replayed: no GPU events: there is nothing to replay; the "
                                               "verdict uses host time only. The verdict above comes from the share "
                                               "rules.")
