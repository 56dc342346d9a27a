"""The library functions behind the case-study notebooks: per-step trace figures (checked against
raw events counted by hand), the A/B evidence, the ladder of fixes, GradScaler syncs, planning
memory against a planted buffer, perf-log rows and closing-table rows."""
from __future__ import annotations

import gzip
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import perfkit
from conftest import shared_trace
from perfkit.errors import ParameterError
from perfkit.report import caserows, guide, pair, tables
from perfkit.analysis import per_step as perstep
from perfkit.report.casestudy import WriteupFigure, closing_table, gpu_only, measured_ci
from perfkit.bench.live import load_source
from perfkit.bench.ladder import Arm, arm_facts, first_step_cost, ppo_env_steps, speed_ladder, variant_ab
from perfkit.bench.planning import planning_memory
from perfkit.bench.gradscaler import gradscaler_syncs
from perfkit.workloads.replay import SAMPLE_ANNOTATION
from perfkit.bench import live
from perfkit.report import cpu_bound

TINY_PPO = {"envs": 4, "rollout": 4, "epochs": 1, "minibatch": 16, "channels": 8, "hidden": 32}
RESNET = "kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz"


def _trace(name: str):
    return load_source("trace", name).trace


def _raw_in_steps(path, keep) -> dict[int, list[dict]]:
    """Raw events for which ``keep(event)`` holds, by the ProfilerStep window they start in."""
    events = json.load(gzip.open(path))["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    out = {int(s["name"].split("#")[1]): [] for s in steps}
    for e in events:
        if e.get("ph") == "X" and keep(e):
            for s in steps:
                if s["ts"] <= e["ts"] < s["ts"] + s["dur"]:
                    out[int(s["name"].split("#")[1])].append(e)
    return out


# -- per-step figures on real traces, against the raw events -------------------------------------

def test_per_step_figures_of_a_real_gpu_trace_match_the_raw_events():
    path = shared_trace(RESNET)
    trace = perfkit.load_trace(path)
    result = perfkit.cpu_bound(trace)
    convs = _raw_in_steps(path, lambda e: e.get("name") == "aten::conv2d")
    assert perstep.ops_per_step(result, ["aten::conv2d"])["aten::conv2d"] == sum(map(len, convs.values())) / 6
    pageable = _raw_in_steps(path, lambda e: e.get("name") == "Memcpy HtoD (Pageable -> Device)")
    assert perstep.pageable_htod_per_step(perfkit.htod(trace)) == sum(map(len, pageable.values())) / 6 == 2.0
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    raw = _raw_in_steps(path, lambda e: e.get("name") == loader)
    assert perstep.range_per_step(trace, loader).tolist() == [sum(e["dur"] for e in raw[s]) for s in sorted(raw)]
    split = perstep.host_device_split(result)
    assert split["has_gpu"] and split["cpu_gpu_ratio"] == pytest.approx(split["host_busy_ms"] / split["gpu_busy_ms"])
    assert 0 < split["gpu_idle_pct"] < 100


def test_a_cpu_trace_has_no_gpu_figures_only_counts():
    result = perfkit.cpu_bound(_trace("cpu/mppi_float_tensor.json.gz"))
    split = perstep.host_device_split(result)
    assert not split["has_gpu"] and math.isnan(split["cpu_gpu_ratio"]) and math.isnan(split["gpu_idle_pct"])
    frame = perstep.host_device_frame(result).set_index("metric")["value"]
    assert frame["GPU idle (%)"].startswith("no GPU") and frame["host busy per step (ms)"] > 0
    # the naive port builds one FloatTensor per sample: 64 aten::lift_fresh per planning step
    table = perstep.ops_table(result, perfkit.cpu_bound(_trace("cpu/mppi_from_numpy.json.gz")),
                              ["aten::lift_fresh", "aten::linear", "aten::never"]).set_index("op")
    assert table.loc["aten::lift_fresh", "before"] == 64 and table.loc["aten::lift_fresh", "after"] == 1
    assert table.loc["aten::linear", "ratio"] == 1.0 and math.isnan(table.loc["aten::never", "ratio"])


def test_range_change_compares_the_sample_range_by_name():
    before, after = _trace("cpu/replay_host_normalize.json.gz"), _trace("cpu/replay_device_normalize.json.gz")
    per_step = perstep.range_per_step(before, SAMPLE_ANNOTATION)
    raw = before.events[before.events["name"] == SAMPLE_ANNOTATION]["dur_us"].to_numpy()
    assert per_step.tolist() == raw.tolist() and len(per_step) == 3
    change = perstep.range_change(before, after, SAMPLE_ANNOTATION)
    assert change["before_ms"] == pytest.approx(np.median(raw) / 1e3)
    assert change["ratio"] == pytest.approx(change["after_ms"] / change["before_ms"])
    assert change["low"] <= change["ratio"] <= change["high"]
    assert change["verdict"] == "inconclusive" and "spans more than 2x" in change["reason"]  # 3 steps, one warm-up
    assert perstep.range_text(change).startswith(f"{SAMPLE_ANNOTATION} ")
    with pytest.raises(ParameterError, match="no record_function range 'x'.*## train/update ##"):
        perstep.range_per_step(before, "x")


def test_compiled_regions_show_the_break_and_the_recompile():
    regions = {n: perstep.compiled_regions(_trace(f"cpu/ppo_{n}.json.gz")) for n in ("tensor_branch", "flag_flip",
                                                                                  "compiled")}
    assert regions["tensor_branch"]["frame"].nunique() == 2  # the graph break splits forward in two frames
    assert regions["flag_flip"]["frame"].nunique() == 1
    assert len(regions["flag_flip"]) == len(regions["compiled"]) + 1  # one more graph: the flag's recompile
    assert (regions["compiled"]["per_step"] * 3 == regions["compiled"]["calls"]).all()
    assert perstep.compiled_regions(_trace("cpu/ppo_item_logging.json.gz")).empty


def test_sync_change_counts_the_planted_checks():
    change = perstep.sync_change(_trace("cpu/ppo_sync_checks.json.gz"), _trace("cpu/ppo_batched_metrics.json.gz"))
    # 4 NaN checks + 1 branch per forward, 25 forwards per step (16 rollout + 1 bootstrap + 2 x 4 updates)
    assert change["before_per_step"] == 125 and change["after_per_step"] == 0 and change["cpu_only"]
    assert perstep.sync_text(change).startswith("125 -> 0 possible sync points")


# -- A/B evidence --------------------------------------------------------------------------------

def _fake_ab(a, b, labels=("A", "B"), ratio=0.5, low=0.4, high=0.6, device="cpu"):
    test = SimpleNamespace(ratio=ratio, low=low, high=high)
    return SimpleNamespace(labels=labels, samples_a=tuple(a), samples_b=tuple(b), median_a=float(np.median(a)),
                           median_b=float(np.median(b)), ratio=ratio, ci_low=low, ci_high=high, verdict="faster",
                           conclusion="faster", unreliable=None, speedup=1 / ratio, speedup_ci=(1 / high, 1 / low), environment={"device": device},
                           warnings=(), test=test)


def test_evidence_from_an_ab_says_a_cpu_figure_is_no_gpu_speedup():
    ev = pair.from_ab(_fake_ab([0.01] * 5, [0.005] * 5))
    assert (ev.before_ms, ev.after_ms, ev.speedup) == (10.0, 5.0, 2.0)
    assert ev.speedup_ci == pytest.approx((1 / 0.6, 1 / 0.4))
    assert "CPU figure" in ev.text() and "per-round" in ev.text()
    assert ev.verdict_line() == "B: faster (2x, CI 1.67-2.5x) on cpu"
    gpu = pair.from_ab(_fake_ab([0.01] * 5, [0.005] * 5, device="cuda"))
    assert gpu.on_gpu and "CPU figure" not in gpu.text()
    metrics = [r["metric"] for r in ev.rows("case_x", "s", ("a_ms", "b_ms"))]
    assert metrics == ["b_ms", "a_ms", "speedup"]


def test_use_threads_sets_and_reports_torch_threads():
    import torch

    before = torch.get_num_threads()
    try:
        assert live.use_threads(0) == before
        assert live.use_threads(1) == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    for bad in (-1, 1.5, True):
        with pytest.raises(ParameterError, match="threads="):
            live.use_threads(bad)


def test_quiet_profiler_log_keeps_a_level_the_user_set(monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    assert live.quiet_profiler_log() == "6"
    monkeypatch.setenv("KINETO_LOG_LEVEL", "2")
    assert live.quiet_profiler_log() == "2"


def test_evidence_from_a_trace_pair_uses_the_diff_ci():
    before, after = live.load_pair("trace", ("cpu/mppi_float_tensor.json.gz", "cpu/mppi_from_numpy.json.gz"),
                                   workload="mppi", arms=(Arm("a", "float_tensor"), Arm("b", "from_numpy")))
    comparison = perfkit.diff(before.trace, after.trace)
    ev = pair.from_diff(comparison, before, after, ("a", "b"))
    s = comparison.step_change
    assert (ev.ratio, ev.low, ev.high, ev.device) == (s["ratio"], s["low"], s["high"], "cpu")
    assert "3 vs 3 profiled steps" in ev.method and "median step times" in ev.text()
    out = {r["metric"]: r for r in ev.rows("case_x", "s", ("a_ms", "b_ms"))}
    assert list(out) == ["b_ms", "a_ms", "step_ratio_after_before"]
    assert out["a_ms"]["value"] == pytest.approx(before.trace.steps["dur_us"].median() / 1e3)
    assert out["a_ms"]["ci_low"] <= out["a_ms"]["value"] <= out["a_ms"]["ci_high"]
    assert (out["step_ratio_after_before"]["ci_low"], out["step_ratio_after_before"]["ci_high"]) == (s["low"], s["high"])
    assert pair.pair_subject("trace", before, after, "mppi", ("a", "b")) == \
        "trace cpu/mppi_float_tensor.json.gz -> trace cpu/mppi_from_numpy.json.gz"
    assert pair.pair_subject("live", before, after, "mppi", ("a", "b")) == "live mppi: a -> b"


# -- workload arms: A/B, ladder, first step, facts -------------------------------------------------

def test_variant_ab_and_ladder_time_real_workloads():
    arms = [Arm("naive", "float_tensor"), Arm("fix", "from_numpy"), Arm("fix, no reuse", "from_numpy",
                                                                       {"preallocate": False})]
    tiny = {"samples": 16, "horizon": 2, "iterations": 1}
    ab = variant_ab("mppi", arms[0], arms[1], device="cpu", overrides=tiny, repeats=5, warmup=1)
    assert ab.labels == ("naive", "fix") and ab.n == 5
    ladder = speed_ladder("mppi", arms, device="cpu", overrides=tiny, units=lambda w: w.config.samples,
                          unit="samples/s", repeats=5, warmup=1)
    assert len(ladder.steps) == 2 and ladder.overall.labels == ("naive", "fix, no reuse")
    assert ladder.units == (16.0, 16.0, 16.0)
    assert ladder.rung_samples(1) == ladder.steps[0].samples_b + ladder.steps[1].samples_a
    frame = ladder.to_frame()
    rate, low, high = ladder.rate(0)
    assert frame["rate"].iloc[0] == rate == pytest.approx(np.median([16 / s for s in ladder.steps[0].samples_a]))
    assert low <= rate <= high and math.isnan(frame["speedup"].iloc[0])
    assert frame["speedup"].iloc[1] == ladder.steps[0].speedup and ladder.verdict.startswith("naive -> fix, no reuse")
    noisy = [c for c in (*ladder.steps, ladder.overall) if any(not w.startswith("load") for w in c.warnings)]
    assert len(ladder.warnings) <= 2 and (not noisy or ladder.warnings[-1].startswith(f"{len(noisy)} of 3"))
    with pytest.raises(ParameterError, match="distinct labels"):
        speed_ladder("mppi", [arms[0], arms[0]], device="cpu")
    assert ppo_env_steps(SimpleNamespace(config=SimpleNamespace(**TINY_PPO))) == 16.0


def test_first_step_cost_and_arm_facts():
    first = first_step_cost("mppi", Arm("fix", "from_numpy"), steps=3, device="cpu", overrides={"samples": 16})
    assert len(first.run.step_s) == 3 and first.first_ms == first.run.step_s[0] * 1e3
    assert first.steady_ms == pytest.approx(np.median(first.run.step_s[1:]) * 1e3)
    assert first.ratio == pytest.approx(first.first_ms / first.steady_ms)
    with pytest.raises(ParameterError, match="steps=2"):
        first_step_cost("mppi", Arm("fix"), steps=2)
    host = arm_facts("replay", Arm("h", "host_normalize"), ("bytes_per_batch",), device="cpu")
    dev = arm_facts("replay", Arm("d", "device_normalize"), ("bytes_per_batch",), device="cpu")
    assert host["bytes_per_batch"] == 4 * dev["bytes_per_batch"] == 4 * 8 * 8 * 3 * 32 * 32
    assert any("pin_memory=True skipped" in n for n in dev["notes"])
    with pytest.raises(ParameterError, match="no attribute"):
        arm_facts("replay", Arm("d"), ("nope",), device="cpu")


def test_gradscaler_syncs_once_per_step_unless_adam_is_fused():
    table = gradscaler_syncs(steps=2, device="cpu")
    assert table["syncs_per_step"].tolist() == [0.0, 1.0, 0.0]
    assert table["syncing_ops"].iloc[1] == "GradScaler.step x2" and set(table["mode"]) == {"cpu-as-device"}


# -- planning memory: a planted per-sample-step buffer ----------------------------------------------

def test_planning_memory_finds_the_buffers_that_grow_with_the_horizon():
    # The preallocated planner holds noise and actions buffers of samples x horizon x action_dim
    # float32 each: 2 * 16 * 4 = 128 bytes per sample per horizon step, known analytically.
    result = planning_memory([64, 128, 256], [2, 4, 8], variant="from_numpy", device="cpu", budget_bytes=2**30,
                             overrides={"action_dim": 16, "iterations": 1, "hidden": 32})
    assert result.fit.slope == pytest.approx(128, rel=0.2)
    limits = result.limits_frame([4])
    samples = limits["max_samples"].iloc[0]
    assert result.bytes_at(samples, 4) == pytest.approx(2**30)
    assert limits["ci_low"].iloc[0] <= samples <= limits["ci_high"].iloc[0]
    assert len(result.to_frame()) == 9 and any("extrapolates" in w for w in result.warnings)
    with pytest.raises(ParameterError, match="3 or more distinct horizons"):
        planning_memory([1, 2, 3], [2, 4])


# -- perf-log rows ---------------------------------------------------------------------------------

def test_case_rows_carry_exact_counts_and_harness_cis():
    assert caserows.metric_name("## train/sample ##") == "train_sample"
    assert caserows.metric_name("aten::linear") == "aten_linear"
    out = caserows.count_rows("c", {"aten::linear": 68.0, "bad": math.nan}, "calls", subject="s", device="cpu",
                              suffix="_per_step")
    assert [(r["metric"], r["ci_low"], r["ci_high"]) for r in out] == [("aten_linear_per_step", 68.0, 68.0)]
    change = {"name": "## a ##", "after_ms": 2.0, "ratio": 0.5, "low": 0.4, "high": 0.7, "after_steps_ms": (2, 2, 2)}
    ranged = caserows.range_rows("c", change, subject="s", device="cpu")
    assert [r["metric"] for r in ranged] == ["a_ms_per_step", "a_ratio_after_before"] and ranged[1]["ci_high"] == 0.7
    assert (ranged[0]["ci_low"], ranged[0]["ci_high"]) == (2.0, 2.0)
    assert caserows.relabel([{"investigation": "memory_leak", "x": 1}], "c") == [{"investigation": "c", "x": 1}]


def test_ladder_and_planning_rows():
    steps = (_fake_ab([0.01] * 4, [0.005] * 4, ("a", "b")), _fake_ab([0.005] * 4, [0.004] * 4, ("b", "c")))
    ladder = perfkit.bench.ladder.LadderResult("ppo", "cpu", ("a", "b", "c"), steps,
                                                _fake_ab([0.01] * 4, [0.004] * 4, ("a", "c")), (16.0,) * 3, "env/s")
    out = caserows.ladder_rows("c", ladder, subject="s")
    assert [r["metric"] for r in out] == ["a_rate", "c_rate", "speedup", "b_rate"]
    assert out[0]["value"] == 1600.0 and out[1]["value"] == 4000.0 and out[2]["higher_is_better"]
    fit = SimpleNamespace(slope=32.0, low=30.0, high=34.0, intercept=500.0)
    rows = caserows.planning_rows("c", SimpleNamespace(fit=fit, device="cpu"), subject="s")
    assert [(r["metric"], r["value"]) for r in rows] == [("bytes_per_sample_step", 32.0), ("bytes_per_sample", 500.0)]


# -- closing table, op-suite figures, tables --------------------------------------------------------

def test_closing_table_shows_before_after_and_ci_and_refuses_half_measured_rows():
    table = closing_table([WriteupFigure("sample", "529 -> 358 ms", 0.508, "ms", "why", before=0.5935,
                                         ci=(0.4, 0.6)),
                           WriteupFigure("big", "x", 26_743_539.2, "samples", "why")])
    assert table["ours"].tolist() == ["0.5935 -> 0.508 ms (95% CI 0.4 to 0.6)", "26,743,539 samples"]
    with pytest.raises(ParameterError, match="before=nan"):
        closing_table([WriteupFigure("x", "y", 1.0, "", "why", before=math.nan)])
    with pytest.raises(ParameterError, match="ci="):
        closing_table([WriteupFigure("x", "y", "no GPU: none", "", "why", ci=(1.0, 2.0))])
    assert measured_ci(1, math.nan) is None and measured_ci(np.float64(1), 2) == (1.0, 2.0)
    assert gpu_only(3.0, True, "r") == 3.0 and gpu_only(3.0, False, "cpu trace") == "no GPU: cpu trace"


def _fake_suite():
    setting = SimpleNamespace
    a, b = setting(device="cpu", dtype="float32", threads=1, label="cpu float32, 1 thr"), \
        setting(device="cpu", dtype="bfloat16", threads=1, label="cpu bfloat16, 1 thr")
    comparison = SimpleNamespace(op="matmul", axis="dtype", a=a, b=b, ab=_fake_ab([2e-3] * 4, [1e-3] * 4))
    timing = SimpleNamespace(op="matmul", setting=a, samples=(2e-3,) * 4, work=2e9, unit="GFLOP/s", throughput=1000.0,
                             ci_s=(1.9e-3, 2.1e-3))
    return SimpleNamespace(comparisons=(comparison,), timings=(timing,), preset="quick")


def test_opsuite_figures_read_the_comparisons():
    suite = _fake_suite()
    assert guide.opsuite_verdict(suite) == "op suite (quick) on cpu: matmul dtype cpu bfloat16, 1 thr 2x (faster)"
    dtype = guide.comparison_figure(suite, "matmul", "dtype", "bf16", "x", "why")
    assert dtype.ours == 2.0 and dtype.ci == pytest.approx((1 / 0.6, 1 / 0.4))
    assert guide.comparison_figure(suite, "matmul", "device", "gpu", "x", "why").ours.startswith("no GPU")
    assert guide.comparison_figure(suite, "matmul", "threads", "t", "x", "why").ours.startswith("not measured")
    rate = guide.throughput_figure(suite, "matmul", "cpu", "float32", "cpu", "x", "why")
    assert rate.ours == 1000.0 and rate.ci == pytest.approx((2e9 / 2.1e-3 / 1e9, 2e9 / 1.9e-3 / 1e9))
    rows = caserows.opsuite_rows("c", SimpleNamespace(**vars(suite)), subject="s")
    assert rows[0]["metric"] == "matmul_cpu_bfloat16_1_thr_vs_cpu_float32_1_thr" and rows[0]["value"] == 2.0
    assert rows[1]["metric"] == "matmul_cpu_float32_1_thr" and rows[1]["ci_low"] == rows[1]["ci_high"] == 1000.0
    closing_table([dtype, rate])


def test_source_and_compile_site_tables(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("a = 1\nif x.any():\n    pass\n")
    frame = tables.with_source(pd.DataFrame({"file": [str(src), str(src), "nope.py"], "line": [2, -1, 3]}))
    assert frame["code"].tolist() == ["if x.any():", "", ""]
    result = SimpleNamespace(graph_breaks=(SimpleNamespace(reason="Data-dependent branching", location="p.py:146",
                                                           code="if h.any():"),),
                             recompiles=(SimpleNamespace(reason="flag == False", location="p.py:150", code="if f:"),))
    assert cpu_bound.compile_sites(result)["kind"].tolist() == ["graph break", "recompile"]
