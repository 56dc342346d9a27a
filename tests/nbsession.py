"""Execute notebooks in one kernel, many times: the test harness for the notebook loops.

Starting a kernel and importing torch, pandas and matplotlib costs several seconds per notebook;
a loop over 18 traces x 3 notebooks would spend most of its time there. ``KernelSession`` starts
one kernel (this interpreter's ipykernel, inline figures, the runner's kernel manager) and runs
each parameterized notebook in it after ``%reset -f`` (``_RESET``), so every execution starts from
an empty namespace, as it does under ``perfkit run``.
"""
from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path


# %reset -f without its two full garbage collections: with torch, pandas and matplotlib imported the
# kernel tracks millions of objects, and scanning them all twice cost about a fifth of each run of a
# small notebook; the namespace is emptied all the same and the automatic collector still runs.
_RESET = """def _perfkit_reset():
    import gc
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        get_ipython().run_line_magic("reset", "-f")
    finally:
        gc.collect = collect
_perfkit_reset()"""


class NotebookFailed(AssertionError):
    pass


class KernelSession:
    def __init__(self, cwd: Path):
        import nbformat
        from nbclient import NotebookClient

        from perfkit.report.publish.kernel import kernel_manager_class, quiet_kernel_output

        self._quiet = quiet_kernel_output(cwd / "kernel.log")
        self._quiet.__enter__()
        self.client = NotebookClient(nbformat.v4.new_notebook(), kernel_name="python3", timeout=600,
                                     kernel_manager_class=kernel_manager_class(), resources={"metadata": {"path": str(cwd)}})
        self._ctx = self.client.setup_kernel()
        self._ctx.__enter__()

    def run(self, path: str | os.PathLike, parameters: dict):
        """The executed notebook (a new node); NotebookFailed naming the cell on an error."""
        import nbformat
        from nbclient.exceptions import CellExecutionError
        from papermill.parameterize import parameterize_notebook

        from perfkit.registry import read_notebook

        nb = read_notebook(path)
        nb.metadata["papermill"] = {"parameters": {}}
        nb = parameterize_notebook(nb, parameters)
        self.client.nb = nb
        reset = nbformat.v4.new_code_cell(_RESET)
        self.client.execute_cell(reset, 0)
        for index, cell in enumerate(nb.cells):
            try:
                self.client.execute_cell(cell, index)
            except CellExecutionError as exc:
                raise NotebookFailed(f"{Path(path).name} {parameters}: cell {index} failed:\n{exc}") from None
        return nb

    def close(self) -> None:
        self._ctx.__exit__(None, None, None)
        self._quiet.__exit__(None, None, None)


def outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def html_text(nb) -> str:
    """The notebook's HTML outputs, without the break opportunities (``<wbr>``) html_table puts in long tokens."""
    return "".join(o.get("data", {}).get("text/html", "") for o in outputs(nb)).replace("<wbr>", "")


# Text a report must not show: a fix withheld from a planted problem, numbers that are not numbers.
BAD_TEXT = {"No fix needed": re.compile(r"No fix needed"), "nan": re.compile(r"\bnan\b", re.I),
            "None": re.compile(r"\bNone\b"), "exponent": re.compile(r"\d[eE][+-]\d")}


class _Text(HTMLParser):
    """The text a reader sees in an HTML fragment (no tags, attributes, scripts or styles)."""

    def __init__(self):
        super().__init__()
        self.parts, self._skip = [], 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._skip -= tag in ("script", "style")
        self.parts.append("\n")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def bad_text(nb, *kinds: str) -> dict[str, list[str]]:
    """Each kind of ``BAD_TEXT`` (default: all) that the report of ``nb`` shows, with up to three
    excerpts around it; empty when it shows none."""
    text = rendered_text(nb)
    found = {what: [text[max(m.start() - 60, 0):m.end() + 30] for m in BAD_TEXT[what].finditer(text)][:3]
             for what in kinds or BAD_TEXT}
    return {what: hits for what, hits in found.items() if hits}


def rendered_text(nb) -> str:
    """What the report of ``nb`` shows as text: each output's HTML (else its plain text) and streams."""
    parser = _Text()
    for o in outputs(nb):
        data = o.get("data", {})
        if "text/html" in data:
            parser.feed(data["text/html"])
        else:
            parser.parts.append(data.get("text/plain", "") if data else o.get("text", ""))
        parser.parts.append("\n")
    return "".join(parser.parts)
