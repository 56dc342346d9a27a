import contextlib
import io
import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

import perfkit.cli
from perfkit.cli.run import parse_value
from perfkit.errors import ParameterError
from perfkit.report.perflog import PerfLog
from perfkit.report.publish import kernel, runner
from perfkit.report.publish.execute import source_index
from perfkit.report.publish.params import type_warnings
from perfkit.report.publish.records import NotebookRun
from perfkit.report.publish.runner import run_all, run_notebook
from perfkit.report.publish.selection import find_notebook
from perfkit.registry import INVESTIGATIONS

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
HOSTILE = "<script>alert(1)</script>"
DAY = "2024-05-06"


def _main(argv):
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.setattr(perfkit.cli, "COMMANDS", ("run", "log"))
        rc = perfkit.cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """One `perfkit run` over the three fixture notebooks (the only kernel starts in this file):
    the failing one first, so the others prove the batch goes on."""
    out = tmp_path_factory.mktemp("reports")
    rc, stdout, stderr = _main([
        "run", "tiny_fail", "tiny_hostile", "tiny_ok", "-p", "scale", "3", "-p", "change", HOSTILE,
        "--out", str(out), "--date", DAY, "--notebook-dir", str(FIXTURES), "--no-progress",
    ])
    runs = [d for d in (out / DAY).iterdir() if d.is_dir()]
    assert len(runs) == 1, runs
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "out": out, "day": runs[0]}


def _record(batch, name):
    return json.loads((batch["day"] / f"{name}.run.json").read_text())


def _no_external_resources(html: str) -> None:
    assert not re.search(r"<script[^>]*\bsrc\s*=", html), "a script loads from elsewhere"
    assert not re.search(r"<link[^>]*href\s*=\s*['\"]?https?:", html)
    assert not re.search(r"import\(\s*['\"]https?:", html)
    for cdn in ("cdnjs", "jsdelivr", "unpkg", "require.min.js", "MathJax.js"):
        assert cdn not in html


def test_cli_run_exit_code_and_summary(batch):
    assert batch["rc"] == 1, batch["stderr"]
    lines = batch["stdout"].splitlines()
    assert lines[0].startswith("FAILED  tiny_fail")
    assert "cell 2: ZeroDivisionError: division by zero" in lines[1]
    assert any(line.startswith("ok      tiny_ok") and line.endswith("tiny_ok.html") for line in lines)
    assert lines[-1] == f"2 ok, 1 failed; index: {batch['out']}/index.html"


