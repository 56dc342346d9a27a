"""Run investigation notebooks in batch with papermill into dated, self-contained HTML reports.

``run_notebook("cpu_bound", {"steps": 20})`` finds ``notebooks/cpu_bound.ipynb``, rejects
parameters its ``parameters`` cell does not declare (papermill only warns), executes it with
this interpreter's ipykernel and writes ``reports/YYYY-MM-DD/cpu_bound.ipynb``, ``.html`` and a
``.run.json`` record (status, failing cell, duration). Outputs are written to temporary files
and moved into place with ``os.replace``: an interrupted run leaves the previous report intact.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import date as _date
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..atomic import fsync_path
from ..errors import MissingDependencyError, ParameterError
from ..results import html_section, html_table, html_text, html_warnings
from .sources import ROOT

INVESTIGATIONS = ("cpu_bound", "htod", "sync_points", "compile_ab", "amp_regression", "memory_leak", "validation")
# Passed by the runner to notebooks that declare them, and only to those.
RUNNER_PARAMETERS = ("perf_log_path", "run_label", "change")
RUN_RECORD_VERSION = 1
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_REPO_NOTEBOOKS = ROOT / "notebooks"
_SIMPLE_TYPES = ("int", "float", "bool", "str")
_PYTHON_ALIASES = {"python", f"python{sys.version_info[0]}", "python%i.%i" % sys.version_info[:2]}


@dataclass(frozen=True)
class NotebookRun:
    """One executed notebook. ``status`` is "ok" or "failed"; for a failure ``error`` is
    "Name: message" and ``failed_cell_index`` the 0-based index of the failing cell in the
    source notebook (``None`` when no cell failed, e.g. the kernel did not start)."""

    name: str
    date: str
    status: str
    input_path: str
    notebook_path: str | None
    html_path: str | None
    parameters: dict = field(default_factory=dict)
    duration_s: float = 0.0
    error: str = ""
    failed_cell_index: int | None = None
    failed_cell_source: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_frame(self) -> pd.DataFrame:
        row = asdict(self)
        row["parameters"] = json.dumps(self.parameters, default=repr)
        row["warnings"] = "; ".join(self.warnings)
        return pd.DataFrame([row])

    def __repr__(self) -> str:
        where = f", cell {self.failed_cell_index}" if self.failed_cell_index is not None else ""
        return f"NotebookRun({self.name}, {self.status}{where}, {self.duration_s:.1f} s)"

    def _repr_html_(self) -> str:
        cols = ["name", "date", "status", "duration_s", "error", "failed_cell_index", "html_path"]
        source = f"<pre>{html_text(self.failed_cell_source)}</pre>" if self.failed_cell_source else ""
        return html_section(f"notebook {self.name}", html_table(self.to_frame()[cols]), source,
                            html_warnings(self.warnings))


def notebook_dir(path: str | os.PathLike | None = None) -> Path:
    """Where notebooks are looked up: ``path``, else ``$PERFKIT_NOTEBOOK_DIR``, else the
    repository's ``notebooks/``."""
    return Path(path or os.environ.get("PERFKIT_NOTEBOOK_DIR") or _REPO_NOTEBOOKS).resolve()


def find_notebook(name_or_path: str | os.PathLike, directory: str | os.PathLike | None = None) -> Path:
    """The notebook file for a name ("cpu_bound") or a path; ParameterError if none."""
    text = str(name_or_path)
    candidate = Path(text)
    if candidate.suffix != ".ipynb":
        candidate = notebook_dir(directory) / f"{text}.ipynb"
    if candidate.is_file():
        return candidate.resolve()
    found = sorted(p.stem for p in notebook_dir(directory).glob("*.ipynb"))
    raise ParameterError(f"notebook {text!r} not found ({candidate}); available in "
                         f"{notebook_dir(directory)}: {', '.join(found) or 'none'} "
                         "(set PERFKIT_NOTEBOOK_DIR to look elsewhere)")


def notebook_parameters(path: str | os.PathLike) -> dict:
    """The notebook's declared parameters: name -> {inferred_type_name, default, help}."""
    papermill = _papermill()
    return papermill.inspect_notebook(str(path))


def check_parameters(name: str, declared: Iterable[str], given: Iterable[str]) -> None:
    """Raise ParameterError naming unknown parameters and the valid ones."""
    declared = list(declared)
    unknown = sorted(set(given) - set(declared))
    if unknown:
        valid = ", ".join(declared) or "none (no cell tagged 'parameters')"
        raise ParameterError(f"{name}: unknown parameter(s) {', '.join(unknown)}; valid: {valid}")


