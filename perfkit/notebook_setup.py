"""The set-up a case-study notebook starts with, in one call (notebook glue: it sits above
``bench`` and ``report``, beside the CLI): ``open_case`` sets the thread count
and quiets the profiler's log for the live runs, loads the before and after ``Source`` (two trace
files, or two variants recorded now), and names the pair's perf-log subject and run id."""
from __future__ import annotations

from typing import NamedTuple

from .bench.live import load_pair, quiet_profiler_log, use_threads
from .report.pair import pair_subject
from .report.perflog import new_run_id
from .workbook import Source


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
