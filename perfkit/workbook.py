"""Where the workbook lives: one folder holding ``notebooks/`` and ``reports/``.

Every path default of the runner, the CLI and the notebooks comes from here, so ``perfkit run``,
papermill in any working directory and JupyterLab (whose kernel starts in ``notebooks/``) write to
the same ``reports/`` and perf log:

* ``workbook_root()``: ``$PERFKIT_HOME`` when set; else the nearest of the working directory and
  its parents that holds a ``notebooks/`` folder with a perfkit notebook in it (a clone of perfkit,
  or a folder made by ``perfkit init``); else the working directory itself (an installed perfkit
  run from any folder writes ``./reports``).
* ``reports_dir()`` and ``perf_log_path()``: ``<root>/reports`` and ``<root>/reports/perf_log.csv``.
* ``notebook_dirs()``: the workbook's ``notebooks/`` first, then the notebooks shipped inside the
  package (``perfkit/_workbook/notebooks``, package data), so an installed perfkit runs the
  whole workbook from an empty folder.
* ``SHIPPED_TRACES``: the small reference traces shipped with the package (``data/traces/cpu``,
  named ``cpu/NAME``); ``SHIPPED_GPU_TRACES``: the same workloads and plain training scripts recorded
  on H100/H200 GPUs (``data/traces/gpu``, named ``gpu/NAME``); ``SHIPPED_RANK_SETS``: multi-rank
  examples, one folder of per-rank traces each (``data/traces/ranks``).
* ``find_trace(path)``: a trace file or a multi-rank trace folder, looked up from the working
  directory (the caller's, for ``perfkit run``), then the workbook root; a bare name (no folder in
  it) then among the shipped traces, refused when two have it; ``shipped_note`` says when a command
  read a shipped trace for a name that is no file here; ``find_rank_traces(pattern)``: the per-rank
  files of a multi-rank run.
* ``Source`` and ``trace_source(path)``: the trace an investigation reads, with its subject (for the
  perf log) and the device it was recorded on (``perfkit.bench.live`` adds live runs).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from glob import glob
from pathlib import Path

from .errors import ParameterError, require
from .registry import NOTEBOOK_SUFFIXES, notebook_names
from .trace import load_trace
from .trace.loader.cache import stamp
from .trace.loader.load import TRACE_SUFFIXES, resolve_paths
from .trace.model import recorded_on

PACKAGED = Path(__file__).resolve().parent / "_workbook"
# In a clone these are symbolic links to the repository's notebooks/ and data/traces/; a wheel
# holds copies (pyproject.toml package-data).
PACKAGED_NOTEBOOKS = PACKAGED / "notebooks"
SHIPPED_ROOT = PACKAGED / "traces"
SHIPPED_TRACES = SHIPPED_ROOT / "cpu"
SHIPPED_GPU_TRACES = SHIPPED_ROOT / "gpu"
SHIPPED_RANK_SETS = PACKAGED / "traces" / "ranks"
HOME_VARIABLE = "PERFKIT_HOME"
REPORTS = "reports"
PERF_LOG = "perf_log.csv"


def workbook_root(start: str | os.PathLike | None = None) -> Path:
    """The workbook folder (see the module docstring); ``start`` defaults to the working
    directory. Raises ParameterError when ``$PERFKIT_HOME`` names something that is not a folder."""
    home = os.environ.get(HOME_VARIABLE, "").strip()
    if home:
        path = Path(home).expanduser().resolve()
        if path.exists() and not path.is_dir():
            raise ParameterError(f"{HOME_VARIABLE}={home}: not a folder; point it at your workbook folder "
                                 "(the one holding notebooks/ and reports/) or unset it")
        return path
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_workbook(folder):
            return folder
    return here


def is_workbook(folder: Path) -> bool:
    """True when ``folder/notebooks`` holds a notebook named like a registered investigation."""
    notebooks = folder / "notebooks"
    if not notebooks.is_dir():
        return False
    return any((notebooks / f"{name}{suffix}").is_file() for name in notebook_names() for suffix in NOTEBOOK_SUFFIXES)


def reports_dir(start: str | os.PathLike | None = None) -> Path:
    """``<workbook root>/reports``."""
    return workbook_root(start) / REPORTS


def perf_log_path(given: str | os.PathLike | None = None) -> Path:
    """``given`` as an absolute path when set (an explicit path wins), else the workbook's
    ``reports/perf_log.csv``."""
    if given not in (None, ""):
        return Path(given).expanduser().resolve()
    return reports_dir() / PERF_LOG


def notebook_dirs(start: str | os.PathLike | None = None) -> list[Path]:
    """Folders searched for a notebook by name: ``$PERFKIT_NOTEBOOK_DIR`` alone when set, else the
    workbook's ``notebooks/`` (when it exists) and then the packaged notebooks."""
    override = os.environ.get("PERFKIT_NOTEBOOK_DIR")
    if override:
        return [Path(override).expanduser().resolve()]
    own = workbook_root(start) / "notebooks"
    dirs = [own] if own.is_dir() else []
    return dirs + [PACKAGED_NOTEBOOKS.resolve()] if PACKAGED_NOTEBOOKS.resolve() not in dirs else dirs