def run_notebook(name_or_path: str | os.PathLike, parameters: dict | None = None,
                 out_dir: str | os.PathLike = "reports", date: str | _date | None = None,
                 kernel_name: str | None = None, progress: bool = True, *,
                 notebook_dir: str | os.PathLike | None = None) -> NotebookRun:
    """Execute one notebook into ``out_dir/DATE/<name>.ipynb`` + ``.html`` + ``.run.json``.

    ``perf_log_path`` (default ``out_dir/perf_log.csv``) and ``run_label`` ("DATE/name") are
    passed when the notebook declares them. A failing cell gives ``status="failed"`` with the
    cell and error, and the notebook and HTML are still written. Raises ParameterError for
    an unknown notebook, an undeclared parameter or a malformed date (nothing runs then).
    """
    path = find_notebook(name_or_path, notebook_dir)
    declared = notebook_parameters(path)
    params = dict(parameters or {})
    check_parameters(path.stem, declared, params)
    day = _iso_day(date)
    target = Path(out_dir).resolve() / day
    params = _with_runner_parameters(params, declared, target.parent, day, path.stem)
    warnings = _type_warnings(declared, params) + _kernel_warnings(kernel_name)
    return _execute(path, target, params, day, kernel_name, progress, tuple(warnings))


def run_all(names: Iterable[str] | None = None, parameters: dict | None = None,
            out_dir: str | os.PathLike = "reports", date: str | _date | None = None,
            kernel_name: str | None = None, progress: bool = True, *,
            notebook_dir: str | os.PathLike | None = None) -> list[NotebookRun]:
    """Run several notebooks (default: the ``INVESTIGATIONS`` present), keep going past
    failures, then rebuild ``out_dir/index.html``.

    Each notebook gets the subset of ``parameters`` it declares; a parameter no selected
    notebook declares raises ParameterError before anything runs. tqdm shows progress.
    """
    from tqdm.auto import tqdm

    from .index import build_index

    paths = _select(names, notebook_dir)
    declared = {p: notebook_parameters(p) for p in paths}
    params = dict(parameters or {})
    union = list(dict.fromkeys(n for d in declared.values() for n in d))
    check_parameters(", ".join(p.stem for p in paths), union, params)
    day = _iso_day(date)
    runs = []
    for path in tqdm(paths, desc="notebooks", unit="nb", disable=not progress):
        own = {k: v for k, v in params.items() if k in declared[path]}
        runs.append(run_notebook(path, own, out_dir, day, kernel_name, progress=False))
    build_index(out_dir, perf_log=params.get("perf_log_path") or Path(out_dir) / "perf_log.csv")
    return runs


