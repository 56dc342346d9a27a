"""Execute every case-study notebook top to bottom on CPU, in both modes, with tiny parameters, and
check what it shows: the verdict card first, a closing table of measured numbers (no NaN, a
confidence interval, "no GPU" where only a GPU has the figure), figures, and perf-log rows.

Notebooks run in one kernel (``nbsession.KernelSession``), as in test_notebooks.py. The named set
``case_studies`` and its registration are checked without running anything.
"""
from __future__ import annotations

import html
import math
import re
from pathlib import Path

import pytest

from nbsession import KernelSession, html_text, outputs
from perfkit.report.card import MIME
from perfkit.report.casestudy import COLUMNS
from perfkit.report.perflog import PerfLog
from perfkit.report.publish.params import notebook_parameters
from perfkit.report.publish.selection import select_notebooks
from perfkit.registry import CASE_STUDIES, INVESTIGATIONS, NOTEBOOK_SETS, expand_sets

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TINY_PPO = {"envs": 4, "rollout": 4, "epochs": 1, "minibatch": 16, "channels": 8, "hidden": 32}
# One intra-op thread: stable CPU timings on a shared 2-core machine (live.use_threads).
FAST_AB = {"ab_min_time_s": 0.05, "ab_repeats": 6, "threads": 1}
TINY = {
    "case_mpc_planner": {"overrides": {"samples": 32, "horizon": 4, "iterations": 2, "hidden": 32}, "steps": 3,
                         "memory_samples": [64, 128, 256], "memory_horizons": [2, 4, 8], **FAST_AB},
    "case_world_model": {"overrides": {"capacity": 64, "batch": 4, "conv_channels": 8, "latent": 16}, "steps": 3,
                         **FAST_AB},
    "case_nan_checks": {"overrides": TINY_PPO, "steps": 3, "detect_steps": 1, "leak_steps": 60, "leak_warmup": 5,
                        **FAST_AB},
    "case_steps_per_second": {"overrides": TINY_PPO, "steps": 3, "detect_steps": 1, "warmup_steps": 3, **FAST_AB},
    "case_environment": {"ops": ["matmul", "add"]},
}
# Figures only a GPU measures: on a CPU run their "ours" must say "no GPU", never a number.
GPU_ONLY = ("CPU time / CUDA time", "GPU idle", "AMP off doubles the step", "GPU benchmark", "GPU utilization",
            "pageable host-to-device copies")


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    s = KernelSession(tmp_path_factory.mktemp("kernel"))
    yield s
    s.close()


def _card(nb) -> dict:
    """The verdict card: the first output that is not console text (the profiler may print first)."""
    shown = [o for o in outputs(nb) if o.get("output_type") != "stream"]
    assert MIME in shown[0].get("data", {}), f"the first output is not the verdict card: {shown[0]}"
    return shown[0]["data"][MIME]


def _closing_rows(nb) -> list[list[str]]:
    """Rows of the closing table (the last table whose header is the closing table's columns)."""
    def header(table: str) -> list[str]:
        thead = re.search(r"<thead>(.*?)</thead>", table, flags=re.S)
        return [html.unescape(h.replace("<wbr>", "")).strip() for h in re.findall(r"<th[^>]*>(.*?)</th>", thead.group(1) if thead else "",
                                                             flags=re.S)]

    tables = [t for t in re.findall(r"<table.*?</table>", html_text(nb), flags=re.S) if header(t) == list(COLUMNS)]
    assert tables, "closing table missing"
    body = re.search(r"<tbody>(.*?)</tbody>", tables[-1], flags=re.S).group(1)
    return [[html.unescape(c).strip() for c in re.findall(r"<td>(.*?)</td>", r, flags=re.S)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)]


CASES = [(name, mode) for mode in ("trace", "live") for name in CASE_STUDIES]