def shipped_traces() -> list[str]:
    """Names of the reference traces shipped with perfkit, as ``find_trace`` takes them: ``cpu/NAME``
    (``data/traces/cpu``), then ``gpu/NAME`` (``data/traces/gpu``: the same workloads recorded on a GPU
    carry the same file names, so a bare name that is in both is refused)."""
    return (sorted(f"cpu/{p.name}" for p in SHIPPED_TRACES.glob("*.json.gz"))
            + sorted(f"gpu/{p.name}" for p in SHIPPED_GPU_TRACES.glob("*.json.gz")))


def shipped_rank_sets() -> list[str]:
    """Folder names of the multi-rank examples shipped with perfkit (``data/traces/ranks``)."""
    return sorted(p.name for p in SHIPPED_RANK_SETS.glob("*") if p.is_dir())


def relative_name(path: str | os.PathLike) -> str:
    """``path`` as a report may show it, and as ``find_trace`` finds it again: ``cpu/NAME`` or
    ``gpu/NAME`` for a shipped trace (the same file name is in both folders), the name of a shipped
    multi-rank set, else relative to the workbook root when under it, else the file name alone (a
    shared report must not carry local paths)."""
    path = Path(path).resolve()
    if path.parent == SHIPPED_RANK_SETS.resolve():
        return path.name  # shipped sets are found by name, clone or installed
    for folder, prefix in ((SHIPPED_TRACES, "cpu"), (SHIPPED_GPU_TRACES, "gpu")):
        if path.parent == folder.resolve():
            return f"{prefix}/{path.name}"
    root = workbook_root()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


_SHIPPED_FOLDERS = ("cpu", "gpu", "ranks")


def find_trace(path: str | os.PathLike) -> Path:
    """Resolve ``path`` (a trace file, or a folder of per-rank traces): as given (absolute or from
    the working directory), else from the workbook root. Only a bare file name (no folder in it) is
    then looked up among the shipped traces, and only when one of them has it (``cpu/NAME``,
    ``gpu/NAME`` and ``ranks/NAME`` name one folder's); a path with a folder in it is only ever
    that path, so a mistyped ``/data/exp7/x.json.gz`` is never answered with a shipped ``x.json.gz``.
    Raises ParameterError naming where it looked, and for a bare name two shipped traces share."""
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"trace_path={path!r:.80}: give a trace file or folder as text, "
                             "e.g. \"cpu/mppi_float_tensor.json.gz\"")
    given = Path(path).expanduser()
    local = (given,) if given.is_absolute() else (given, workbook_root() / given)
    for candidate in local:
        if str(path) and _exists(path, candidate):
            return candidate.resolve()
    shipped = [c for c in _shipped_candidates(os.fsdecode(os.fspath(path))) if _exists(path, c)]
    if len(shipped) > 1:
        names = " and ".join(relative_name(c) for c in shipped)
        raise ParameterError(f"trace_path={str(path)!r}: no such file here, and the shipped traces {names} both have "
                             f"that name (the same workload recorded on a CPU and on a GPU): name one of them")
    if shipped:
        return shipped[0].resolve()
    where = f"the working directory {Path.cwd()}" + ("" if given.is_absolute() else f" and the workbook {workbook_root()}")
    if not _shipped_candidates(os.fsdecode(os.fspath(path))):
        raise ParameterError(f"trace_path={str(path)!r}: no such file (looked from {where}); a path with a folder in "
                             "it is read from that folder only: check the folder and the name")
    raise ParameterError(f"trace_path={str(path)!r}: no such file (looked in {where}); shipped traces, by name: "
                         f"{', '.join(shipped_traces() + shipped_rank_sets()) or 'none'}")


def shipped_note(path: str | os.PathLike, found: Path) -> str:
    """What a command says when ``find_trace(path)`` read a shipped trace although no file ``path``
    exists here ("" otherwise): which one it read, so a mistyped name is not answered in silence."""
    if not Path(found).resolve().is_relative_to(SHIPPED_ROOT.resolve()) or os.path.lexists(Path(path).expanduser()):
        return ""
    return f"no file {str(path)!r} here: reading the trace shipped with perfkit, {relative_name(found)}"