def load_run_record(path: str | os.PathLike) -> dict:
    """Read a ``<name>.run.json`` written by ``run_notebook``; {} when absent or unknown."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if record.get("format_version") == RUN_RECORD_VERSION else {}


def kernel_manager_class():
    """An nbclient kernel manager that starts ipykernel with *this* interpreter, whatever
    the ``python3`` kernelspec found first on the Jupyter path says (a user-level spec can
    point at another Python, where perfkit or the right torch is missing)."""
    from jupyter_client.manager import AsyncKernelManager

    class ThisInterpreterKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments=None):
            cmd = super().format_kernel_cmd(extra_arguments)
            return [sys.executable, "-m", "ipykernel_launcher", "-f",
                    os.path.realpath(self.connection_file)] + list(extra_arguments or [])

    return ThisInterpreterKernelManager


# -- internals -------------------------------------------------------------------------------

def _papermill():
    try:
        import papermill
    except ImportError:
        raise MissingDependencyError("papermill", "running notebooks") from None
    return papermill


def _select(names: Iterable[str] | None, directory) -> list[Path]:
    if names is None:
        base = notebook_dir(directory)
        names = [n for n in INVESTIGATIONS if (base / f"{n}.ipynb").is_file()]
        if not names:
            raise ParameterError(f"no investigation notebooks ({', '.join(INVESTIGATIONS)}) in {base}; "
                                 "name notebooks explicitly or set PERFKIT_NOTEBOOK_DIR")
    return list(dict.fromkeys(find_notebook(n, directory) for n in names))


def _iso_day(value: str | _date | None) -> str:
    text = value if isinstance(value, str) else (value or _date.today()).strftime("%Y-%m-%d")
    try:
        if _DATE.match(text) and _date.fromisoformat(text):
            return text
    except ValueError:
        pass
    raise ParameterError(f"date={value!r}: use YYYY-MM-DD (reports go to <out>/YYYY-MM-DD/)")


def _with_runner_parameters(params: dict, declared: dict, out_dir: Path, day: str, name: str) -> dict:
    auto = {"perf_log_path": str(out_dir / "perf_log.csv"), "run_label": f"{day}/{name}"}
    extra = {k: v for k, v in auto.items() if k in declared and k not in params}
    if params.get("perf_log_path"):  # the notebook runs in its own folder: make it absolute
        extra["perf_log_path"] = str(Path(params["perf_log_path"]).resolve())
    return {**params, **extra}


def _type_warnings(declared: dict, params: dict) -> list[str]:
    out = []
    for key, value in params.items():
        expected, got = declared.get(key, {}).get("inferred_type_name"), type(value).__name__
        if expected in _SIMPLE_TYPES and value is not None and got != expected and (expected, got) != ("float", "int"):
            out.append(f"parameter {key}: the notebook's default is {expected}, got {got} {value!r}; "
                       "check the value")
    return out


def _kernel_warnings(kernel_name: str | None) -> list[str]:
    if kernel_name not in (None, "python3"):
        return []
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        argv = KernelSpecManager().get_kernel_spec("python3").argv
    except NoSuchKernel:
        return []
    exe = argv[0] if argv else ""
    if exe in _PYTHON_ALIASES or os.path.realpath(exe) == os.path.realpath(sys.executable):
        return []
    return [f"the python3 kernelspec starts {exe}; ran the notebook with {sys.executable} instead"]


def _execute(path: Path, target: Path, params: dict, day: str, kernel_name, progress, warnings) -> NotebookRun:
    target.mkdir(parents=True, exist_ok=True)
    final = {ext: target / f"{path.stem}{ext}" for ext in (".ipynb", ".html", ".run.json")}
    # Same folder (os.replace must not cross filesystems); the suffix stays, papermill checks it.
    tmp = {ext: target / f".{path.stem}.{os.getpid()}.tmp{ext}" for ext in final}
    try:
        start = time.perf_counter()
        failure = _papermill_execute(path, tmp[".ipynb"], params, kernel_name, progress)
        nb = _read_notebook(tmp[".ipynb"])
        run = _make_run(path, day, final, params, time.perf_counter() - start, failure, warnings, nb)
        if nb is not None:
            _write_text(tmp[".html"], notebook_html(nb))
            fsync_path(tmp[".ipynb"])
        _write_text(tmp[".run.json"], json.dumps(_record(run), indent=1, default=repr))
        for ext in final:
            if tmp[ext].exists():
                os.replace(tmp[ext], final[ext])
        return run
    finally:
        for p in tmp.values():
            p.unlink(missing_ok=True)


def _papermill_execute(path: Path, output: Path, params: dict, kernel_name, progress) -> dict | None:
    """Run papermill; None on success, else {error, cell_index, source}."""
    papermill = _papermill()
    engine = {} if kernel_name not in (None, "python3") else {"kernel_manager_class": kernel_manager_class()}
    try:
        with _inline_figures():
            papermill.execute_notebook(str(path), str(output), parameters=params,
                                       kernel_name=kernel_name or "python3", progress_bar=progress,
                                       cwd=str(path.parent), **engine)
    except papermill.PapermillExecutionError as exc:
        return {"error": f"{exc.ename}: {exc.evalue}", "cell_index": exc.cell_index, "source": exc.source}
    except Exception as exc:  # kernel death, timeouts, missing kernel: reported, the batch goes on
        return {"error": f"{type(exc).__name__}: {exc}", "cell_index": None, "source": ""}
    return None


@contextlib.contextmanager
def _inline_figures():
    """The kernel inherits MPLBACKEND; a non-inline value (e.g. Agg in CI) would drop every figure
    from the report, so the kernel is started with the inline backend."""
    saved = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = saved


def _read_notebook(path: Path):
    import nbformat

    try:
        return nbformat.read(str(path), as_version=4)
    except (OSError, ValueError):
        return None


def _make_run(path, day, final, params, duration, failure, warnings, nb) -> NotebookRun:
    failure = failure or {}
    cell = failure.get("cell_index")
    written = nb is not None
    return NotebookRun(
        name=path.stem, date=day, status="failed" if failure else "ok", input_path=str(path),
        notebook_path=str(final[".ipynb"]) if written else None,
        html_path=str(final[".html"]) if written else None,
        parameters=params, duration_s=round(duration, 3), error=failure.get("error", ""),
        failed_cell_index=None if cell is None else _source_index(nb, cell),
        failed_cell_source=failure.get("source", ""), warnings=warnings,
    )


def _source_index(nb, executed_index: int) -> int:
    """papermill's cell index counts the cell it injects after ``parameters``; map it back
    to the index in the source notebook (the one a user edits)."""
    if nb is None:
        return executed_index
    cells = [c for c in nb.cells if "papermill-error-cell-tag" not in c.get("metadata", {}).get("tags", [])]
    injected = [i for i, c in enumerate(cells) if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    return executed_index - 1 if injected and injected[0] < executed_index else executed_index


def notebook_html(nb) -> str:
    """Render an executed notebook as self-contained HTML: nbconvert's ``lab`` template with
    the blocks that load require.js, MathJax, mermaid and widget managers from a CDN
    removed (math then shows as TeX source); images stay inline as data URIs."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    template = ("{%- extends 'index.html.j2' -%}\n"
                + "".join(f"{{%- block {b} -%}}{{%- endblock {b} -%}}\n" for b in _CDN_BLOCKS))
    exporter = HTMLExporter(template_name="lab", embed_images=True,
                            extra_loaders=[DictLoader({"perfkit_offline.html.j2": template})],
                            template_file="perfkit_offline.html.j2")
    body, _ = exporter.from_notebook_node(nb)
    return body


_CDN_BLOCKS = ("html_head_js_requirejs", "jupyter_widgets", "html_head_js_mathjax", "html_head_js_mermaidjs")


def _record(run: NotebookRun) -> dict:
    return {"format_version": RUN_RECORD_VERSION, **asdict(run), "warnings": list(run.warnings)}


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


