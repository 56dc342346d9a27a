"""One notebook executed by papermill in a staging folder, its reports (.ipynb, .html, .run.json)
moved into the run folder atomically, and a failure turned into a ``NotebookRun`` that names the
failing cell of the source notebook."""
from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, replace
from pathlib import Path

from ...atomic import output_error, write_text_atomic
from ...errors import MissingDependencyError, PerfkitError, missing_dependency
from ..card import read_card
from ...registry import read_notebook, write_ipynb_text
from .html import notebook_html
from .kernel import kernel_manager_class, quiet_kernel_output
from .records import NotebookRun, record_json
from .staging import clear


def require_papermill():
    """The papermill module; MissingDependencyError when it is not installed."""
    try:
        import papermill  # heavy and optional (the workbook extra): imported when a notebook runs
    except ImportError:
        raise MissingDependencyError("papermill", "running notebooks") from None
    return papermill


def execute_notebook(path: Path, folder: Path, params: dict, kernel_name, warnings: tuple,
                     stage: Path) -> NotebookRun:
    """Run the notebook ``path`` with ``params`` into the run folder ``folder``
    (``<out>/DATE/HHMMSS``), papermill writing into the run's staging folder ``stage`` (emptied after);
    a failing cell or a dead kernel is a failed run, not an exception. Raises OutputError when a report
    cannot be written."""
    final = {ext: folder / f"{path.stem}{ext}" for ext in (".ipynb", ".html", ".run.json")}
    try:
        source = stage / f"{path.stem}.input.ipynb"
        source.write_text(write_ipynb_text(read_notebook(path)), encoding="utf-8")
        start = time.perf_counter()
        output = stage / f"{path.stem}.ipynb"
        failure, kernel_text = _papermill_execute(source, output, params, kernel_name, stage)
        nb = _read_output(output)
        run = _make_run(path, folder, final, params, time.perf_counter() - start, failure, warnings, nb, kernel_text)
        if nb is not None:
            write_text_atomic(final[".ipynb"], write_ipynb_text(nb))
            run = _write_html(final[".html"], nb, run)
        write_text_atomic(final[".run.json"], record_json({**asdict(run), "warnings": list(run.warnings)}))
        return run
    except OSError as exc:  # no space left, a read-only mount: say which file
        raise output_error(exc.filename or folder, exc) from exc
    finally:
        clear(stage)


def _write_html(target: Path, nb, run: NotebookRun) -> NotebookRun:
    """Write the HTML report; when nbconvert cannot export it, the run is failed with the reason
    (the executed notebook is already written) and the batch goes on."""
    try:
        html = notebook_html(nb, run.name)
    except PerfkitError as exc:
        error = f"{run.error}; " if run.error else ""
        return replace(run, status="failed", html_path=None, error=f"{error}HTML report not written: {exc}")
    write_text_atomic(target, html)
    return run


def _papermill_execute(path: Path, output: Path, params: dict, kernel_name, stage: Path) -> tuple[dict | None, str]:
    """Run papermill; (None, kernel output) on success, else ({error, cell_index, source}, ...)."""
    papermill = require_papermill()
    foreign = kernel_name not in (None, "python3")
    engine = {} if foreign else {"kernel_manager_class": kernel_manager_class()}
    log = stage / "kernel.log"
    try:
        with quiet_kernel_output(log):
            papermill.execute_notebook(str(path), str(output), parameters=params, kernel_name=kernel_name or "python3",
                                       progress_bar=False, cwd=os.getcwd(), log_output=False, **engine)
    except papermill.PapermillExecutionError as exc:
        return {"error": cell_error(exc.ename, exc.evalue), "cell_index": exc.cell_index, "source": exc.source}, _tail(log)
    except Exception as exc:  # kernel death, timeouts, missing kernel: reported, the batch goes on
        return {"error": f"{type(exc).__name__}: {exc}", "cell_index": None, "source": ""}, _tail(log)
    return None, _tail(log)


def cell_error(ename: str, evalue: str) -> str:
    """The cell's exception as one line; a missing optional package names the extra that brings it."""
    match = re.fullmatch(r"No module named '([\w.]+)'", evalue or "")
    missing = missing_dependency(ModuleNotFoundError(evalue, name=match[1]), "this notebook") if match else None
    return f"MissingDependencyError: {missing}" if missing else f"{ename}: {evalue}"


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _read_output(path: Path):
    import nbformat  # optional (the workbook extra), installed with papermill

    try:
        return nbformat.read(str(path), as_version=4)
    except (OSError, ValueError):
        return None


def _make_run(path, folder, final, params, duration, failure, warnings, nb, kernel_text) -> NotebookRun:
    failure = failure or {}
    cell = failure.get("cell_index")
    written = nb is not None
    error = failure.get("error", "")
    if error and not written and kernel_text:
        error += f" (kernel output: {kernel_text.splitlines()[-1]})"
    return NotebookRun(
        name=path.stem, run_id=f"{folder.parent.name}/{folder.name}", status="failed" if failure else "ok",
        input_path=str(path), notebook_path=str(final[".ipynb"]) if written else None,
        html_path=str(final[".html"]) if written else None, parameters=params, duration_s=round(duration, 3),
        error=error, failed_cell_index=None if cell is None else source_index(nb, cell),
        failed_cell_source=failure.get("source", ""), warnings=warnings, card=read_card(nb) if written else {},
        out_dir=str(folder.parents[1]),
    )


def source_index(nb, executed_index: int) -> int:
    """papermill's cell index counts the cell it injects after ``parameters`` and the error
    banner it puts first; map it back to the index in the source notebook (the one a user edits)."""
    if nb is None:
        return executed_index
    cells = [c for c in nb.cells if "papermill-error-cell-tag" not in c.metadata.get("tags", [])]
    injected = [i for i, c in enumerate(cells[:executed_index]) if "injected-parameters" in c.metadata.get("tags", [])]
    return executed_index - len(injected)