def test_ok_notebook_report_is_dated_parameterized_and_self_contained(batch):
    day = batch["day"]
    assert {p.name for p in day.iterdir()} == {
        f"{n}{ext}" for n in ("tiny_ok", "tiny_fail", "tiny_hostile") for ext in (".ipynb", ".html", ".run.json")
    }  # no temporary files left behind
    assert not (batch["out"] / ".staging").exists() or not list((batch["out"] / ".staging").iterdir())
    for path in list(day.iterdir()) + [batch["out"] / "index.html"]:
        assert path.stat().st_mode & 0o777 == 0o644, path
    nb = nbformat.read(str(day / "tiny_ok.ipynb"), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "value=63 label=tiny" in text  # scale=3 reached the notebook
    assert f"executable={sys.executable}\n" in text  # this interpreter's ipykernel ran it
    html = (day / "tiny_ok.html").read_text()
    assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{100}', html)
    _no_external_resources(html)
    record = _record(batch, "tiny_ok")
    assert record["status"] == "ok" and record["parameters"]["scale"] == 3
    assert record["parameters"]["run_label"] == f"{DAY}/{day.name}/tiny_ok"
    assert record["parameters"]["perf_log_path"] == str(batch["out"] / "perf_log.csv")


def test_failing_notebook_reports_cell_and_still_writes_html(batch):
    record = _record(batch, "tiny_fail")
    assert record["status"] == "failed"
    assert record["error"] == "ZeroDivisionError: division by zero"
    assert record["failed_cell_index"] == 2  # index in the source notebook
    src = nbformat.read(str(FIXTURES / "tiny_fail.ipynb"), as_version=4)
    assert src.cells[2].source == record["failed_cell_source"] == "y = x / divisor"
    html = (batch["day"] / "tiny_fail.html").read_text()
    assert "ZeroDivisionError" in html and "unreachable" not in html  # the error shows, code cells do not
    _no_external_resources(html)
    assert "change" not in record["parameters"]  # only passed to notebooks that declare it


def test_notebooks_append_to_the_perf_log_with_run_labels(batch):
    log = PerfLog(batch["out"] / "perf_log.csv").read()
    assert list(log["investigation"]) == ["tiny_hostile", "tiny_ok"]
    ok = log[log["investigation"] == "tiny_ok"].iloc[0]
    assert ok["value"] == 63.0 and ok["run_id"] == f"{DAY}/{batch['day'].name}/tiny_ok" and ok["change"] == HOSTILE


def test_hostile_names_render_as_text_in_notebook_and_index(batch):
    html = re.sub(r"<wbr/?>", "", (batch["day"] / "tiny_hostile.html").read_text())  # html_table's break points
    assert HOSTILE not in html and "alert(1)</script>" not in html
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in html  # the html_table cell
    index = (batch["out"] / "index.html").read_text()
    assert "<script" not in index and "&lt;script&gt;alert(1)&lt;/script&gt;" in index
    assert "/tmp/" not in html and str(Path.home()) + "/" not in html


def test_index_lists_the_batch(batch):
    index = (batch["out"] / "index.html").read_text()
    for name in ("tiny_ok", "tiny_fail", "tiny_hostile"):
        assert f'<a href="{DAY}/{batch["day"].name}/{name}.html">{name}</a>' in index
    assert f"Latest run: {DAY}/{batch['day'].name}" in index
    assert ('<span class="status-failed">failed</span></td><td title=""></td>'
            '<td title="ZeroDivisionError: division by zero">ZeroDivisionError: division by zero</td>') in index


def test_unknown_parameter_is_rejected_with_valid_names(tmp_path):
    with pytest.raises(ParameterError) as info:
        run_notebook("tiny_ok", {"scael": 3}, out_dir=tmp_path, notebook_dir=FIXTURES)
    assert "unknown parameter(s) scael; valid: scale, label, perf_log_path, run_label, change" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_cli_unknown_parameter_exits_2_before_running_anything(tmp_path):
    rc, out, err = _main(["run", "tiny_ok", "tiny_fail", "-p", "nope", "1", "--out", str(tmp_path),
                          "--notebook-dir", str(FIXTURES), "--no-progress"])
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "unknown parameter(s) nope; valid: scale, label, perf_log_path, run_label, change, divisor" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kwargs, match", [
    (dict(name_or_path="no_such_notebook"), "not found in .*available: timed_work, tiny_fail, tiny_hostile, tiny_ok"),
    (dict(name_or_path="tiny_ok", date="06/05/2024"), "use YYYY-MM-DD"),
    (dict(name_or_path="tiny_ok", date="2024-02-30"), "use YYYY-MM-DD"),
])
def test_bad_notebook_or_date_is_a_parameter_error(tmp_path, kwargs, match):
    with pytest.raises(ParameterError, match=match):
        run_notebook(out_dir=tmp_path, notebook_dir=FIXTURES, **kwargs)


def test_notebook_dir_comes_from_environment(monkeypatch):
    monkeypatch.setenv("PERFKIT_NOTEBOOK_DIR", str(FIXTURES))
    assert find_notebook("tiny_ok") == (FIXTURES / "tiny_ok.ipynb").resolve()
    assert find_notebook(FIXTURES / "tiny_fail.ipynb").name == "tiny_fail.ipynb"


def test_run_all_without_names_needs_investigation_notebooks(tmp_path):
    assert list(INVESTIGATIONS)[0] == "cpu_bound" and {"step_anatomy", "ranks", "validation"} <= set(INVESTIGATIONS)
    with pytest.raises(ParameterError, match="no investigation notebooks"):
        run_all(None, out_dir=tmp_path, notebook_dir=FIXTURES)


