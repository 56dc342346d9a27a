"""An executed notebook as the report people share: self-contained HTML without code cells or
local paths.

``notebook_html(nb)`` exports with nbconvert's ``lab`` template, inputs and prompts excluded (the
executed ``.ipynb`` keeps the code), the blocks that load require.js, MathJax, mermaid and widget
managers from a CDN removed (math then shows as TeX source), images inline as data URIs, wide
tables scrolling inside the page instead of running off it. ``scrub_paths(nb)`` first replaces
absolute local paths in the outputs (the workbook, the home folder, the Python installation,
the temporary folder) with short placeholders, so a report shared outside the machine shows no
``/home/<user>/...``.
"""
from __future__ import annotations

import copy
import os
import re
import sys
import tempfile
from pathlib import Path

from ...errors import PerfkitError
from ...workbook import workbook_root
from ..card import read_card

_CDN_BLOCKS = ("html_head_js_requirejs", "jupyter_widgets", "html_head_js_mathjax", "html_head_js_mermaidjs")
_CSS = """
.jp-OutputArea-output table { display: block; overflow-x: auto; max-width: 100%; }
.jp-OutputArea-output td, .jp-OutputArea-output th { white-space: normal; max-width: 40em; text-align: left !important; }
/* a cell breaks between words and at the <wbr> html_table puts in long tokens, never inside a word: a token
   that cannot break widens its column and the table scrolls instead */
.jp-OutputArea-output td { overflow-wrap: break-word; }
.jp-OutputArea-output img { max-width: 100%; height: auto; }
.jp-Cell-inputWrapper .jp-InputPrompt, .jp-OutputPrompt { display: none; }
body { max-width: 1200px; margin: 0 auto; }
"""


def notebook_html(nb, name: str = "") -> str:
    """The shareable HTML of an executed notebook (see the module docstring); its ``<title>`` is
    the investigation and subject of the notebook's verdict card, else ``name``."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    blocks = "".join(f"{{%- block {b} -%}}{{%- endblock {b} -%}}\n" for b in _CDN_BLOCKS)
    template = ("{%- extends 'index.html.j2' -%}\n" + blocks
                + "{% block extra_css %}<style>" + _CSS + "</style>{% endblock extra_css %}\n")
    try:
        exporter = HTMLExporter(template_name="lab", embed_images=True, exclude_input=True,
                                exclude_input_prompt=True, exclude_output_prompt=True,
                                extra_loaders=[DictLoader({"perfkit_report.html.j2": template})],
                                template_file="perfkit_report.html.j2")
    except ValueError as exc:  # nbconvert's templates are data files, outside the package
        if "No template sub-directory" not in str(exc):
            raise
        raise PerfkitError(missing_template(str(exc))) from None
    nb = scrub_paths(nb)
    nb.metadata["title"] = page_title(read_card(nb), name)
    body, _ = exporter.from_notebook_node(nb)
    return body


def missing_template(message: str) -> str:
    """What to do when nbconvert finds no ``lab`` template (nbconvert's ValueError ``message`` lists
    the folders it searched, one a line)."""
    searched = [line.strip() for line in message.splitlines()[1:] if line.strip()]
    return ("nbconvert has no 'lab' HTML template (searched: " + (", ".join(searched) or "no folders") + "): its "
            "data files are missing, as after `pip install --target` or a copied site-packages; reinstall it "
            "(`pip install --force-reinstall nbconvert`) or set JUPYTER_PATH to a share/jupyter folder that "
            "holds nbconvert/templates/lab")


def page_title(card: dict, name: str = "") -> str:
    """'sync_points: trace cpu/ppo_sync_checks.json.gz' from a verdict card, else ``name`` (the notebook)."""
    if card.get("investigation"):
        return f"{card['investigation']}: {card['subject']}" if card.get("subject") else card["investigation"]
    return name or "perfkit report"


def local_prefixes() -> list[tuple[str, str]]:
    """(absolute path, placeholder) pairs, longest first: the workbook root ("."), perfkit's own
    source folder ("[perfkit]", e.g. an editable install's clone), the Python installation
    ("[python]"), the home folder ("~") and the temporary folder ("[tmp]")."""
    source = str(Path(__file__).resolve().parents[3])
    pairs = [(str(workbook_root()), "."), (source, "[perfkit]"), (sys.prefix, "[python]"), (sys.base_prefix, "[python]"),
             (os.path.realpath(sys.prefix), "[python]"), (tempfile.gettempdir(), "[tmp]"),
             (str(Path.home()), "~"), (os.getcwd(), ".")]
    seen = {p: r for p, r in pairs if len(p) > 1}
    return sorted(seen.items(), key=lambda pr: -len(pr[0]))


def scrub_paths(nb):
    """A copy of ``nb`` whose outputs (text, HTML, errors) name no absolute local path."""
    nb = copy.deepcopy(nb)
    prefixes = local_prefixes()
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            _scrub_output(output, prefixes)
    return nb


def _scrub_output(output, prefixes) -> None:
    if "text" in output:
        output["text"] = _scrub(output["text"], prefixes)
    if "traceback" in output:
        output["traceback"] = [_scrub(line, prefixes) for line in output["traceback"]]
    if "evalue" in output:
        output["evalue"] = _scrub(output["evalue"], prefixes)
    for mime in ("text/plain", "text/html", "text/markdown"):
        if mime in output.get("data", {}):
            output["data"][mime] = _scrub(output["data"][mime], prefixes)


def _scrub(text, prefixes):
    joined = "".join(text) if isinstance(text, list) else str(text)
    for path, placeholder in prefixes:
        # Not inside base64 data (a data: URI can hold "/tmp" by chance), and only whole folders; a
        # traceback's colour code ("\x1b[0;32m/home/...") ends in a letter and still starts a path.
        joined = re.sub(r"(?:(?<=\x1b\[[0-9;]m)|(?<=\x1b\[[0-9;]{2}m)|(?<=\x1b\[[0-9;]{3}m)|(?<=\x1b\[[0-9;]{4}m)"
                        r"|(?<![A-Za-z0-9+/=_.-]))" + re.escape(path) + r"(?![A-Za-z0-9_.-])", placeholder, joined)
    return joined
