"""Where reports and the perf log go: one workbook root for `perfkit run`, papermill in any cwd and
JupyterLab; `perfkit init`; an installed (non-editable) perfkit running a notebook from an empty
folder with a relative trace path; a planted 2x slowdown flagged between two runs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbsession import KernelSession
from perfkit.cli import main
from perfkit import workbook
from perfkit.report.perflog import PerfLog
from perfkit.report.publish.runner import run_all
from perfkit.registry import shipped_notebooks

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "data" / "traces" / "cpu" / "leaky_clean.json.gz"
FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"


@pytest.fixture
def no_home(monkeypatch):
    monkeypatch.delenv("PERFKIT_HOME", raising=False)
    monkeypatch.delenv("PERFKIT_NOTEBOOK_DIR", raising=False)


def test_workbook_root_is_found_from_any_folder_inside_it(tmp_path, monkeypatch, no_home):
    assert workbook.workbook_root(ROOT / "perfkit" / "report") == ROOT  # the clone
    assert workbook.workbook_root(ROOT / "notebooks") == ROOT  # JupyterLab's kernel cwd
    assert workbook.workbook_root(tmp_path) == tmp_path  # no workbook: the folder itself
    monkeypatch.setenv("PERFKIT_HOME", str(tmp_path / "home"))
    assert workbook.workbook_root(ROOT) == tmp_path / "home"
    assert workbook.perf_log_path("") == tmp_path / "home" / "reports" / "perf_log.csv"
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("PERFKIT_HOME", str(tmp_path / "file"))
    with pytest.raises(Exception, match="PERFKIT_HOME=.*not a folder"):
        workbook.workbook_root()


def test_packaged_notebooks_and_traces_are_the_repositorys(no_home):
    assert sorted(p.name for p in workbook.PACKAGED_NOTEBOOKS.glob("*.py")) == \
        sorted(p.name for p in (ROOT / "notebooks").glob("*.py"))
    assert "cpu/leaky_clean.json.gz" in workbook.shipped_traces()


def test_init_copies_the_workbook_and_keeps_edits(tmp_path, capsys, no_home):
    folder = tmp_path / "proj"
    assert main(["init", str(folder)]) == 0
    assert sorted(p.name for p in (folder / "notebooks").iterdir()) == sorted(
        f"{n}.ipynb" for n in shipped_notebooks())
    assert {"cpu_bound.ipynb", "step_anatomy.ipynb", "ranks.ipynb", "case_mpc_planner.ipynb"} <= {p.name for p in (folder / "notebooks").iterdir()}
    assert (folder / "reports").is_dir() and "perfkit run" in (folder / "README.md").read_text()
    assert workbook.is_workbook(folder) and workbook.workbook_root(folder / "notebooks") == folder
    (folder / "notebooks" / "htod.ipynb").write_text("my edit")
    assert main(["init", str(folder)]) == 0 and (folder / "notebooks" / "htod.ipynb").read_text() == "my edit"
    assert (folder / "notebooks" / "cpu_bound.ipynb").stat().st_mode & 0o777 == 0o644


def test_perfkit_run_and_jupyterlab_write_to_one_perf_log(tmp_path, monkeypatch, no_home):
    """`perfkit run` from a subfolder of a workbook and the same notebook run with JupyterLab's
    working directory (notebooks/) and no perf_log_path append to the same reports/perf_log.csv."""
    folder = tmp_path / "wb"
    main(["init", str(folder)])
    (folder / "sub").mkdir()
    monkeypatch.chdir(folder / "sub")
    runs = run_all(["cpu_bound"], {"trace_path": str(TRACE)}, progress=False)
    assert runs[0].ok, runs[0].error
    assert Path(runs[0].html_path).is_relative_to(folder / "reports")
    session = KernelSession(folder / "notebooks")  # JupyterLab starts the kernel beside the notebook
    try:
        session.run(folder / "notebooks" / "cpu_bound.ipynb", {"trace_path": "cpu/ppo_item_logging.json.gz",
                                                                "change": "lab"})
    finally:
        session.close()
    log = PerfLog(folder / "reports" / "perf_log.csv").read()
    assert set(log["change"]) == {"", "lab"} and log["run_id"].nunique() == 2
    assert not (folder / "notebooks" / "reports").exists()  # no stray second log


def test_installed_wheel_runs_a_notebook_from_an_empty_folder(tmp_path):
    """A non-editable install (the wheel, into a fresh venv that borrows this venv's dependencies)
    runs `perfkit run cpu_bound -p trace_path ./t.json.gz` from a folder holding only the trace."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                    "-w", str(wheels)], check=True, capture_output=True)
    wheel = next(wheels.glob("perfkit-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True)
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "borrowed_deps.pth").write_text("\n".join(deps) + "\n")
    work = tmp_path / "empty"
    work.mkdir()
    (work / "t.json.gz").write_bytes(TRACE.read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("PERFKIT_HOME", "PERFKIT_NOTEBOOK_DIR", "PYTHONPATH")}
    env["JUPYTER_PATH"] = str(Path(sys.prefix) / "share" / "jupyter")  # nbconvert's templates, borrowed too
    code = "import sys, perfkit.cli; sys.exit(perfkit.cli.main(sys.argv[1:]))"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code, "run", "cpu_bound", "-p", "trace_path",
                           "./t.json.gz", "--no-progress"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import perfkit; print(perfkit.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True)
    assert where.stdout.startswith(str(site))  # the wheel, not this checkout
    html = next((work / "reports").glob("*/*/cpu_bound.html")).read_text()
    assert "t.json.gz" in html and str(tmp_path) not in html
    assert PerfLog(work / "reports" / "perf_log.csv").read()["subject"].tolist()[0] == "trace t.json.gz"


def test_planted_slowdown_is_flagged_and_an_unchanged_rerun_is_not(tmp_path, no_home):
    """Three `perfkit run`s of a step of known cost (tests/fixtures/notebooks/timed_work.py, logged
    like an investigation's headline metric; drawn, not timed, so a busy machine cannot change the
    outcome): the second (no change) flags nothing, the third, with the work doubled, is "regressed"."""
    out = tmp_path / "reports"
    for work, change in ((1.0, "first"), (1.0, "again"), (2.0, "2x work")):
        runs = run_all(["timed_work"], {"work": work, "change": change}, out_dir=out, progress=False,
                       notebook_dir=FIXTURES)
        assert runs[0].ok, runs[0].error
    log = PerfLog(out / "perf_log.csv").read().set_index("change")
    assert log.loc["first", "verdict"] == "no baseline"
    assert log.loc["again", "verdict"] == "within noise", log[["value", "ci_low", "ci_high", "verdict"]]
    assert log.loc["2x work", "verdict"] == "regressed", log[["value", "ci_low", "ci_high", "verdict"]]
    assert log.loc["2x work", "baseline_run"] == log.loc["again", "run_id"]  # the previous run, not the first
