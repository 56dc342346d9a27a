"""Run investigation notebooks with papermill into dated, shareable reports.

``run_all()`` runs every registered investigation (``perfkit.registry``) as one run:
``reports/<date>/<HHMMSS>/<name>.ipynb`` (executed, code kept), ``.html`` (the shareable report:
no code cells, no local paths) and ``.run.json`` (status, failing cell, duration, the verdict
card), then rebuilds ``reports/index.html``. Each run gets its own time folder, so runs on one
day never overwrite each other; its id ("DATE/HHMMSS") prefixes the perf-log rows it writes.

Before anything runs, the parameters are checked against each notebook's ``parameters`` cell
(papermill only warns), the output folder and the perf log are checked to be writable and
readable: a bad ``--out`` or a corrupt log fails in a second, not after the notebooks ran. The
kernel starts in the caller's working directory, so a relative ``trace_path`` means what it
means in the caller's shell. papermill writes into a staging folder (``<out>/.staging/<pid>``,
removed after the run, and on the next run when a killed run left it behind); the reports are
moved into place atomically.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import date as _date
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from ...atomic import output_error, write_text_atomic
from ...errors import MissingDependencyError, ParameterError, missing_dependency
from ...registry import NOTEBOOK_SUFFIXES, expand_sets, notebook_names, read_notebook, write_ipynb_text
from ...results import html_section, html_table, html_text, html_warnings
from ...workbook import notebook_dirs, reports_dir
from ..card import read_card
from ..perflog import PerfLog
from .html import notebook_html
from .index import build_index
from .kernel import kernel_manager_class, kernel_warnings, quiet_kernel_output
from .params import SIMPLE_TYPES as _SIMPLE_TYPES, refuse_impossible_values
from .records import record_json

# Passed by the runner to notebooks that declare them, and only to those.
RUNNER_PARAMETERS = ("perf_log_path", "run_label", "change")
STAGING = ".staging"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class NotebookRun:
    """One executed notebook. ``status`` is "ok" or "failed"; for a failure ``error`` is
    "Name: message" and ``failed_cell_index`` the 0-based index of the failing cell in the
    source notebook (``None`` when no cell failed, e.g. the kernel did not start). ``card``:
    the verdict card the notebook displayed (JSON; {} when none); ``out_dir``: the reports folder."""

    name: str
    run_id: str
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
    card: dict = field(default_factory=dict)
    out_dir: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_frame(self) -> pd.DataFrame:
        row = asdict(self)
        row["parameters"] = json.dumps(self.parameters, default=repr)
        row["warnings"] = "; ".join(self.warnings)
        row["card"] = json.dumps(self.card)
        return pd.DataFrame([row])

    def __repr__(self) -> str:
        where = f", cell {self.failed_cell_index}" if self.failed_cell_index is not None else ""
        return f"NotebookRun({self.name}, {self.status}{where}, {self.duration_s:.1f} s)"

    def _repr_html_(self) -> str:
        cols = ["name", "run_id", "status", "duration_s", "error", "failed_cell_index", "html_path"]
        source = f"<pre>{html_text(self.failed_cell_source)}</pre>" if self.failed_cell_source else ""
        return html_section(f"notebook {self.name}", html_table(self.to_frame()[cols]), source,
                            html_warnings(self.warnings))


def find_notebook(name_or_path: str | os.PathLike, directory: str | os.PathLike | None = None) -> Path:
    """The notebook file for a name ("cpu_bound") or a path (.py or .ipynb); for a name, the
    first of ``directory`` (else ``workbook.notebook_dirs()``) that has ``NAME.ipynb`` or
    ``NAME.py``. ParameterError listing what is available if none."""
    text = str(name_or_path)
    if Path(text).suffix in NOTEBOOK_SUFFIXES:
        if Path(text).is_file():
            return Path(text).resolve()
        raise ParameterError(f"notebook {text!r} not found: no such file")
    dirs = [Path(directory).resolve()] if directory else notebook_dirs()
    for folder in dirs:
        for suffix in NOTEBOOK_SUFFIXES:
            if (folder / f"{text}{suffix}").is_file():
                return (folder / f"{text}{suffix}").resolve()
    found = sorted({p.stem for d in dirs if d.is_dir() for s in NOTEBOOK_SUFFIXES for p in d.glob(f"*{s}")})
    raise ParameterError(f"notebook {text!r} not found in {', '.join(str(d) for d in dirs)}; available: "
                         f"{', '.join(found) or 'none'} (set PERFKIT_NOTEBOOK_DIR to look elsewhere)")


def notebook_parameters(path: str | os.PathLike) -> dict:
    """The notebook's declared parameters: name -> {inferred_type_name, default, help}."""
    _papermill()
    from papermill.inspection import _infer_parameters  # inspect_notebook only takes .ipynb paths

    return {p.name: p._asdict() for p in _infer_parameters(read_notebook(path))}


