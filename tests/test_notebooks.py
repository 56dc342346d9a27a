"""Execute every investigation notebook and check what it shows.

Notebooks run in one kernel per module (``nbsession.KernelSession``: ``%reset -f`` between
executions) with tiny parameters and a temporary perf log: every notebook in both modes, then
every trace-mode notebook on every trace in ``data/traces/cpu`` and on shared traces covering
ROCm, CPU-only, multi-rank (a folder of DLRM ranks), compiled, 2021-era and no-step traces.
The runner's own path (papermill, HTML, index) is tested in test_runner.py and test_workbook.py.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from conftest import SHARED_TRACES
from nbsession import KernelSession, bad_text, html_text, outputs
from perfkit.errors import ParameterError
from perfkit.bench import live
from perfkit.report import cpu_bound as cpu_bound_report
from perfkit.report import sync_points
from perfkit import stats
from perfkit import workbook
from perfkit.report import rows, tables
from perfkit.report.card import MIME
from perfkit.report.perflog import PerfLog
from perfkit.report.publish.params import notebook_parameters
from perfkit.registry import CASE_STUDIES, INVESTIGATIONS, read_notebook

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CPU_TRACES = sorted((ROOT / "data" / "traces" / "cpu").glob("*.json.gz"))
GPU_TRACES = sorted((ROOT / "data" / "traces" / "gpu").glob("*.json.gz"))  # recorded on an H100
TINY_PPO = {"envs": 4, "rollout": 4, "epochs": 1, "minibatch": 16, "channels": 8, "hidden": 32}
LIVE = {
    "cpu_bound": {"workload": "ppo", "variant": "item_logging", "overrides": TINY_PPO, "steps": 2},
    "step_anatomy": {"workload": "ppo", "variant": "item_logging", "overrides": TINY_PPO, "steps": 2},
    "htod": {"overrides": {"capacity": 64, "batch": 4, "conv_channels": 8, "latent": 16}, "steps": 2,
             "sweep_sizes": [4096, 65536], "sweep_repeats": 2},
    "sync_points": {"overrides": TINY_PPO, "steps": 2, "detect_steps": 1},
    "compile_ab": {"backend": "eager", "ab_steps": 10, "batch": 8, "hidden": 16},
    "amp_regression": {"train_steps": 3, "ab_repeats": 8, "batch": 8, "hidden": 16},
    "memory_leak": {"leak_steps": 60, "leak_warmup": 5, "sample_every": 10, "monitor_interval_s": 0.05},
}
SINGLE = ("cpu_bound", "step_anatomy", "htod", "sync_points")
PAIRS = ("compile_ab", "amp_regression", "memory_leak")
TRACE_TINY = {"htod": {"sweep_sizes": [4096], "sweep_repeats": 2}}
# Shared traces picked for coverage (issue 10): ROCm, CPU-only, compiled/Triton, no steps, 2021 names.
SHARED_PICKS = ("hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
                "tracelens_mi300x_compile_triton_small.json.gz", "hta_triton_example__triton_example.json.gz",
                "kineto_h100_out_of_order_before_fix.json.gz",
                "hta_critical_path__cuda_event_sync__event_sync_trace.json.gz")
DLRM_RANKS = ("param_v100_dlrm_rank0.pt.trace.json.gz", "param_v100_dlrm_rank1.pt.trace.json.gz")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kernel")
    s = KernelSession(folder)
    yield s
    s.close()


@pytest.fixture(scope="module")
def log_path(tmp_path_factory):
    return tmp_path_factory.mktemp("log") / "perf_log.csv"


def _card(nb) -> dict:
    """The verdict card, which must be the first output of the notebook."""
    first = outputs(nb)[0]
    assert MIME in first.get("data", {}), f"the first output is not the verdict card: {first}"
    return first["data"][MIME]


def _figures(nb) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs(nb))


def _headers(nb) -> list[tuple[str, ...]]:
    heads = []
    for thead in re.findall(r"<thead>(.*?)</thead>", html_text(nb), flags=re.S):
        heads.append(tuple(h.replace("<wbr>", "") for h in re.findall(r"<th[^>]*>(.*?)</th>", thead, flags=re.S)))
    return heads


# -- every notebook, both modes -----------------------------------------------------------------

MODES = [(name, mode) for mode in ("trace", "live") for name in (*SINGLE, *PAIRS)]


@pytest.mark.parametrize("name,mode", MODES)
def test_notebook_runs_and_leads_with_its_verdict(session, log_path, name, mode):
    params = {"mode": mode, "change": f"test-{mode}", "perf_log_path": str(log_path),
              **(LIVE[name] if mode == "live" else TRACE_TINY.get(name, {}))}
    nb = session.run(NOTEBOOKS / f"{name}.py", params)
    card = _card(nb)
    assert card["investigation"] == name and card["verdict"] and card["subject"] and card["device"]
    assert _figures(nb) >= 1
    heads = _headers(nb)
    no_findings = "No GPU-gap findings" in html_text(nb)  # step_anatomy on a trace without GPU gaps says so
    assert no_findings or any({"severity", "finding", "fix"} <= set(h) for h in heads), "findings table missing"
    assert any({"metric", "value", "previous run", "verdict"} <= set(h) for h in heads), "perf log rows missing"
    assert any({"section", "key", "value"} <= set(h) for h in heads), "machine table missing"
    logged = PerfLog(log_path).read(name)
    mine = logged[logged["change"] == f"test-{mode}"]
    assert len(mine) >= 1 and set(mine["run_id"]) and not mine["value"].isna().any()
    assert [n["label"] for n in card["numbers"]][:1] or card["investigation"] == "htod"
    # numbers that are not numbers (test_default_reports reads the trace defaults, "No fix needed" too)
    assert not bad_text(nb, "nan", "None", "exponent"), f"{name} ({mode}) report shows them"


def test_trace_mode_describes_the_trace_not_this_machine(session, log_path):
    nb = session.run(NOTEBOOKS / "cpu_bound.py", {"perf_log_path": str(log_path)})
    card = _card(nb)  # the default: an H200 trace, read on this CPU machine
    assert card["subject"] == "trace gpu/dataloader_workers0.pt.trace.json.gz" and card["device"] == "NVIDIA H200"
    nb = session.run(NOTEBOOKS / "cpu_bound.py", {"trace_path": "cpu/mppi_float_tensor.json.gz",
                                                  "perf_log_path": str(log_path)})
    card = _card(nb)
    assert card["subject"] == "trace cpu/mppi_float_tensor.json.gz" and card["device"] == "cpu"
    assert "cpu (no GPU events in the trace)" in html_text(nb)


def test_live_modes_report_what_they_measured(session, log_path):
    nb = session.run(NOTEBOOKS / "memory_leak.py", {"perf_log_path": str(log_path), **LIVE["memory_leak"]})
    assert _card(nb)["verdict"] == "leak"  # keep_graph_losses keeps one tensor per step
    nb = session.run(NOTEBOOKS / "sync_points.py", {"mode": "live", "perf_log_path": str(log_path),
                                                      **LIVE["sync_points"]})
    log = PerfLog(log_path).read("sync_points")
    assert log["metric"].eq("detected_syncs_per_step").any() and log["value"].iloc[-1] > 0


def test_validation_notebook_runs_and_logs(session, tmp_path):
    log = tmp_path / "perf_log.csv"
    nb = session.run(NOTEBOOKS / "validation.py", {"only": ["runtime_syncs_ppo", "gradscaler_syncs"],
                                                   "perf_log_path": str(log)})
    assert _card(nb)["verdict"] == "2 checks: 1 pass, 1 skipped"
    assert "2 checks on no GPU (CPU only) (cpu, quick sizes)" in html_text(nb)
    frame = PerfLog(log).read()
    assert frame[["investigation", "metric", "value"]].values.tolist() == [["validation", "runtime_syncs_ppo_pass", 1.0]]


def test_a_trace_without_syncs_renders(session, log_path):
    # issue 10: the fixed PPO trace has no sync sites; the breakdown of an empty table crashed.
    nb = session.run(NOTEBOOKS / "sync_points.py", {"trace_path": "cpu/ppo_batched_metrics.json.gz",
                                                     "perf_log_path": str(log_path)})
    assert _card(nb)["investigation"] == "sync_points"


# -- every trace-mode notebook on every trace ---------------------------------------------------

def _shared_cases():
    cases = [pytest.param(SHARED_TRACES / n, id=n[:40]) for n in SHARED_PICKS]
    return cases + [pytest.param("dlrm-ranks", id="dlrm-two-ranks")]


@pytest.fixture
def trace_arg(request, tmp_path):
    value = request.param
    if value == "dlrm-ranks":  # load_trace takes a folder of per-rank files
        if not (SHARED_TRACES / DLRM_RANKS[0]).exists():
            pytest.skip(f"{SHARED_TRACES} not found: real traces live in ../shared/traces")
        folder = tmp_path / "dlrm"
        folder.mkdir()
        for name in DLRM_RANKS:
            (folder / name).symlink_to(SHARED_TRACES / name)
        return folder
    if not Path(value).exists():
        pytest.skip(f"{value} not found: real traces live in ../shared/traces")
    return Path(value)


@pytest.mark.parametrize("trace_arg", [pytest.param(p, id=p.name[:40]) for p in CPU_TRACES + GPU_TRACES]
                         + _shared_cases(),
                         indirect=True)
def test_trace_notebooks_run_on_every_trace(session, log_path, trace_arg):
    for name in SINGLE:
        nb = session.run(NOTEBOOKS / f"{name}.py", {"trace_path": str(trace_arg), "perf_log_path": str(log_path),
                                                     **TRACE_TINY.get(name, {})})
        assert _card(nb)["subject"].startswith("trace ")


@pytest.mark.parametrize("trace", ["mlp_fp32.pt.trace.json.gz", "mlp_bf16.pt.trace.json.gz"])
def test_gpu_kernels_notebook_reads_tensor_cores_off_and_on(session, log_path, trace):
    nb = session.run(NOTEBOOKS / "gpu_kernels.py", {"trace_path": str(ROOT / "data" / "traces" / "gpu" / trace),
                                                     "perf_log_path": str(log_path)})
    text, share = html_text(nb), "0 %" if "fp32" in trace else "100 %"
    assert "NVIDIA H100" in _card(nb)["subject"] + text and f"GEMM time on Tensor Cores: {share}" in text


@pytest.mark.parametrize("name", PAIRS)
def test_pair_notebooks_diff_real_traces(session, log_path, name):
    a, b = (SHARED_TRACES / n for n in (SHARED_PICKS[0], SHARED_PICKS[2]))
    if not a.exists():
        pytest.skip(f"{a} not found: real traces live in ../shared/traces")
    nb = session.run(NOTEBOOKS / f"{name}.py", {"mode": "trace", "trace_path": str(a), "trace_path_b": str(b),
                                                 "perf_log_path": str(log_path)})
    # neither trace recorded memory: the leak report says so rather than comparing step times
    lead = "no memory recorded in either trace" if name == "memory_leak" else "after vs before"
    assert _card(nb)["verdict"].startswith(lead)


# -- step_anatomy and ranks ----------------------------------------------------------------------

RANK_SET = ROOT / "data" / "traces" / "ranks" / "ddp4_slow_dataloader"


def test_step_anatomy_leads_with_the_sentence_and_points_at_perfetto(session, log_path, tmp_path):
    import perfkit

    trace_file = RANK_SET / "rank0.pt.trace.json.gz"  # the synthetic set has a GPU timeline
    out = tmp_path / "annotated.json.gz"
    nb = session.run(NOTEBOOKS / "step_anatomy.py", {"trace_path": str(trace_file), "perf_log_path": str(log_path),
                                                      "annotated_path": str(out), "change": "anatomy"})
    trace = perfkit.load_trace(trace_file)
    card = _card(nb)
    assert card["verdict"] == perfkit.step_anatomy(trace).sentence and "mostly input" in card["verdict"]
    # one diagnosis, the card's fix is perfkit diagnose's: the .item() each step keeps the 3 ms DataLoader from
    # overlapping the GPU; removing it saves most (replayed: 22% of the step, the DataLoader's workers 20%), and the
    # DataLoader is named beside the verdict
    d = perfkit.diagnose(trace)
    assert card["verdict"].startswith("sync-bound; step ") and card["fix"] == d.fix
    assert card["fix"].startswith(".item() reads a GPU scalar") and "Predicted: median step 13.72 -> 10.66 ms" in card["fix"]
    assert d.decided_by == "replay" and "also: DataLoader 22% of the step" in d.title
    assert _figures(nb) >= 3 and "GPU idle for input" in html_text(nb)
    assert "Wrote " in html_text(nb) and len(perfkit.load_trace(out).events) > len(trace.events)
    log = PerfLog(log_path).read("step_anatomy")
    mine = log[log["change"] == "anatomy"].set_index("metric")["value"]
    assert {"mean_step_ms", "gpu_busy_ms_per_step", "gpu_idle_ms_per_step", "idle_input_ms_per_step"} <= set(mine.index)
    assert mine["gpu_busy_ms_per_step"] + mine["gpu_idle_ms_per_step"] == pytest.approx(mine["mean_step_ms"])


def test_step_anatomy_without_a_gpu_names_the_hot_function(session, log_path):
    nb = session.run(NOTEBOOKS / "step_anatomy.py",
                     {"trace_path": "cpu/mppi_float_tensor.json.gz", "perf_log_path": str(log_path)})
    card = _card(nb)
    assert card["verdict"].startswith("CPU-only trace; step ") and "no GPU timeline" in card["verdict"]
    assert "in linear (native code called from Python)" in card["verdict"]  # the MPPI planner's Linear layers
    assert card["fix"].startswith("No GPU activity was recorded")  # what to record, and the host ops to speed up
    text = html_text(nb)
    assert "No GPU timeline in this trace" in text and "perfkit annotate cpu/mppi_float_tensor.json.gz -o" in text
    assert [n["label"] for n in card["numbers"]] == ["mean step"]


def test_cpu_bound_points_at_step_anatomy():
    text = (NOTEBOOKS / "cpu_bound.py").read_text(encoding="utf-8")
    assert "(step_anatomy.html)" in text and "notebooks/step_anatomy.py" in text


def test_ranks_notebook_names_the_planted_straggler(session, log_path):
    nb = session.run(NOTEBOOKS / "ranks.py", {"perf_log_path": str(log_path), "workers": 1, "change": "ranks"})
    card = _card(nb)
    assert card["verdict"].startswith("rank 2 reaches the collectives") and "its DataLoader" in card["verdict"]
    assert card["subject"] == "trace ddp4_slow_dataloader" and card["device"] == "NVIDIA A100-SXM4-80GB"
    assert [n["label"] for n in card["numbers"]] == ["median step", "waiting for peers per step",
                                                     "worst straggler's excess"]
    assert _figures(nb) == 3 and "rank 2 (straggler)" not in html_text(nb)  # labels live in the figures
    assert any({"rank", "file", "steps", "excess_pct", "cause"} <= set(h) for h in _headers(nb))
    log = PerfLog(log_path).read("ranks")
    mine = log[log["change"] == "ranks"].set_index("metric")["value"]
    assert mine["straggling_ranks"] == 1 and 12 < mine["straggler_excess_pct"] < 16  # of the median rank's step


def _rank_sources(tmp_path):
    yield str(RANK_SET / "rank[01].pt.trace.json.gz"), "trace ddp4_slow_dataloader/rank[01].pt.trace.json.gz"
    yield str(CPU_TRACES[0]), f"trace cpu/{CPU_TRACES[0].name}"  # one file: nothing to compare, said so
    if (SHARED_TRACES / DLRM_RANKS[0]).exists():
        folder = tmp_path / "dlrm"
        folder.mkdir()
        for r in range(8):
            (folder / f"param_v100_dlrm_rank{r}.pt.trace.json.gz").symlink_to(
                SHARED_TRACES / f"param_v100_dlrm_rank{r}.pt.trace.json.gz")
        yield str(folder), "trace dlrm"


def test_ranks_notebook_on_globs_single_files_and_real_ranks(session, log_path, tmp_path):
    for trace_path, subject in _rank_sources(tmp_path):
        nb = session.run(NOTEBOOKS / "ranks.py", {"trace_path": trace_path, "perf_log_path": str(log_path),
                                                   "workers": 1})
        assert _card(nb)["subject"] == subject
        if subject.startswith("trace dlrm"):  # rank 7 arrives last at the first all-to-all (docs/ranks.md)
            assert "rank 7 last" in html_text(nb) and "Tesla V100" in _card(nb)["device"]
        if trace_path == str(CPU_TRACES[0]):
            assert "one rank file: nothing to compare" in html_text(nb)


def test_ranks_notebook_rejects_an_unknown_engine(session, log_path):
    from nbsession import NotebookFailed

    with pytest.raises(NotebookFailed, match="engine"):
        session.run(NOTEBOOKS / "ranks.py", {"engine": "spark", "perf_log_path": str(log_path)})


def test_ranks_parameters_are_trace_only():
    declared = notebook_parameters(NOTEBOOKS / "ranks.py")
    assert {"trace_path", "engine", "scheduler", "workers", "straggler_pct"} <= set(declared)
    assert "mode" not in declared  # `perfkit run -p mode live` leaves ranks on its traces
    assert declared["trace_path"]["default"] == '"ddp4_slow_dataloader"' and declared["engine"]["default"] == '"local"'


# -- the sources ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(INVESTIGATIONS))
def test_notebook_sources_are_percent_scripts_with_one_parameters_cell(name):
    path = NOTEBOOKS / f"{name}.py"
    text = path.read_text(encoding="utf-8")
    assert text.count('# %% tags=["parameters"]') == 1 and "# %%" in text
    nb = read_notebook(path)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    declared = notebook_parameters(path)
    for key in ("perf_log_path", "change", "run_label"):
        assert key in declared, f"{name} lacks parameter {key}"
    assert declared["perf_log_path"]["default"] == '""'


@pytest.mark.parametrize("name", [n for n in INVESTIGATIONS if n not in ("validation", "ranks", "gpu_kernels")])
def test_investigation_parameters(name):
    declared = notebook_parameters(NOTEBOOKS / f"{name}.py")
    for key in ("mode", "trace_path", "device", "interactive"):
        assert key in declared, f"{name} lacks parameter {key}"
    live_by_default = name in PAIRS  # the A/B and leak harnesses are live by nature
    assert declared["mode"]["default"] == ('"live"' if live_by_default else '"trace"')
    assert declared["interactive"]["default"] == "False"


def test_every_notebook_in_the_folder_is_registered():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.py")) == sorted([*INVESTIGATIONS, *CASE_STUDIES])


# -- notebook helpers ----------------------------------------------------------------------------

def test_find_trace_resolves_cwd_workbook_and_shipped_names(tmp_path, monkeypatch):
    shipped = (ROOT / "data/traces/cpu/leaky_clean.json.gz").resolve()
    monkeypatch.chdir(tmp_path)
    assert workbook.find_trace("cpu/leaky_clean.json.gz") == shipped
    assert workbook.find_trace("gpu/leaky_clean.json.gz") == (ROOT / "data/traces/gpu/leaky_clean.json.gz").resolve()
    (tmp_path / "mine.json.gz").write_bytes(shipped.read_bytes())
    assert workbook.find_trace("mine.json.gz") == tmp_path / "mine.json.gz"  # the caller's cwd first
    with pytest.raises(ParameterError, match="shipped traces, by name: .*cpu/leaky_clean.json.gz"):
        workbook.find_trace("nope.json.gz")
    with pytest.raises(ParameterError):
        workbook.find_trace("")


def test_check_mode_rejects_unknown_modes():
    assert workbook.check_mode("live") == "live"
    with pytest.raises(ParameterError, match="'trace'.*'live'"):
        workbook.check_mode("replay")
    with pytest.raises(ParameterError):
        live.load_source("both", "cpu/leaky_clean.json.gz")


def test_summary_frame_reads_back_summarize():
    from perfkit.analysis.summary import summarize

    source = live.load_source("trace", "cpu/leaky_clean.json.gz")
    frame = tables.summary_frame(summarize(source.trace)).set_index("metric")["value"]
    assert frame["steps"] == "3" and frame["kernels"] == "0" and frame["HtoD_copies"] == "0"
    assert "compile_s" not in frame  # compile rows only for a torch.compile trace
    compiled = tables.summary_frame(summarize(live.load_source("trace", "cpu/ppo_compiled.json.gz").trace))
    assert compiled.set_index("metric").at["compiled_regions", "value"] == "2"
    assert source.device == "cpu" and source.subject == "trace cpu/leaky_clean.json.gz"


def test_cpu_bound_rows_carry_a_ci_over_steps():
    from perfkit.analysis.step.cpu_bound import cpu_bound

    result = cpu_bound(live.load_source("trace", "cpu/ppo_item_logging.json.gz").trace)
    out = cpu_bound_report.cpu_bound_rows(result, "trace x", "cpu")
    assert [r["metric"] for r in out] == ["median_step_ms", "host_busy_ms_per_step"]
    walls = result.steps["wall_us"] / 1e3
    assert out[0]["value"] == pytest.approx(walls.median())
    assert walls.min() <= out[0]["ci_low"] <= out[0]["value"] <= out[0]["ci_high"] <= walls.max()
    assert all(r["higher_is_better"] is False and r["subject"] == "trace x" for r in out)


def test_step_ci_is_deterministic_and_exact_for_constant_values():
    assert stats.step_ci([5, 5, 5]) == (5.0, 5.0)
    assert stats.step_ci([1.0]) is None
    assert stats.step_ci([1, 2, 3, 4, 10]) == stats.step_ci([1, 2, 3, 4, 10])


class _FakeAB:
    def __init__(self, a, b):
        self.samples_a, self.samples_b = tuple(a), tuple(b)
        self.speedup, self.speedup_ci = 2.0, (1.8, 2.2)


def test_ab_rows_log_both_arms_and_never_one_as_the_others_baseline():
    out = rows.ab_rows("compile_ab", _FakeAB([0.010] * 5 + [0.011] * 5, [0.005] * 10),
                       ("eager_step_ms", "compiled_step_ms"), "mlp", "cpu")
    assert [r["metric"] for r in out] == ["compiled_step_ms", "eager_step_ms", "speedup"]
    assert out[0]["value"] == pytest.approx(5.0) and (out[0]["ci_low"], out[0]["ci_high"]) == (5.0, 5.0)
    assert "baseline" not in out[1] and out[2]["higher_is_better"] and out[2]["ci_low"] == 1.8


def test_log_rows_with_no_rows_writes_nothing(tmp_path):
    frame = rows.log_rows(tmp_path / "log.csv", [])
    assert frame.empty and not (tmp_path / "log.csv").exists()


def test_site_labels_and_summary_table():
    sites = pd.DataFrame([
        {"kind": "item", "op": "aten::item", "file": "/x/train.py", "line": 12, "func": "step", "inner_file": "",
         "inner_line": -1},
        {"kind": "stream_sync", "op": "aten::copy_", "top_op": "aten::to", "file": "/x/train.py", "line": 40,
         "func": "fetch", "inner_file": "/env/transformers/modeling.py", "inner_line": 1421, "inner_func": "box"},
        {"kind": "stream_sync", "op": "", "top_op": "", "call": "cudaStreamSynchronize", "file": None, "line": -1},
        {"kind": "memcpy_dtoh", "op": "aten::copy_", "top_op": "aten::to", "file": "", "line": -1}])
    assert sync_points.site_labels(sites) == ["item: step @ train.py:12",
                                         "stream_sync: fetch @ train.py:40 via modeling.py:1421",
                                         "stream_sync: cudaStreamSynchronize", "memcpy_dtoh: aten::to (via aten::copy_)"]
    table = tables.summary_table({"speedup": 1.23456, "verdict": "faster", "n": 1200, "x": None, "b": 4.465e12,
                                  "scaler": False, "fp32_median_s": 0.06979, "peak_bytes_fp32": 266_240,
                                  "syncs_per_step": float("nan")})
    assert table["value"].tolist() == ["1.235", "faster", "1,200", "n/a", "4,465,000,000,000", "no", "69.79 ms",
                                       "260 KiB", "n/a"]
    assert table["metric"].tolist()[5:7] == ["scaler", "fp32 median"]


def test_prose_escapes_names():
    from perfkit.report.prose import prose

    assert prose("kernel <script>") == "<p>kernel &lt;script&gt;</p>"
