"""Reports: what turns perfkit's results into something a person reads, shares and tracks.

Layout (arrows point to what a module may import; nothing points back up):

* ``perflog/`` (``store`` <- ``judge`` <- ``log``): the performance log and its regression rule.
* ``registry`` (the investigation notebooks and how a notebook file is read) <- ``workbook``
  (where notebooks, reports and the perf log live; ``perfkit init``).
* Notebook helpers, each named for what it does: ``inputs`` (the trace or live run an
  investigation reads), ``rows`` (its headline metrics as perf-log rows), ``card`` (the first
  screen: verdict, 3 numbers, top fix), ``prose`` (numbers read back in words), ``tables``
  (small tables), ``plots/`` (figures) and ``widgets`` (the JupyterLab trace explorer).
* ``terminal/``: what each ``perfkit <command>`` prints, one module per command (docs/layout.md: text for
  people has one home, here).
* ``publish/`` (``kernel``, ``records``, ``html`` <- ``index`` <- ``runner``): notebooks run into
  dated reports, their shareable HTML and the reports index.

Everything here reads ``perfkit.trace`` and ``perfkit.analysis``; it never imports torch, ``perfkit.bench``,
``perfkit.workloads``, ``perfkit.detect`` or ``perfkit.cli`` (docs/layout.md, ``tests/test_layout.py``).
"""
