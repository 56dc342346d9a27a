"""Figures a rendered report shows, read back by label, so a test can say "one figure, one value, on every
surface" (issue 53): ``text_figures`` finds "label: value unit" in the report's text (the card's numbers,
findings' evidence, prose), ``tables`` reads its HTML tables, ``table_figures`` keys a table's cells by
(row key, column) where its first column names each row once, and ``disagreements`` lists the labels
that carry two values.

Two printed numbers agree when they differ by no more than the coarser one's last printed digit
("15.53" and "15.5" agree, "1,035" and "1,030" do not).
"""
from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

_UNIT = r"(?:ms|us|s|%|x|MiB|KiB|GiB|MB|GB|KB|B|copies|objects)"
_NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"
# "label: value unit" at the start of a line or after "; " (the card's numbers, a finding's evidence)
_FIGURE = re.compile(rf"(?:^|(?<=; ))\s*([A-Za-z][\w ()/'%-]{{1,60}}?): ({_NUMBER})(?: ?({_UNIT})\b)?", re.M)


def number(text: str) -> float:
    return float(text.replace(",", "").lstrip("+"))


def resolution(text: str) -> float:
    """The last printed digit's size: "15.53" -> 0.01, "1,035" -> 1."""
    digits = text.replace(",", "").lstrip("+-")
    return 10.0 ** -len(digits.split(".")[1]) if "." in digits else 1.0


def agree(a: str, b: str) -> bool:
    return abs(number(a) - number(b)) <= max(resolution(a), resolution(b)) * 1.0001


def text_figures(text: str) -> list[tuple[str, str, str]]:
    """(label, value as printed, unit) of every "label: value unit" in ``text``; labels lower-cased."""
    return [(m[1].strip().lower(), m[2], m[3] or "") for m in _FIGURE.finditer(text)]


class _Tables(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self._cell, self._row = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
            self.tables[-1].append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> list[list[list[str]]]:
    """Every HTML table of ``html`` as rows of cell texts (the header row first)."""
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def table_figures(table: list[list[str]]) -> list[tuple[str, str, str]]:
    """(row key + column, value, "") of a table's numeric cells, where the first column names each row once
    (a metric/value table, a by-kind table); nothing for a table whose first column repeats."""
    if len(table) < 2:
        return []
    header, rows = table[0], [r for r in table[1:] if len(r) == len(table[0])]
    keys = [r[0] for r in rows]
    if len(set(keys)) < len(keys) or not header:
        return []
    out = []
    for r in rows:
        for column, cell in zip(header[1:], r[1:]):
            if re.fullmatch(_NUMBER, cell):
                label = r[0].lower() if column.lower() == "value" else f"{r[0]} {column}".lower()
                out.append((label, cell, ""))
    return out


def disagreements(figures: list[tuple[str, str, str]], labels=None) -> dict[str, set[str]]:
    """Each (label, unit) with values that do not agree, among ``labels`` (all when None)."""
    seen = defaultdict(list)
    for label, value, unit in figures:
        if labels is None or label in labels:
            seen[(label, unit)].append(value)
    return {f"{label} [{unit}]": set(values) for (label, unit), values in seen.items()
            if any(not agree(values[0], v) for v in values[1:])}


_BROWSERS = ("chromium", "chromium-browser", "google-chrome")
_CHECK = Path(__file__).parent / "fixtures" / "broken_words.js"


def browser() -> str | None:
    """A headless Chromium on PATH, or None."""
    return next((shutil.which(b) for b in _BROWSERS if shutil.which(b)), None)


def broken_words(html: str, folder: Path, width: int = 1280) -> list[str]:
    """The words of table cells that a browser window ``width`` px wide lays out over two lines (a word
    broken mid-word; a break at a ``<wbr>`` or a space is none), found by laying the page out in headless
    Chromium (``browser()``, which must exist) with a script that measures each word's line boxes."""
    page = folder / "page.html"
    page.write_text(html.replace("</body>", f"<script>{_CHECK.read_text()}</script></body>"), encoding="utf-8")
    done = subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},2000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'data-broken-words="([^"]*)"', done.stdout)
    assert found, f"the browser did not run the check: {done.stderr[-500:]}"
    return json.loads(html_lib.unescape(found[1]))
