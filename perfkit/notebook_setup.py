"""The set-up a notebook starts with, in one call (notebook glue: it sits above ``bench`` and
``report``, beside the CLI).

* ``open_case``: a case study: sets the thread count and quiets the profiler's log for the live
  runs, loads the before and after ``Source`` (two trace files, or two variants recorded now), and
  names the pair's perf-log subject and run id.
* ``open_ab``: an A/B investigation (compile_ab, amp_regression): the notebook's live A/B, or two
  traces diffed, logged to the performance log, with the subject, device, verdict and fix its card
  shows.
"""
from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from .bench.live import load_pair, quiet_profiler_log, use_threads
from .report.pair import pair_subject
from .report.perflog import new_run_id
from .report.prose import ab_verdict
from .report.rows import log_rows
from .report.trace_diff import compare_traces
from .workbook import Source, check_mode


class CaseSetup(NamedTuple):
    """A case study's pair, unpacked by the notebook: ``before, after, subject, run_id, labels``."""

    before: Source
    after: Source
    subject: str
    run_id: str
    labels: tuple[str, str]


def open_case(mode: str, paths: tuple[str, str], *, workload: str, arms: tuple, device: str = "auto",
              threads: int = 0, steps: int = 3, overrides: dict | None = None, run_label: str = "") -> CaseSetup:
    """The before and after of a case study (``live.load_pair`` of ``paths`` or ``arms``), after
    ``live.use_threads(threads)`` and ``live.quiet_profiler_log()``; ``subject`` from
    ``pair.pair_subject``, ``run_id`` = ``run_label`` or a new "DATE/HHMMSS", ``labels`` the arms'.
    Raises ParameterError for a bad mode, path, variant, field or thread count."""
    labels = tuple(a.label for a in arms)
    run_id = run_label or new_run_id()
    use_threads(threads)
    quiet_profiler_log()
    before, after = load_pair(mode, paths, workload=workload, arms=arms, device=device, steps=steps,
                              overrides=overrides)
    return CaseSetup(before, after, pair_subject(mode, before, after, workload, labels), run_id, labels)


class ABSetup(NamedTuple):
    """An A/B investigation's first cell: ``result`` (the A/B result live, the ``DiffResult`` of the
    two traces otherwise), ``ab`` and ``pairing`` (the one that applies, the other None), what the
    card shows, and the rows logged to the performance log."""

    result: object
    ab: object
    pairing: object
    subject: str
    device: str
    verdict: str
    fix: str | None
    logged: pd.DataFrame


def open_ab(investigation: str, mode: str, paths: tuple[str, str], run_live, *, rows_of, what: str,
            perf_log_path: str = "", change: str = "", run_label: str = "") -> ABSetup:
    """``mode="live"``: ``run_live()`` runs the notebook's A/B and returns ``(ab, subject)``; its
    perf-log rows are ``rows_of(ab, subject)`` and its verdict ``ab_verdict(what, ab)``.
    ``mode="trace"``: ``compare_traces(investigation, mode, *paths)``. Either way the rows are
    appended to the performance log (``log_rows``). Raises ParameterError for another mode
    (MissingDependencyError for live mode without torch)."""
    if check_mode(mode) == "live":
        ab, subject = run_live()
        pairing, result, device, verdict, fix = None, ab, ab.device, ab_verdict(what, ab), None
        metrics = rows_of(ab, subject)
    else:
        pairing = compare_traces(investigation, mode, *paths)
        ab, result, subject, device = None, pairing.diff, pairing.subject, pairing.device
        verdict, fix, metrics = pairing.verdict, pairing.fix, pairing.metrics
    logged = log_rows(perf_log_path, metrics, change=change, run_id=run_label)
    return ABSetup(result, ab, pairing, subject, device, verdict, fix, logged)
