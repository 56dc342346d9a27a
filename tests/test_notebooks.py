"""Execute every investigation notebook in both modes and check what it shows.

One module-level run per notebook and mode (papermill through ``run_notebook``, tiny
parameters, a temporary reports folder and perf log), then assertions on the executed
notebooks: figures, escaped tables with the expected headers, findings, the perf log rows.
Also: the committed notebooks match ``scripts/make_notebooks.py`` and carry no outputs, and
the notebook-support helpers of ``perfkit.report.headline``.
"""
from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from perfkit.errors import ParameterError
from perfkit.report import headline
from perfkit.report.perflog import PerfLog
from perfkit.report.runner import notebook_parameters, run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NAMES = ("cpu_bound", "htod", "sync_points", "compile_ab", "amp_regression", "memory_leak")
DAY = "2026-01-02"
TINY_PPO = {"envs": 4, "rollout": 4, "epochs": 1, "minibatch": 16, "channels": 8, "hidden": 32}
LIVE = {
    "cpu_bound": {"workload": "ppo", "variant": "item_logging", "overrides": TINY_PPO, "steps": 2},
    "htod": {"overrides": {"capacity": 64, "batch": 4, "conv_channels": 8, "latent": 16}, "steps": 2,
             "sweep_sizes": [4096, 65536], "sweep_repeats": 2},
    "sync_points": {"overrides": TINY_PPO, "steps": 2, "detect_steps": 1},
    "compile_ab": {"backend": "eager", "ab_steps": 10, "batch": 8, "hidden": 16},
    "amp_regression": {"train_steps": 3, "ab_repeats": 8, "batch": 8, "hidden": 16},
    "memory_leak": {"leak_steps": 60, "leak_warmup": 5, "sample_every": 10, "monitor_interval_s": 0.05},
}
ENV_HEADERS = ("section", "key", "value")
FINDING_HEADERS = ("severity", "finding", "evidence", "fix", "threshold")
LOG_HEADERS = ("investigation", "change", "metric", "value", "unit", "baseline", "delta_pct", "verdict")
# Headers of the investigation's own main table, per (notebook, mode).
MAIN_HEADERS = {
    ("cpu_bound", "trace"): ("step", "wall_us", "gpu_busy_pct", "host_busy_us", "verdict"),
    ("htod", "trace"): ("direction", "memory", "count", "bytes", "gb_per_s"),
    ("sync_points", "trace"): ("kind", "op", "file", "line", "blocked_us"),
    ("compile_ab", "trace"): ("metric", "a", "b", "delta", "delta_pct"),
    ("amp_regression", "trace"): ("metric", "a", "b", "delta", "delta_pct"),
    ("memory_leak", "trace"): ("metric", "a", "b", "delta", "delta_pct"),
    ("cpu_bound", "live"): ("step", "wall_us", "gpu_busy_pct", "host_busy_us", "verdict"),
    ("htod", "live"): ("size_bytes", "mode", "median_s", "gbps", "samples"),
    ("sync_points", "live"): ("file", "line", "op", "count", "per_step"),
    ("compile_ab", "live"): ("kind", "reason", "location", "detail"),
    ("amp_regression", "live"): ("metric", "value"),
    ("memory_leak", "live"): ("series", "unit", "per_1000_steps", "ci_low", "ci_high", "threshold", "state"),
}
# Figures each run must show at least (timelines, breakdowns, A/B, growth, monitor, log trend).
MIN_FIGURES = {
    ("cpu_bound", "trace"): 4, ("cpu_bound", "live"): 4, ("htod", "trace"): 3, ("htod", "live"): 3,
    ("sync_points", "trace"): 3, ("sync_points", "live"): 3, ("compile_ab", "trace"): 3,
    ("compile_ab", "live"): 2, ("amp_regression", "trace"): 3, ("amp_regression", "live"): 3,
    ("memory_leak", "trace"): 3, ("memory_leak", "live"): 3,
}
CASES = [(name, mode) for mode in ("trace", "live") for name in NAMES]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run all twelve notebooks once; returns {(name, mode): (NotebookRun, executed notebook)}."""
    out = tmp_path_factory.mktemp("reports")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFKIT_CACHE_DIR", str(out / "cache"))
        results = {}
        for name, mode in CASES:
            params = {"mode": mode, "change": f"test-{mode}", **(LIVE[name] if mode == "live" else {})}
            run = run_notebook(name, params, out_dir=out, date=DAY, progress=False)
            nb = nbformat.read(run.notebook_path, as_version=4) if run.notebook_path else None
            results[(name, mode)] = (run, nb)
    return {"runs": results, "log": PerfLog(out / "perf_log.csv").read(), "out": out}


def _outputs(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def _html_tables(nb) -> list[tuple[str, ...]]:
    """Header rows of every HTML table displayed by the notebook."""
    heads = []
    for o in _outputs(nb):
        html = o.get("data", {}).get("text/html", "")
        for thead in re.findall(r"<thead>(.*?)</thead>", html, flags=re.S):
            heads.append(tuple(re.findall(r"<th[^>]*>(.*?)</th>", thead, flags=re.S)))
    return heads


def _has_table(nb, headers) -> bool:
    return any(set(headers) <= set(h) for h in _html_tables(nb))


@pytest.mark.parametrize("name,mode", CASES)
def test_notebook_runs_clean(runs, name, mode):
    run, nb = runs["runs"][(name, mode)]
    assert run.ok, f"{name} ({mode}) failed in cell {run.failed_cell_index}: {run.error}\n{run.failed_cell_source}"
    assert not [o for o in _outputs(nb) if o.get("output_type") == "error"]
    html = Path(run.html_path).read_text(encoding="utf-8")
    assert "data:image/png;base64," in html


@pytest.mark.parametrize("name,mode", CASES)
def test_notebook_shows_figures(runs, name, mode):
    _, nb = runs["runs"][(name, mode)]
    pngs = [o for o in _outputs(nb) if "image/png" in o.get("data", {})]
    assert len(pngs) >= MIN_FIGURES[(name, mode)]


@pytest.mark.parametrize("name,mode", CASES)
def test_notebook_shows_tables(runs, name, mode):
    _, nb = runs["runs"][(name, mode)]
    assert _has_table(nb, ENV_HEADERS), "environment table missing"
    assert _has_table(nb, FINDING_HEADERS), "findings table missing"
    assert _has_table(nb, LOG_HEADERS), "perf log rows table missing"
    assert _has_table(nb, MAIN_HEADERS[(name, mode)]), f"main table missing: {_html_tables(nb)}"


@pytest.mark.parametrize("name,mode", CASES)
def test_notebook_appends_to_perf_log(runs, name, mode):
    log = runs["log"]
    mine = log[(log["investigation"] == name) & (log["change"] == f"test-{mode}")]
    assert len(mine) >= 1
    assert mine["run_id"].eq(f"{DAY}/{name}").all()
    assert mine["value"].map(math.isfinite).all()


def test_trace_mode_reads_the_shipped_traces(runs):
    _, nb = runs["runs"][("cpu_bound", "trace")]
    text = "".join(o.get("data", {}).get("text/html", "") for o in _outputs(nb))
    assert "Verdict: CPU-only trace" in text  # a CPU trace of per-step .item() logging: no launches
    _, nb = runs["runs"][("memory_leak", "trace")]
    text = "".join(o.get("data", {}).get("text/html", "") for o in _outputs(nb))
    assert "leaky_accumulating_callback.json.gz" in text and "leaky_clean.json.gz" in text


def test_live_modes_report_what_they_measured(runs):
    log = runs["log"]
    live = log[log["change"] == "test-live"]
    leak = live[(live["investigation"] == "memory_leak") & (live["metric"] == "leak")]
    assert leak["value"].tolist() == [1.0]  # keep_graph_losses keeps one tensor per step
    htod = runs["runs"][("htod", "live")][1]
    text = "".join(o.get("data", {}).get("text/html", "") for o in _outputs(htod))
    assert "no GPU" in text or "GB/s" in text
    sync = live[(live["investigation"] == "sync_points") & (live["metric"] == "detected_syncs_per_step")]
    assert len(sync) == 1 and sync["value"].iloc[0] > 0  # the planted NaN checks sync


def test_unknown_parameter_is_rejected_before_running(tmp_path):
    with pytest.raises(ParameterError, match="bogus"):
        run_notebook("cpu_bound", {"bogus": 1}, out_dir=tmp_path, progress=False)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", NAMES)
def test_notebook_declares_its_parameters(name):
    declared = notebook_parameters(NOTEBOOKS / f"{name}.ipynb")
    for key in ("mode", "trace_path", "device", "interactive", "perf_log_path", "change", "run_label"):
        assert key in declared, f"{name} lacks parameter {key}"
    # The A/B and leak harnesses are live by nature, so the main job runs them live by default.
    live_by_default = name in ("compile_ab", "amp_regression", "memory_leak")
    assert declared["mode"]["default"] == ('"live"' if live_by_default else '"trace"')
    assert declared["interactive"]["default"] == "False"
    assert declared["perf_log_path"]["default"] == '"reports/perf_log.csv"'
    assert declared["change"]["default"] == '"baseline"'


# -- committed notebooks are the generator's output ------------------------------------------

def _generator():
    spec = importlib.util.spec_from_file_location("make_notebooks", ROOT / "scripts" / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebooks_match_generator_and_have_no_outputs():
    gen = _generator()
    assert tuple(gen.NOTEBOOKS) == (*NAMES, "validation")  # validation: tests/test_validation.py
    assert gen.stale() == []
    for name in gen.NOTEBOOKS:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        nbformat.validate(nb)
        assert nb.metadata["kernelspec"]["name"] == "python3"
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code)
        tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1


def test_generator_check_flags_a_stale_notebook(tmp_path):
    gen = _generator()
    assert gen.main(["--out", str(tmp_path)]) == 0
    assert gen.main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "htod.ipynb").write_text("{}", encoding="utf-8")
    assert gen.main(["--check", "--out", str(tmp_path)]) == 1


# -- notebook support helpers ----------------------------------------------------------------

def test_find_trace_resolves_repo_relative_and_bare_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    by_repo = headline.find_trace("data/traces/cpu/leaky_clean.json.gz")
    by_name = headline.find_trace("leaky_clean.json.gz")
    assert by_repo == by_name == (ROOT / "data/traces/cpu/leaky_clean.json.gz").resolve()
    with pytest.raises(ParameterError, match="shipped traces: .*leaky_clean.json.gz"):
        headline.find_trace("nope.json.gz")
    with pytest.raises(ParameterError):
        headline.find_trace("")


def test_check_mode_rejects_unknown_modes():
    assert headline.check_mode("live") == "live"
    with pytest.raises(ParameterError, match="'trace'.*'live'"):
        headline.check_mode("replay")
    with pytest.raises(ParameterError):
        headline.load_or_record("both", "leaky_clean.json.gz")


def test_summary_frame_reads_back_summarize():
    from perfkit.analysis.summary import summarize

    trace = headline.load_or_record("trace", "leaky_clean.json.gz")
    frame = headline.summary_frame(summarize(trace)).set_index("metric")["value"]
    assert frame["steps"] == "3" and frame["kernels"] == "0" and frame["HtoD_copies"] == "0"
    assert headline.trace_device(trace) == "cpu"


def test_cpu_bound_rows_without_gpu_are_host_only():
    from perfkit.analysis.cpu_bound import cpu_bound

    result = cpu_bound(headline.load_or_record("trace", "ppo_item_logging.json.gz"))
    rows = headline.cpu_bound_rows(result, change="c", run_id="r", device="cpu")
    assert [r["metric"] for r in rows] == ["median_step_ms", "host_busy_ms_per_step"]
    assert rows[0]["value"] == pytest.approx(result.steps["wall_us"].median() / 1e3)
    assert all(r["higher_is_better"] is False and r["change"] == "c" for r in rows)
    assert "CPU-only trace" in headline.cpu_bound_text(result)


class _FakeAB:
    """The fields of an ABResult that ab_rows reads."""

    def __init__(self, verdict, ratio, low, high):
        self.verdict, self.ratio, self.ci_low, self.ci_high = verdict, ratio, low, high
        self.median_a, self.median_b = 0.010, 0.010 * ratio
        self.speedup = 1 / ratio if ratio == ratio else float("nan")
        self.environment = {"device": "cpu"}


@pytest.mark.parametrize("verdict,logged", [("faster", "improved"), ("slower", "regressed"),
                                            ("no change", "within noise"), ("insufficient data", "not enough data")])
def test_ab_rows_map_verdicts_and_keep_the_ci(verdict, logged):
    rows = headline.ab_rows("compile_ab", _FakeAB(verdict, 0.8, 0.7, 0.9), "step_ms")
    main = rows[0]
    assert main["verdict"] == logged and main["value"] == pytest.approx(8.0) and main["baseline"] == pytest.approx(10.0)
    assert (main["ci_low"], main["ci_high"]) == (0.7, 0.9)
    assert rows[1]["metric"] == "speedup" and rows[1]["value"] == pytest.approx(1.25) and rows[1]["higher_is_better"]


def test_ab_rows_without_ratio_drop_the_ci_and_speedup():
    rows = headline.ab_rows("amp_regression", _FakeAB("insufficient data", float("nan"), float("nan"), float("nan")))
    assert len(rows) == 0 or all(r["metric"] != "speedup" and "ci_low" not in r for r in rows)


def test_log_headline_creates_the_folder_and_appends(tmp_path):
    path = tmp_path / "deep" / "perf_log.csv"
    first = headline.log_headline(path, [headline.row("htod", "htod_ms_per_step", 2.0, "ms", change="a")])
    second = headline.log_headline(path, [headline.row("htod", "htod_ms_per_step", 1.0, "ms", change="b")])
    assert first["verdict"].tolist() == ["no baseline"]
    assert second["verdict"].tolist() == ["improved"] and second["baseline"].tolist() == [2.0]
    assert len(PerfLog(path).read()) == 2
    with pytest.raises(ParameterError, match="no rows"):
        headline.log_headline(path, [])


def test_finite_rows_drop_nan_values():
    rows = [headline.row("x", "a", 1.0, "ms"), headline.row("x", "b", float("nan"), "ms")]
    assert [r["metric"] for r in headline.finite_rows(rows)] == ["a"]


def test_mlp_problem_is_deterministic_and_validated():
    problem = headline.mlp_problem(batch=4, features=6, hidden=8, layers=1, outputs=2)
    (x,), y = problem.make_batch(3)
    (x2,), _ = problem.make_batch(3)
    assert tuple(x.shape) == (4, 6) and tuple(y.shape) == (4, 2) and bool((x == x2).all())
    out = problem.make_model()(*problem.example_inputs)
    assert tuple(out.shape) == (4, 2)
    with pytest.raises(ParameterError, match="hidden"):
        headline.mlp_problem(hidden=0)


def test_site_labels_and_summary_table():
    sites = pd.DataFrame([{"kind": "item", "op": "aten::item", "file": "/x/train.py", "line": 12},
                          {"kind": "stream_sync", "op": "cudaStreamSynchronize", "file": None, "line": -1}])
    assert headline.site_labels(sites) == ["item: aten::item @ train.py:12", "stream_sync: cudaStreamSynchronize"]
    table = headline.summary_table({"speedup": 1.23456, "verdict": "faster", "n": 1200, "x": None})
    assert table["value"].tolist() == ["1.235", "faster", "1,200", "n/a"]


def test_prose_escapes_names():
    assert headline.prose("kernel <script>") == "<p>kernel &lt;script&gt;</p>"