def test_interrupted_run_leaves_earlier_runs_and_no_temporary_files(tmp_path, monkeypatch):
    import papermill

    earlier = tmp_path / DAY / "000001"
    earlier.mkdir(parents=True)
    (earlier / "tiny_ok.html").write_text("OLD REPORT")

    def interrupted(input_path, output_path, **kwargs):
        Path(output_path).write_text('{"cells": [')  # half-written, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_notebook("tiny_ok", out_dir=tmp_path, date=DAY, notebook_dir=FIXTURES, progress=False)
    assert (earlier / "tiny_ok.html").read_text() == "OLD REPORT"
    new = [d for d in (tmp_path / DAY).iterdir() if d != earlier]
    assert len(new) == 1 and list(new[0].iterdir()) == []  # nothing half-written in the report folder
    assert not (tmp_path / ".staging").exists()  # no staging files, and no empty folder left behind


def test_same_day_runs_never_overwrite_each_other(tmp_path):
    first = runner.new_run_folder(tmp_path, DAY)
    second = runner.new_run_folder(tmp_path, DAY, when=__import__("datetime").datetime.strptime(first.name, "%H%M%S"))
    assert first != second and second.name == f"{first.name}-2"


def test_kernel_that_never_starts_is_a_failed_run_not_a_crash(tmp_path, monkeypatch):
    import papermill

    def no_kernel(input_path, output_path, **kwargs):
        raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(papermill, "execute_notebook", no_kernel)
    run = run_notebook("tiny_ok", out_dir=tmp_path, date=DAY, notebook_dir=FIXTURES, progress=False)
    assert run.status == "failed" and run.failed_cell_index is None
    assert run.error == "RuntimeError: Kernel died before replying to kernel_info"
    record = next((tmp_path / DAY).glob("*/tiny_ok.run.json"))
    assert run.html_path is None and json.loads(record.read_text())["status"] == "failed"


def test_kernel_manager_runs_this_interpreter_whatever_the_kernelspec(tmp_path):
    from jupyter_client.kernelspec import KernelSpec

    km = kernel.kernel_manager_class()(kernel_name="python3")
    km._kernel_spec = KernelSpec(argv=["/opt/other/bin/python3.8", "-m", "ipykernel_launcher", "-f",
                                       "{connection_file}"], display_name="other", language="python")
    km.connection_file = str(tmp_path / "kernel.json")
    km._launch_args = {}
    cmd = km.format_kernel_cmd()
    assert cmd[:3] == [sys.executable, "-m", "ipykernel_launcher"] and cmd[-1].endswith("kernel.json")


def test_foreign_python3_kernelspec_is_reported_as_a_warning(monkeypatch):
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    spec = KernelSpec(argv=["/opt/other/bin/python3.8", "-m", "ipykernel_launcher"], display_name="x")
    monkeypatch.setattr(KernelSpecManager, "get_kernel_spec", lambda self, name: spec)
    assert kernel.kernel_warnings(None) == [
        f"the python3 kernelspec starts /opt/other/bin/python3.8; ran the notebook with {sys.executable} instead"]
    assert kernel.kernel_warnings("julia-1.10") == []
    spec.argv = ["python", "-m", "ipykernel_launcher"]  # jupyter_client maps "python" to sys.executable
    assert kernel.kernel_warnings("python3") == []


def test_type_mismatch_becomes_a_warning_on_the_run():
    declared = {"steps": {"inferred_type_name": "int"}, "lr": {"inferred_type_name": "float"}}
    warnings = type_warnings(declared, {"steps": "10x", "lr": 1})
    assert len(warnings) == 1 and "steps" in warnings[0] and "'10x'" in warnings[0]


