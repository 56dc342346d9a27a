"""perfkit's exception hierarchy.

Every error a user can cause is a ``PerfkitError``. Messages say what went wrong, where
(which file, which parameter) and how to fix it; the CLI prints them as one line.
"""
from __future__ import annotations

import importlib.util


class PerfkitError(Exception):
    """Base class of every error perfkit raises on purpose."""


class TraceError(PerfkitError):
    """A trace file or directory cannot be read as a PyTorch profiler trace."""

    def __init__(self, path, problem: str, fix: str = ""):
        self.path = str(path)
        self.problem = problem
        self.fix = fix
        msg = f"{self.path}: {problem}"
        super().__init__(f"{msg}. {fix}" if fix else msg)

    def __reduce__(self):
        # Rebuilt from its fields, so it survives pickling out of a worker process (process pool, Dask).
        return type(self), (self.path, self.problem, self.fix)


# How to keep the complete events of a cut-off file, in both places a user may be: the commands that take
# --salvage (``cli/parsers.py``) and the loader's keyword.
SALVAGE_HOW = ("on the command line `perfkit summary --salvage FILE` (or `perfkit export --salvage`), in Python "
               "load_trace(FILE, salvage=True)")


class TruncatedTraceError(TraceError):
    """The JSON stops mid-write; ``recoverable`` complete events could be salvaged."""

    def __init__(self, path, problem: str, recoverable: int):
        self.recoverable = recoverable
        super().__init__(
            path, problem,
            f"{recoverable} complete events can be recovered: {SALVAGE_HOW}",
        )

    def __reduce__(self):
        return type(self), (self.path, self.problem, self.recoverable)


class ParameterError(PerfkitError):
    """A function, notebook or CLI argument has a value perfkit cannot use."""


# Optional packages (the top-level module name) -> the extra of pyproject.toml that installs them.
EXTRA_OF = {
    "torch": "workbook", "papermill": "workbook", "nbconvert": "workbook", "nbformat": "workbook",
    "nbclient": "workbook", "ipykernel": "workbook", "jupytext": "workbook", "jinja2": "workbook",
    "matplotlib": "workbook", "seaborn": "workbook", "ipywidgets": "workbook", "IPython": "workbook",
    "jupyterlab": "workbook", "pynvml": "workbook", "dask": "dask", "distributed": "dask", "duckdb": "sql",
    "mcp": "mcp", "mcp_types": "mcp",
}


class MissingDependencyError(PerfkitError):
    """An optional package is needed for this feature and is not installed; the message names the
    perfkit extra that brings it (``pip install "perfkit[workbook]"``)."""

    def __init__(self, package: str, feature: str):
        self.package = package
        self.feature = feature
        extra = EXTRA_OF.get(package.split("[")[0].split(".")[0])
        how = f'pip install "perfkit[{extra}]"' if extra else f"pip install {package}"
        super().__init__(f"{feature} needs the '{package}' package, which is not installed: {how}")

    def __reduce__(self):
        return type(self), (self.package, self.feature)


def missing_dependency(exc: ImportError, feature: str) -> MissingDependencyError | None:
    """``exc`` as a MissingDependencyError when it is the import of an optional package perfkit
    knows (``EXTRA_OF``), else None (a missing required package or a bug: let it propagate)."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    return MissingDependencyError(name, feature) if name in EXTRA_OF else None


def require(module: str, feature: str) -> None:
    """Raise MissingDependencyError when the optional ``module`` cannot be imported; a notebook's
    first cell calls this so that a missing package is one line naming the extra, not a traceback."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses the name, or a broken half-installed package
        found = False
    if not found:
        raise MissingDependencyError(module, feature)


class OutputError(PerfkitError, OSError):
    """perfkit could not write a file: names it, says why (no space left, a read-only file system,
    a missing folder, no permission) and what to do. Also an ``OSError``, so code that treats a
    failed write as a warning (the trace cache) keeps doing so. The previous version of the file,
    if any, is intact: every write is atomic."""

    def __init__(self, path, reason: str, fix: str = ""):
        self.path, self.reason, self.fix = str(path), reason, fix
        msg = f"{self.path}: cannot write it: {reason}"
        super().__init__(f"{msg}; {fix}" if fix else msg)

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):
        return type(self), (self.path, self.reason, self.fix)
