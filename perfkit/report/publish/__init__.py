"""Publishing: notebooks run into dated reports (``runner``, with ``selection``, ``params``,
``staging``, ``execute`` and ``progress``), the shareable HTML of each (``html``), the run record
beside it (``records``), the reports index (``index``) and the kernel they run in (``kernel``)."""
from .index import build_index
from .records import NotebookRun
from .runner import run_all, run_notebook
from .selection import find_notebook

__all__ = ["NotebookRun", "build_index", "find_notebook", "run_all", "run_notebook"]