@pytest.mark.parametrize("text, value", [
    ("3", 3), ("-2", -2), ("0.5", 0.5), ("1e3", 1000.0), ("True", True), ("false", False),
    ("None", None), ("null", None), ("cuda", "cuda"), ("1.2.3", "1.2.3"), (HOSTILE, HOSTILE),
    ('{"envs": 8, "hidden": 16}', {"envs": 8, "hidden": 16}), ("[4096, 65536]", [4096, 65536]),
])
def test_parse_value_reads_literals(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_notebook_run_result_shape():
    run = NotebookRun(name="x", run_id=DAY, status="failed", input_path="x.ipynb", notebook_path=None,
                      html_path=None, error=f"ValueError: {HOSTILE}", failed_cell_index=4,
                      failed_cell_source=f"print('{HOSTILE}')", warnings=(HOSTILE,))
    assert repr(run) == "NotebookRun(x, failed, cell 4, 0.0 s)" and not run.ok
    assert run.to_frame().loc[0, "error"] == f"ValueError: {HOSTILE}"
    html = run._repr_html_()
    assert "<script" not in html and html.count("&lt;script&gt;") == 3


def test_bad_json_parameter_is_a_parameter_error():
    with pytest.raises(ParameterError, match="not valid JSON.*double quotes"):
        parse_value("{envs: 8}")


def test_failed_cell_index_is_mapped_back_past_papermill_cells():
    import nbformat

    nb = nbformat.v4.new_notebook()
    banner = nbformat.v4.new_markdown_cell("error banner", metadata={"tags": ["papermill-error-cell-tag"]})
    params = nbformat.v4.new_code_cell("a = 1", metadata={"tags": ["parameters"]})
    injected = nbformat.v4.new_code_cell("a = 2", metadata={"tags": ["injected-parameters"]})
    cells = [nbformat.v4.new_code_cell(f"x{i}", metadata={"tags": []}) for i in range(3)]
    nb.cells = [banner, params, injected, *cells]
    # papermill counted the executed cells (params, injected, x0, x1, ...): x1 is its index 3.
    assert source_index(nb, 3) == 2
    assert source_index(nb, 0) == 0  # the parameters cell itself: before the injected one
    assert source_index(None, 5) == 5


def test_local_paths_are_replaced_by_placeholders_a_browser_shows():
    import nbformat

    from perfkit.report.publish.html import local_prefixes, scrub_paths

    prefixes = dict(local_prefixes())
    source = str(Path(runner.__file__).resolve().parents[3])
    out = nbformat.v4.new_output("display_data", data={
        "text/html": f"<td>{sys.prefix}/lib/x.py:3</td><td>{source}/perfkit/workloads/leaky.py:129</td>",
        "text/plain": f"{Path.home()}/data", "image/png": "AAAA/tmpBBBB"})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[out])])
    data = scrub_paths(nb).cells[0].outputs[0]["data"]
    assert sys.prefix not in data["text/html"] and source not in data["text/html"]
    assert "<" not in "".join(prefixes.values())  # "<python>" would render as an unknown tag: invisible
    assert data["image/png"] == "AAAA/tmpBBBB"


@pytest.mark.parametrize("user_level", [None, "2"])
def test_kernels_run_with_the_profiler_log_quiet_unless_the_user_set_a_level(tmp_path, monkeypatch, user_level):
    import os

    from perfkit.report.publish.kernel import quiet_kernel_output

    if user_level is None:
        monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("KINETO_LOG_LEVEL", user_level)
    with quiet_kernel_output(tmp_path / "kernel.log"):
        assert os.environ["KINETO_LOG_LEVEL"] == (user_level or "6")
    assert os.environ.get("KINETO_LOG_LEVEL") == user_level


def test_html_export_failure_keeps_the_notebook_and_fails_the_run(tmp_path, monkeypatch):
    """On the GPU machine nbconvert came without its templates (pip --target): the executed notebook
    is kept, the run is failed with what to do, and the next notebook still runs."""
    import nbconvert

    def missing(self, *args, **kwargs):
        raise ValueError("No template sub-directory with name 'lab' found in the following paths:\n\t/x/share/jupyter")

    monkeypatch.setattr(nbconvert.HTMLExporter, "__init__", missing)
    runs = run_all(["tiny_fail", "tiny_ok"], {"scale": 1}, out_dir=tmp_path, date=DAY, notebook_dir=FIXTURES,
                   progress=False)
    assert [r.status for r in runs] == ["failed", "failed"]
    assert runs[0].error.startswith("ZeroDivisionError: division by zero; HTML report not written: ")
    assert runs[1].error.startswith("HTML report not written: nbconvert has no 'lab' HTML template (searched: "
                                    "/x/share/jupyter)") and runs[1].html_path is None
    day = Path(runs[1].notebook_path).parent
    assert sorted(p.name for p in day.iterdir()) == [f"tiny_{n}{ext}" for n in ("fail", "ok") for ext in (".ipynb", ".run.json")]
    assert "value=21 label=tiny" in (day / "tiny_ok.ipynb").read_text()
    assert json.loads((day / "tiny_ok.run.json").read_text())["status"] == "failed"
