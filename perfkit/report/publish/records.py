"""The run record of one executed notebook: ``NotebookRun`` in memory, and beside each report
(``<name>.run.json``) its status, failing cell, duration, parameters and verdict card, versioned;
written by the runner, read by the index."""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from ...results import html_section, html_table, html_text, html_warnings

RUN_RECORD_VERSION = 2


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


def record_json(fields: dict) -> str:
    """A run record as JSON text (``format_version`` first)."""
    return json.dumps({"format_version": RUN_RECORD_VERSION, **fields}, indent=1, default=repr)


def load_run_record(path: str | os.PathLike) -> dict:
    """Read a ``<name>.run.json``; {} when absent, unreadable or of another version."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) and record.get("format_version") == RUN_RECORD_VERSION else {}