def check_parameters(name: str, declared: Iterable[str], given: Iterable[str]) -> None:
    """Raise ParameterError naming unknown parameters and the valid ones."""
    declared = list(declared)
    unknown = sorted(set(given) - set(declared))
    if unknown:
        valid = ", ".join(declared) or "none (no cell tagged 'parameters')"
        raise ParameterError(f"{name}: unknown parameter(s) {', '.join(unknown)}; valid: {valid}")


def prepare_out_dir(out_dir: str | os.PathLike | None) -> Path:
    """The reports folder, created, as an absolute path: ``out_dir`` or the workbook's
    ``reports/``. ParameterError when it is "", a file, or not writable (checked before any
    notebook runs)."""
    if out_dir is not None and str(out_dir).strip() == "":
        raise ParameterError("--out '': give a reports folder (default: the workbook's reports/)")
    out = Path(out_dir).expanduser().resolve() if out_dir is not None else reports_dir()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParameterError(f"--out {out}: cannot create the reports folder ({exc.strerror}); "
                             "give a folder you can write") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ParameterError(f"--out {out}: the reports folder is not writable; give a folder you can write")
    return out


def new_run_folder(out: Path, day: str, when: datetime | None = None) -> Path:
    """``out/DAY/HHMMSS`` (``-2``, ``-3``... when that second is taken), created."""
    stamp = (when or datetime.now()).strftime("%H%M%S")
    for n in range(1, 1000):
        folder = out / day / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue
        except OSError as exc:
            raise output_error(folder, exc) from exc
    raise ParameterError(f"{out / day}: no free run folder for {stamp}")


def run_notebook(name_or_path: str | os.PathLike, parameters: dict | None = None,
                 out_dir: str | os.PathLike | None = None, date: str | _date | None = None,
                 kernel_name: str | None = None, progress: bool = True, *,
                 notebook_dir: str | os.PathLike | None = None) -> NotebookRun:
    """Run one notebook as a run of its own: ``run_all([name], ...)[0]`` (see ``run_all``)."""
    return run_all([name_or_path], parameters, out_dir, date, kernel_name, progress,
                   notebook_dir=notebook_dir, index=False)[0]