@pytest.mark.parametrize("name,mode", CASES)
def test_case_study_runs_and_closes_with_measured_numbers(session, tmp_path, name, mode):
    log = tmp_path / "perf_log.csv"
    nb = session.run(NOTEBOOKS / f"{name}.py", {"mode": mode, "device": "cpu", "perf_log_path": str(log),
                                                "change": f"test-{mode}", **TINY[name]})
    card = _card(nb)
    assert card["investigation"] == name and card["verdict"] and card["numbers"]
    assert sum("image/png" in o.get("data", {}) for o in outputs(nb)) >= 1
    rows = _closing_rows(nb)
    assert len(rows) >= 4 and all(len(r) == 3 and r[1] and r[2] for r in rows)
    assert not any(re.search(r"\bnan\b", r[1], flags=re.I) for r in rows), rows
    assert any("95% CI" in r[1] for r in rows), "no figure carries its confidence interval"
    for figure, ours, _ in rows:
        if figure.startswith(GPU_ONLY):
            assert ours.startswith("no GPU"), f"a CPU run shows a GPU-only figure as measured: {figure}: {ours}"
        elif not ours.startswith(("no GPU", "not measured:")):
            assert re.match(r"^-?[\d,.]+", ours), f"{figure}: {ours} is not a measured number"
    logged = PerfLog(log).read(name)
    assert len(logged) >= 3 and logged["value"].map(math.isfinite).all()
    assert set(logged["run_id"]) and logged["run_id"].nunique() == 1  # one run, even when logged in two cells


def test_live_mode_measures_the_pathology_and_the_fix(session, tmp_path):
    """The MPC planner in live mode: the A/B is an interleaved compare on this machine (a CPU
    figure, said so), and the closing table names the write-up's figures."""
    nb = session.run(NOTEBOOKS / "case_mpc_planner.py", {"mode": "live", "device": "cpu", "perf_log_path":
                                                         str(tmp_path / "log.csv"), **TINY["case_mpc_planner"]})
    text = html_text(nb)
    assert "interleaved A/B of the two variants" in text and "This is a CPU figure" in text
    figures = [r[0] for r in _closing_rows(nb)]
    assert figures[:3] == ["CPU time / CUDA time: 17x", "GPU idle: 94%", "aten::linear per action: 62,700"]


# -- registration and the named set -----------------------------------------------------------------

def test_case_studies_are_a_named_set_outside_the_default_run():
    assert not set(CASE_STUDIES) & set(INVESTIGATIONS)
    assert NOTEBOOK_SETS["case_studies"] == tuple(CASE_STUDIES)
    assert expand_sets(["cpu_bound", "case_studies", "case_nan_checks"]) == ["cpu_bound", *CASE_STUDIES]
    paths = select_notebooks(["case_studies"], NOTEBOOKS)
    assert [p.name for p in paths] == [f"{n}.py" for n in CASE_STUDIES]
    assert all(p.name.startswith("case_") is False for p in select_notebooks(None, NOTEBOOKS))


@pytest.mark.parametrize("name", list(CASE_STUDIES))
def test_case_study_sources_declare_the_runner_parameters(name):
    path = NOTEBOOKS / f"{name}.py"
    declared = notebook_parameters(path)
    for key in ("perf_log_path", "change", "run_label", "mode", "device"):
        assert key in declared, f"{name} lacks parameter {key}"
    assert declared["mode"]["default"] == '"trace"' and declared["perf_log_path"]["default"] == '""'
    text = path.read_text(encoding="utf-8")
    assert text.count('# %% tags=["parameters"]') == 1
    cell = text.split('# %% tags=["parameters"]\n')[1].split("# %%")[0]
    assigned = [line.split("=")[0].strip() for line in cell.splitlines() if line and not line.startswith("#")]
    assert assigned == list(declared), "papermill could not parse a parameter line (an '=' in its comment?)"
    # one meaning per name across the set: `perfkit run case_studies -p threads 1` reaches every notebook
    assert "threads" not in declared or declared["threads"]["default"] == "0"
    assert "closing_table(" in text and "verdict_card(" in text