def _shipped_candidates(text: str) -> tuple:
    """Where a shipped trace named ``text`` would be: ``cpu/NAME``, ``gpu/NAME``, ``ranks/NAME`` in that
    folder; a bare ``NAME`` (no separator at all: ``./NAME`` means this folder) in each; any other path nowhere."""
    parts = text.replace(os.sep, "/").split("/")
    if len(parts) == 2 and parts[0] in _SHIPPED_FOLDERS and parts[1] not in ("", ".", ".."):
        return (SHIPPED_ROOT / parts[0] / parts[1],)
    if len(parts) == 1 and text not in ("", ".", "..", "~") and not text.startswith("~"):
        return tuple(SHIPPED_ROOT / folder / text for folder in _SHIPPED_FOLDERS)
    return ()


def _exists(path, candidate: Path) -> bool:
    try:
        return candidate.exists()
    except OSError as exc:  # a name too long, a loop of links
        raise ParameterError(f"trace_path={str(path)!r:.80}: cannot be a path here ({exc.strerror})") from None


@dataclass(frozen=True)
class RankFiles:
    """The per-rank trace files of one run (sorted) and what they are (``subject``: "trace NAME",
    the folder or glob as a report may show it)."""

    paths: tuple
    subject: str


def find_rank_traces(pattern: str | os.PathLike) -> RankFiles:
    """The trace files of a multi-rank run: ``pattern`` is a folder of per-rank traces (resolved
    by ``find_trace``, so a shipped set is found by name), a glob such as
    ``runs/42/*.pt.trace.json.gz`` (from the working directory, else the workbook root) or one
    file. Raises ParameterError when the glob matches no trace file, TraceError for a folder
    without traces."""
    text = str(pattern)
    if not any(c in text for c in "*?["):
        found = find_trace(pattern)
        return RankFiles(tuple(resolve_paths(found)), f"trace {relative_name(found)}")
    given = Path(text).expanduser()
    for base in (Path.cwd(), workbook_root()):
        paths = sorted(p for p in base.glob(str(given)) if p.is_file() and p.name.endswith(TRACE_SUFFIXES)) \
            if not given.is_absolute() else sorted(Path(p) for p in glob(str(given)) if p.endswith(TRACE_SUFFIXES))
        if paths:
            return RankFiles(tuple(p.resolve() for p in paths), f"trace {relative_name(paths[0].parent)}/{given.name}")
    raise ParameterError(f"trace_path={text!r}: the pattern matches no .json/.json.gz file (looked from the working "
                         f"directory {Path.cwd()} and the workbook {workbook_root()}); give a folder of per-rank "
                         f"traces, a glob, or a shipped set: {', '.join(shipped_rank_sets()) or 'none'}")


@dataclass(frozen=True)
class Source:
    """The trace an investigation reads and what it is: ``subject`` ("trace NAME" or "live
    WORKLOAD"; the perf log compares runs of one subject only), ``device``
    (the device the trace was recorded on, from the trace itself) and ``mode``."""

    trace: object
    subject: str
    device: str
    mode: str

    def __repr__(self) -> str:
        return f"Source({self.subject!r}, recorded on {self.device})"


def trace_source(path: str | os.PathLike, mode: str = "trace") -> Source:
    """The ``Source`` of a trace file found by :func:`find_trace`: its ``Trace``, "trace NAME" as
    subject and the device it was recorded on. Raises ParameterError for a path found nowhere.

    The Trace of the previous call is reused while its files are unchanged (the trace cache's
    fingerprint, ``cache.stamp``: size, times, inode and the bytes at both ends), so re-running a
    notebook (Run All in JupyterLab) or a second investigation of the same trace in one kernel reads
    it once and, since analyses keep their results on the Trace (``Trace.derived``), analyses it once."""
    path = find_trace(path)
    trace = _read_trace(path)
    return Source(trace, f"trace {relative_name(path)}", recorded_on(trace), mode)


_LAST_READ: list = []  # [(file states, Trace)] of trace_source's previous call


def _read_trace(path: Path):
    try:
        states = tuple((str(p.resolve()), stamp(p)) for p in resolve_paths(path))
    except OSError:  # unreadable: the loader's own error says which file and why
        return load_trace(path)
    if _LAST_READ and _LAST_READ[0][0] == states:
        return _LAST_READ[0][1]
    _LAST_READ.clear()  # the previous Trace is freed before the next one is built
    trace = load_trace(path)
    _LAST_READ.append((states, trace))
    return trace


MODES = ("trace", "live")


def check_mode(mode: str) -> str:
    """``mode`` if it is "trace" or "live"; ParameterError otherwise."""
    if mode not in MODES:
        raise ParameterError(f"mode={mode!r}: use 'trace' (analyze trace_path) or 'live' (run a reference workload)")
    if mode == "live":
        require("torch", "mode='live' (it runs a reference workload)")
    return mode