def run_all(names: Iterable[str] | None = None, parameters: dict | None = None,
            out_dir: str | os.PathLike | None = None, date: str | _date | None = None,
            kernel_name: str | None = None, progress: bool = True, *,
            notebook_dir: str | os.PathLike | None = None, index: bool = True,
            on_done: Callable[[NotebookRun], None] | None = None) -> list[NotebookRun]:
    """Run several notebooks (default: every registered investigation found; a set name such as
    "case_studies" stands for its notebooks, ``registry.NOTEBOOK_SETS``) as one run into
    ``out_dir/DATE/HHMMSS/`` (``out_dir`` default: the workbook's ``reports/``), keep going past
    failures, then rebuild ``out_dir/index.html`` (unless ``index=False``).

    Each notebook gets the subset of ``parameters`` it declares, plus ``perf_log_path``
    (default ``out_dir/perf_log.csv``), ``run_label`` ("DATE/HHMMSS/name") and ``change`` when it
    declares them. Raises ParameterError (nothing runs) for an unknown notebook, a parameter no
    notebook declares, a malformed date or an unusable ``out_dir``; PerfLogError for a perf log
    that cannot be read or appended.
    """
    paths = _select(names, notebook_dir)
    declared = {p: notebook_parameters(p) for p in paths}
    params = dict(parameters or {})
    check_parameters(", ".join(p.stem for p in paths), list(dict.fromkeys(n for d in declared.values() for n in d)),
                     params)
    refuse_impossible_values(declared, params)
    day = _iso_day(date)
    out = prepare_out_dir(out_dir)
    log_path = Path(params.get("perf_log_path") or out / "perf_log.csv").expanduser().resolve()
    PerfLog(log_path).check()
    _remove_stale_staging(out)
    folder = new_run_folder(out, day)
    runs = []
    with _Progress(len(paths), progress) as bar:
        for path in paths:
            own = {k: v for k, v in params.items() if k in declared[path]}
            own = _with_runner_parameters(own, declared[path], log_path, folder, out, path.stem)
            bar.start(path.stem)
            warnings = _type_warnings(declared[path], own) + tuple(kernel_warnings(kernel_name))
            runs.append(_execute(path, folder, own, kernel_name, warnings))
            bar.done(runs[-1])
            if on_done is not None:
                on_done(runs[-1])
    if index:
        build_index(out, perf_log=log_path)
    return runs


# -- internals -------------------------------------------------------------------------------

def _papermill():
    try:
        import papermill
    except ImportError:
        raise MissingDependencyError("papermill", "running notebooks") from None
    return papermill


def _select(names: Iterable[str] | None, directory) -> list[Path]:
    if names is None:
        names = []
        for name in notebook_names():
            try:
                names.append(find_notebook(name, directory))
            except ParameterError:
                continue
        if not names:
            raise ParameterError(f"no investigation notebooks ({', '.join(notebook_names())}) found; "
                                 "name notebooks explicitly or set PERFKIT_NOTEBOOK_DIR")
    return list(dict.fromkeys(find_notebook(n, directory) for n in expand_sets(names)))


def _iso_day(value: str | _date | None) -> str:
    text = value if isinstance(value, str) else (value or _date.today()).strftime("%Y-%m-%d")
    try:
        if _DATE.match(text) and _date.fromisoformat(text):
            return text
    except ValueError:
        pass
    raise ParameterError(f"date={value!r}: use YYYY-MM-DD (reports go to <out>/YYYY-MM-DD/HHMMSS/)")


def _with_runner_parameters(params: dict, declared: dict, log_path: Path, folder: Path, out: Path,
                            name: str) -> dict:
    run_id = f"{folder.relative_to(out).as_posix()}/{name}"
    auto = {"perf_log_path": str(log_path), "run_label": run_id}
    return {**params, **{k: v for k, v in auto.items() if k in declared}}


def _type_warnings(declared: dict, params: dict) -> tuple[str, ...]:
    out = []
    for key, value in params.items():
        expected, got = declared.get(key, {}).get("inferred_type_name"), type(value).__name__
        if expected in _SIMPLE_TYPES and value is not None and got != expected and (expected, got) != ("float", "int"):
            out.append(f"parameter {key}: the notebook's default is {expected}, got {got} {value!r}; check the value")
    return tuple(out)


def _remove_stale_staging(out: Path) -> None:
    """Staging folders of runs whose process is gone (killed, e.g. SIGKILL) are removed."""
    staging = out / STAGING
    for folder in staging.glob("*") if staging.is_dir() else ():
        if folder.name.isdigit() and not _alive(int(folder.name)):
            shutil.rmtree(folder, ignore_errors=True)
    _remove_if_empty(staging)


