"""What perfkit refuses to read, in one place: resource budgets with an environment variable each,
and the value ranges a trace event must fall in.

A budget stops a small hostile or broken file from costing unbounded memory or time (a gzip bomb,
a pickle whose lists repeat one reference millions of times, an expression nested 200,000 deep).
Each is a :class:`Limit`: read ``LIMIT.value()`` at the moment of use (so a changed environment
takes effect), and refuse with ``LIMIT.refusal(what)``, which names the variable to raise.

The ranges are not budgets but the bounds inside which perfkit's numbers stay exact; they have no
override. Events outside them are dropped and counted (see :mod:`perfkit.trace.loader.columns`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import ParameterError


MOST = 2**62  # the largest value a budget variable takes


@dataclass(frozen=True)
class Limit:
    """A budget: ``env`` names the variable that overrides ``default`` (a positive integer in ``unit``)."""

    env: str
    default: int
    unit: str
    guards: str

    def value(self) -> int:
        """The budget in force; raises ParameterError when the variable is set to something unusable: not a
        whole number (``lots``, ``1e9``, ``4GB``), 0 or less, or past ``MOST`` (2**62: every budget is compared
        with, or passed on as, a 64-bit integer, and ``PERFKIT_SQL_MAX_ROWS=2**64`` broke DuckDB's LIMIT)."""
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            value = int(raw.replace("_", ""))
        except ValueError:
            value = 0
        if not 0 < value <= MOST:
            raise ParameterError(f"{self.env}={raw[:40]!r}: expected a whole number of {self.unit} from 1 to 2**62 "
                                 f"(unset it for the default, {self.default:,})")
        return value

    def refusal(self, what: str) -> str:
        """``"<what>: more than the limit of N <unit> (PERFKIT_X), which guards ...; ..."``: the
        problem text of an error, saying how to raise the limit."""
        return (f"{what}: more than the limit of {self.value():,} {self.unit} ({self.env}), which guards "
                f"{self.guards}; if the file is genuine, raise it, e.g. {self.env}={min(self.value() * 4, MOST)}")


MAX_DECOMPRESSED_BYTES = Limit(
    "PERFKIT_MAX_DECOMPRESSED_BYTES", 4 << 30, "bytes",
    "against gzip bombs (a few MB that inflate to many GB)")
MAX_NESTING_DEPTH = Limit(
    "PERFKIT_MAX_NESTING_DEPTH", 200, "levels",
    "against input nested deeper than any real trace or program (JSON args and metadata; "
    "Python expressions and folders in `perfkit scan`)")
SNAPSHOT_MAX_ITEMS = Limit(
    "PERFKIT_SNAPSHOT_MAX_ITEMS", 10_000_000, "items",
    "the expansion of a memory snapshot (segments + blocks + history events + their stack frames; "
    "a pickle can repeat one list by reference millions of times in a few hundred bytes)")
# Python's syntax tree costs 200-500 bytes of memory per byte of source: a 15 MB file took 3.2 GB and
# 87 s, a 2 MiB file of dense code (`[1,1,...]`) takes 1.1 GB and 20 s; PyTorch's largest file is 1.4 MB.
SCAN_MAX_FILE_BYTES = Limit(
    "PERFKIT_SCAN_MAX_FILE_BYTES", 2 << 20, "bytes",
    "the memory `perfkit scan` spends parsing one source file (200-500 bytes per byte of source)")
SQL_TIMEOUT_S = Limit(
    "PERFKIT_SQL_TIMEOUT_S", 300, "seconds",
    "how long one `perfkit sql` query may run (`SELECT count(*) FROM range(1e14)` would run for hours)")
SQL_MAX_ROWS = Limit(
    "PERFKIT_SQL_MAX_ROWS", 1_000_000, "rows",
    "the memory of a `perfkit sql` result turned into a DataFrame (`SELECT * FROM range(300000000)` would be GBs)")


# Budgets of the streaming trace parser (perfkit.trace.loader.parse).
MAX_METADATA_BYTES = Limit(
    "PERFKIT_MAX_METADATA_BYTES", 64 << 20, "bytes",
    "the JSON outside the traceEvents array (deviceProperties, distributedInfo, ...), which is read whole; "
    "a real trace has a few KB there")
MAX_EVENT_BYTES = Limit(
    "PERFKIT_MAX_EVENT_BYTES", 64 << 20, "bytes",
    "how far past a chunk's 8 MiB the parser reads to find the end of an event (real events are under 1 MB)")


def _half_of_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


MAX_TABLE_BYTES = Limit(
    "PERFKIT_MAX_TABLE_BYTES", _half_of_memory(), "bytes",
    "the memory of a loaded trace's tables (about 100 bytes per event; default: half of this machine's RAM)")


# Event value ranges (inclusive). 2**53 us (285 years) is where float64 stops holding whole
# microseconds; ids are stored as int64 (device int16, stream int32: schema.INT_COLUMNS).
TIME_RANGE_US = (0, 2**53 - 1)
# An event lasts at most a week: a profiler window covers seconds to hours, so a longer 'dur' (a 1e15 us
# kernel in a 3 ms trace read "GPU busy 1,000,000,000,000 ms") is a broken value, dropped and counted.
DUR_RANGE_US = (0, 7 * 24 * 3600 * 10**6)
INT64_RANGE = (-(2**63), 2**63 - 1)
ID_RANGES = {
    "device": (-1, 2**15 - 1),
    "stream": (-1, 2**31 - 1),
    "correlation": (-1, 2**63 - 1),
    "external_id": (-1, 2**63 - 1),
    "python_id": (-1, 2**63 - 1),
    "python_parent": (-1, 2**63 - 1),
    "bytes": (-1, 2**63 - 1),
    "alloc_bytes": INT64_RANGE,
    "id": INT64_RANGE,
}
# Kineto writes the unsigned 32-bit -1 for "every stream" (e.g. Context Sync): read as -1, not dropped.
STREAM_ALL = 2**32 - 1
RANK_RANGE = (0, 2**31 - 1)


def span(bounds: tuple) -> str:
    """``"-1..2**63-1"``: a range as the docs write it (powers of two spelled as such)."""
    return "..".join(_power(b) for b in bounds)


def _power(n: int) -> str:
    for k in (15, 31, 32, 53, 63):
        if abs(n) == 2**k:
            return f"{'-' if n < 0 else ''}2**{k}"
        if n == 2**k - 1:
            return f"2**{k}-1"
    return str(n)
