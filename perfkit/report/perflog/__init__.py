"""The performance log: a versioned, append-only CSV of headline metrics, one row per metric per
run, each judged against the previous run of the same investigation (``judge``).

``store`` reads and appends the file (and nothing else does), ``judge`` holds the regression rule,
``log`` the ``PerfLog`` class people and notebooks use.
"""
from .judge import MIN_EFFECT, RUN_METRICS, RUN_TO_RUN, VERDICTS, Z, infer_higher_is_better
from .log import PerfLog, display_frame, format_delta, format_value, markdown_table, new_run_id
from .store import COLUMNS, FORMAT_VERSION, PerfLogError, empty_log

__all__ = ["PerfLog", "PerfLogError", "COLUMNS", "FORMAT_VERSION", "VERDICTS", "MIN_EFFECT", "RUN_METRICS",
           "RUN_TO_RUN", "Z", "empty_log", "infer_higher_is_better", "markdown_table", "display_frame",
           "format_value", "format_delta", "new_run_id"]