def _remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` when nothing is left in it (another run's staging keeps it)."""
    try:
        folder.rmdir()
    except OSError:  # absent, or not empty
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _execute(path: Path, folder: Path, params: dict, kernel_name, warnings: tuple) -> NotebookRun:
    stage = folder.parents[1] / STAGING / str(os.getpid())
    final = {ext: folder / f"{path.stem}{ext}" for ext in (".ipynb", ".html", ".run.json")}
    try:
        stage.mkdir(parents=True, exist_ok=True)
        source = stage / f"{path.stem}.input.ipynb"
        source.write_text(write_ipynb_text(read_notebook(path)), encoding="utf-8")
        start = time.perf_counter()
        output = stage / f"{path.stem}.ipynb"
        failure, kernel_text = _papermill_execute(source, output, params, kernel_name, stage)
        nb = _read_output(output)
        run = _make_run(path, folder, final, params, time.perf_counter() - start, failure, warnings, nb, kernel_text)
        if nb is not None:
            write_text_atomic(final[".ipynb"], write_ipynb_text(nb))
            write_text_atomic(final[".html"], notebook_html(nb, path.stem))
        write_text_atomic(final[".run.json"], record_json({**asdict(run), "warnings": list(run.warnings)}))
        return run
    except OSError as exc:  # no space left, a read-only mount: say which file
        raise output_error(exc.filename or folder, exc) from exc
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _remove_if_empty(stage.parent)


def _papermill_execute(path: Path, output: Path, params: dict, kernel_name, stage: Path) -> tuple[dict | None, str]:
    """Run papermill; (None, kernel output) on success, else ({error, cell_index, source}, ...)."""
    papermill = _papermill()
    foreign = kernel_name not in (None, "python3")
    engine = {} if foreign else {"kernel_manager_class": kernel_manager_class()}
    log = stage / "kernel.log"
    try:
        with quiet_kernel_output(log):
            papermill.execute_notebook(str(path), str(output), parameters=params, kernel_name=kernel_name or "python3",
                                       progress_bar=False, cwd=os.getcwd(), log_output=False, **engine)
    except papermill.PapermillExecutionError as exc:
        return {"error": _cell_error(exc.ename, exc.evalue), "cell_index": exc.cell_index, "source": exc.source}, _tail(log)
    except Exception as exc:  # kernel death, timeouts, missing kernel: reported, the batch goes on
        return {"error": f"{type(exc).__name__}: {exc}", "cell_index": None, "source": ""}, _tail(log)
    return None, _tail(log)


def _cell_error(ename: str, evalue: str) -> str:
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
    import nbformat

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


class _Progress:
    """"[3/7] compile_ab ... 12 s" on stderr: on a terminal the running notebook's name and its
    elapsed time refreshed every second (tqdm), elsewhere (a log file, CI) a line when it starts;
    then one line per finished notebook with its status and duration."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.index = total, enabled, 0
        self.bar = None

    def __enter__(self):
        if self.enabled and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, unit="nb", file=sys.stderr, dynamic_ncols=True,
                            bar_format="{desc} [{elapsed} total]", mininterval=1.0)
            self.bar.refresh_thread = _Ticker(self.bar)
        return self

    def start(self, name: str) -> None:
        self.index += 1
        if self.bar is not None:
            self.bar.refresh_thread.watch(f"[{self.index}/{self.total}] {name}")
        elif self.enabled:
            print(f"[{self.index}/{self.total}] {name} ...", file=sys.stderr, flush=True)

    def done(self, run: NotebookRun) -> None:
        if self.bar is not None:
            self.bar.refresh_thread.watch(None)
            self.bar.write(f"[{self.index}/{self.total}] {run.name}: {run.status} in {run.duration_s:.1f} s",
                           file=sys.stderr)
            self.bar.update(1)
        elif self.enabled:
            print(f"[{self.index}/{self.total}] {run.name}: {run.status} in {run.duration_s:.1f} s", file=sys.stderr,
                  flush=True)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.refresh_thread.stop()
            self.bar.close()


class _Ticker:
    """Rewrites the bar's description with the notebook's elapsed seconds once a second."""

    def __init__(self, bar):
        import threading

        self.bar, self.label, self.started = bar, None, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def watch(self, label: str | None) -> None:
        self.label, self.started = label, time.perf_counter()
        self._tick()

    def _tick(self) -> None:
        if self.label:
            self.bar.set_description_str(f"{self.label} ... {time.perf_counter() - self.started:.0f} s")

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self._tick()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
