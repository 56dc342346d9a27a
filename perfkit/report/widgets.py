"""An ipywidgets trace explorer for JupyterLab: pick a trace, a step, filter ops by substring.

    from perfkit.report.widgets import explorer
    explorer()                      # the shipped traces (data/traces/)

The explorer draws with the same functions the static notebooks use (``plots.step_timeline``,
``plots.breakdown``) over the host-op table of ``perfkit.analysis.host_ops``; ``explore_view`` is that
shared step without widgets, so it is tested directly. Notebooks call ``explorer`` only inside
``if interactive:`` so papermill and HTML runs stay static. ipywidgets is imported lazily.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..analysis.host_ops import host_events, op_table as _op_table
from ..errors import MissingDependencyError, ParameterError
from ..results import html_section, html_table, html_text
from ..trace import load_trace
from ..trace.ancestry import nest
from ..workbook import SHIPPED_TRACES
from .plots.figure import figure_png
from .plots.steps import breakdown, step_timeline

DATA_TRACES = SHIPPED_TRACES.parent.resolve()
TRACE_GLOBS = ("*.json.gz", "*.json", "*.pt.trace.json.gz")


def trace_files(root: str | os.PathLike | None = None) -> list[Path]:
    """Trace files (``*.json``, ``*.json.gz``) under ``root`` (default the traces shipped with
    perfkit, ``data/traces``), sorted; MANIFEST.json files are left out."""
    base = Path(root) if root is not None else DATA_TRACES
    if not base.is_dir():
        raise ParameterError(f"trace folder {base} does not exist: pass root= a folder holding *.json.gz traces")
    found = {p for pattern in TRACE_GLOBS for p in base.rglob(pattern) if p.name != "MANIFEST.json"}
    return sorted(found)


def filter_ops(table: pd.DataFrame, pattern: str = "", column: str = "name") -> pd.DataFrame:
    """Rows whose ``column`` contains ``pattern`` (case-insensitive, literal text, not a regex).
    Raises ParameterError when the column is missing."""
    if column not in table.columns:
        raise ParameterError(f"filter_ops: table lacks column {column!r}; it has {list(table.columns)}")
    if not pattern:
        return table
    hit = table[column].astype(str).str.contains(pattern, case=False, regex=False)
    return table[hit.to_numpy()]


def op_table(trace) -> pd.DataFrame:
    """The host-op table of ``trace`` (``perfkit.analysis.host_ops.op_table`` columns: name, cat,
    count, total_us, self_us, mean_us, self_pct, total_pct), sorted by self time."""
    events = host_events(trace)
    return _op_table(events, nest(events))


@dataclass(frozen=True)
class ExplorerView:
    """What the explorer shows for one selection: the step timeline, the whole trace's op table
    filtered by ``pattern`` (top rows by self time) and its breakdown figure (self time, us)."""

    timeline: object
    breakdown: object
    ops: pd.DataFrame
    step: int | None
    pattern: str

    def to_frame(self) -> pd.DataFrame:
        return self.ops

    def __repr__(self) -> str:
        return f"ExplorerView(step={self.step}, pattern={self.pattern!r}, {len(self.ops)} ops)"

    def _repr_html_(self) -> str:
        title = f"step {self.step}, ops containing {self.pattern!r}" if self.pattern else f"step {self.step}"
        return html_section(title, html_table(self.ops))


def explore_view(trace, step: int | None = None, pattern: str = "", *, top: int = 15,
                 table: pd.DataFrame | None = None) -> ExplorerView:
    """Timeline of ``step`` (default the first) and the ops whose name contains ``pattern``
    (``table`` reuses an op table computed before; the explorer passes it to skip recomputing)."""
    ops = filter_ops(op_table(trace) if table is None else table, pattern)
    title = f"Top ops by self time (filter: {pattern})" if pattern else "Top ops by self time"
    return ExplorerView(step_timeline(trace, step), breakdown(ops, value="self_us", top=top, title=title),
                        ops.head(top).reset_index(drop=True), step, pattern)


def steps_of(trace) -> list[int]:
    """Profiler step numbers in ``trace`` (empty when it has none)."""
    return [int(s) for s in trace.steps["step"].tolist()]


def explorer(root: str | os.PathLike | None = None, *, trace_path: str | os.PathLike | None = None,
             top: int = 15) -> "TraceExplorer":
    """A ``TraceExplorer`` over the files under ``root`` (or the one ``trace_path``); the
    notebook displays it. Raises MissingDependencyError without ipywidgets and
    ParameterError when there is no trace to show."""
    files = [Path(trace_path)] if trace_path else trace_files(root)
    if not files:
        raise ParameterError(f"no trace files under {root or DATA_TRACES}: pass root= or trace_path=")
    return TraceExplorer(files, top)


def _ipywidgets():
    try:
        import ipywidgets
    except ImportError:
        raise MissingDependencyError("ipywidgets", "the interactive trace explorer") from None
    return ipywidgets


class TraceExplorer:
    """Widgets (trace dropdown, step dropdown, op-name filter, output area) and the current
    ``view`` (an ``ExplorerView``). The loaded trace and its op table are kept so changing the
    step or filter neither reloads nor recomputes."""

    def __init__(self, files: list[Path], top: int = 15):
        widgets = _ipywidgets()
        self.top = top
        self.trace = self.table = self.view = None
        self._loading = False
        self.file_box = widgets.Dropdown(options=[(p.name, str(p)) for p in files], description="trace")
        self.step_box = widgets.Dropdown(options=[], description="step")
        self.filter_box = widgets.Text(value="", description="filter", placeholder="op name contains...")
        self.out = widgets.Output()
        self.widget = widgets.VBox([widgets.HBox([self.file_box, self.step_box, self.filter_box]), self.out])
        self.file_box.observe(lambda change: self.load(), names="value")
        self.step_box.observe(lambda change: self.render(), names="value")
        self.filter_box.observe(lambda change: self.render(), names="value")
        self.load()

    def __repr__(self) -> str:
        return f"TraceExplorer({self.file_box.label}, {self.view!r})"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def load(self) -> None:
        self.trace = load_trace(self.file_box.value)
        self.table = op_table(self.trace)
        steps = steps_of(self.trace)
        self._loading = True
        try:
            self.step_box.options = [(str(s), s) for s in steps] or [("whole trace", None)]
            self.step_box.value = steps[0] if steps else None
        finally:
            self._loading = False
        self.render()

    def render(self) -> None:
        if self.trace is None or self._loading:
            return
        from IPython.display import HTML, Image

        self.view = explore_view(self.trace, self.step_box.value, self.filter_box.value, top=self.top,
                                 table=self.table)
        self.out.outputs = ()
        self.out.append_display_data(HTML(f"<p>{html_text(self.file_box.label)}</p>"))
        for fig in (self.view.timeline, self.view.breakdown):
            self.out.append_display_data(Image(figure_png(fig)))
        self.out.append_display_data(HTML(html_table(self.view.ops)))
