"""The shared HTML page: its <title> is the investigation and subject, and a failed cell's coloured
traceback shows no absolute local path (issue 23)."""
from __future__ import annotations

import re
import sys

import nbformat

from perfkit.report.card import MIME, VerdictCard
from perfkit.report.publish.html import notebook_html
from perfkit.report import cpu_bound


def _notebook(*outputs) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.outputs = list(outputs)
    nb.cells.append(cell)
    return nb


def _title(html: str) -> str:
    return re.search(r"<title>(.*?)</title>", html, re.S)[1].strip()


def test_title_is_the_investigation_and_subject():
    card = VerdictCard("sync_points", "125 possible sync points per step", (), "", "trace cpu/ppo_sync_checks.json.gz",
                       "cpu")
    out = nbformat.v4.new_output("display_data", data={"text/plain": "card", MIME: card.to_json()})
    assert _title(notebook_html(_notebook(out), "sync_points")) == "sync_points: trace cpu/ppo_sync_checks.json.gz"


def test_title_without_a_card_is_the_notebook_name():
    assert _title(notebook_html(_notebook(), "cpu_bound")) == "cpu_bound"


def test_coloured_traceback_shows_no_python_prefix():
    frame = f"\x1b[0;32m{sys.prefix}/lib/python3.11/site-packages/torch/x.py\x1b[0m:12"
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[frame])
    html = notebook_html(_notebook(error), "x")
    assert sys.prefix not in html and "[python]/lib/python3.11" in html


def test_cpu_bound_step_table_fits_a_page():
    from pathlib import Path

    import perfkit

    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "cpu" / "ppo_item_logging.json.gz"
    result = perfkit.cpu_bound(perfkit.load_trace(trace))
    table = cpu_bound.cpu_bound_steps(result)
    full = result.to_frame()
    assert list(table.columns) == ["step", "verdict", "wall (ms)", "host busy (ms)"]  # CPU-only: no GPU, no zeros
    assert table["wall (ms)"].tolist() == (full["wall_us"] / 1e3).tolist()
    assert not table.isna().any().any() and len(table.columns) <= 10
    assert "start_us" in full.columns and not any("start" in c for c in table.columns)
    ahead = perfkit.cpu_bound(perfkit.load_trace(trace.parents[1] / "gpu" / "mlp_fp32.pt.trace.json.gz"))
    table = cpu_bound.cpu_bound_steps(ahead)  # a host ahead of the GPU: each step queued more than its window
    assert (table["GPU work queued (ms)"] > 1.5 * table["wall (ms)"]).sum() == 3


def test_findings_evidence_reads_as_text_not_key_value():
    from perfkit.results import Finding, evidence_text, findings_frame

    evidence = {"queue_delay_us": float("nan"), "gpu_busy_share": 0.4346, "launches_per_step": 1200,
                "per_step_us_a": 12109.3, "alloc_bytes": 25276063744, "leak": True, "busy_pct": 12.5}
    assert evidence_text(evidence) == ("GPU busy share: 43.46%; launches per step: 1,200; per step (A): 12.11 ms; "
                                       "alloc: 25.28 GB; leak: yes; busy: 12.5%")
    row = findings_frame([Finding("low", "t", evidence, "fix", "rule")]).iloc[0]
    assert "=" not in row["evidence"] and "nan" not in row["evidence"] and "True" not in row["evidence"]


def test_html_tables_say_yes_and_no():
    import pandas as pd

    from perfkit.results import html_table

    html = html_table(pd.DataFrame({"waiting": [True, False], "ms": [1.5, 2.0]}))
    assert "<td>yes</td>" in html and "<td>no</td>" in html and "True" not in html and "False" not in html


def _no_lab_template(monkeypatch):
    import nbconvert

    def missing(self, *args, **kwargs):  # what nbconvert raises when its data files were not installed
        raise ValueError("No template sub-directory with name 'lab' found in the following paths:\n"
                         "\t/opt/venv/share/jupyter\n\t/usr/share/jupyter")

    monkeypatch.setattr(nbconvert.HTMLExporter, "__init__", missing)


def test_missing_lab_template_says_what_to_do(monkeypatch):
    import pytest

    from perfkit.errors import PerfkitError

    _no_lab_template(monkeypatch)
    with pytest.raises(PerfkitError) as err:
        notebook_html(_notebook(), "x")
    message = str(err.value)
    assert "(searched: /opt/venv/share/jupyter, /usr/share/jupyter)" in message
    assert "pip install --force-reinstall nbconvert" in message and "JUPYTER_PATH" in message


def test_a_wide_table_wraps_inside_the_page_instead_of_scrolling_out_of_it():
    """Cells break between words and at the ``<wbr>`` of long tokens, headers after underscores
    (``html_table``), so the browser fits a 16-column table (the ranks report's per-rank table) into the
    1200 px body, or scrolls it there, without breaking a file name mid-word (``overflow-wrap: anywhere``
    did: ``rank0.pt.tr / ace.json.g / z``)."""
    html = notebook_html(_notebook(), "ranks")
    assert ".jp-OutputArea-output td { overflow-wrap: break-word; }" in html and "anywhere" not in html
    assert "body { max-width: 1200px; margin: 0 auto; }" in html
