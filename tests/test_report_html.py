"""The shared HTML page: its <title> is the investigation and subject, and a failed cell's coloured
traceback shows no absolute local path (issue 23)."""
from __future__ import annotations

import re
import sys

import nbformat

from perfkit.report.card import MIME, VerdictCard
from perfkit.report.publish.html import notebook_html


def _notebook(*outputs) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.outputs = list(outputs)
    nb.cells.append(cell)
    return nb


def _title(html: str) -> str:
    return re.search(r"<title>(.*?)</title>", html, re.S)[1].strip()


def test_title_is_the_investigation_and_subject():
    card = VerdictCard("sync_points", "125 possible sync points per step", (), "", "trace ppo_sync_checks.json.gz",
                       "cpu")
    out = nbformat.v4.new_output("display_data", data={"text/plain": "card", MIME: card.to_json()})
    assert _title(notebook_html(_notebook(out), "sync_points")) == "sync_points: trace ppo_sync_checks.json.gz"


def test_title_without_a_card_is_the_notebook_name():
    assert _title(notebook_html(_notebook(), "cpu_bound")) == "cpu_bound"


def test_coloured_traceback_shows_no_python_prefix():
    frame = f"\x1b[0;32m{sys.prefix}/lib/python3.11/site-packages/torch/x.py\x1b[0m:12"
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[frame])
    html = notebook_html(_notebook(error), "x")
    assert sys.prefix not in html and "[python]/lib/python3.11" in html
