"""What decoding a trace costs by kind of event, for ``bench_load``'s phase lines.

A first load decodes mixed chunks in worker processes, so its phase times cannot say which kind of
event is slow. Here the start of a file (:data:`SAMPLE_BYTES` of its JSON, inflated, in the file's
own layout: a whole copy of each replicated source, whose flows and GPU events come after its CPU
ops) is cut into its events (exactly, with the loader's scanner), the events are sorted by kind (X:
complete events; flow: ph s/f/t; instant: ph i/I; other), and up to :data:`PER_KIND` events of each
kind, joined with the file's own separator, are decoded as the loader decodes a chunk: by the decoder
in use (perfkit's C extension where it is built, else msgspec's typed decode; ``PERFKIT_DECODER``
picks), then column building. "all" is a loader-sized chunk of the events in file order. The
figures are CPU microseconds an event, best of three, in this process (one thread, no workers).
"""
from __future__ import annotations

import gzip
import time
from pathlib import Path

import orjson

from perfkit.trace.loader.columns import ColumnBuilder
from perfkit.trace.loader import native
from perfkit.trace.loader.events import EVENTS
from perfkit.trace.loader.fields import EventFields
from perfkit.trace.loader.metadata import EVENTS_KEY
from perfkit.trace.loader.parse import CHUNK_BYTES
from perfkit.trace.loader.scan import scan

SAMPLE_BYTES = 48 << 20
PER_KIND = 30_000
KINDS = {"X": "X", "s": "flow", "f": "flow", "t": "flow", "i": "instant", "I": "instant"}


def first_events(path: Path, size: int = SAMPLE_BYTES) -> tuple[list[bytes], bytes]:
    """(the raw bytes of each complete event in the first ``size`` bytes of the traceEvents array,
    the separator the file writes between two events)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        head = fh.read(size + (1 << 20))
    start = EVENTS_KEY.search(head).end()
    start += len(head[start:]) - len(head[start:].lstrip())
    ends = scan(head, start, min(len(head), start + size)).ends.tolist()
    events, begin = [], start
    for end in ends:
        events.append(head[begin:end])
        gap = head[end:end + 64]
        begin = end + len(gap) - len(gap.lstrip(b" \t\r\n,"))
    separator = head[ends[0]:ends[0] + 64]
    return events, separator[:len(separator) - len(separator.lstrip(b" \t\r\n,"))]


def by_kind(path: Path) -> dict[str, tuple[float, float, float]]:
    """Per kind of event (and "all"): (share of the sampled events, decode us an event,
    column-building us an event)."""
    events, separator = first_events(path)
    groups: dict[str, list[bytes]] = {}
    for raw in events:
        groups.setdefault(KINDS.get(orjson.loads(raw).get("ph"), "other"), []).append(raw)
    share = {kind: len(group) / len(events) for kind, group in groups.items()}
    groups = {kind: group[:PER_KIND] for kind, group in groups.items()}
    size, groups["all"] = 0, []
    for raw in events:  # a chunk the size the loader cuts
        groups["all"].append(raw)
        size += len(raw)
        if size >= CHUNK_BYTES:
            break
    share["all"] = 1.0
    return {kind: (share[kind], *_costs(b"[" + separator.join(group) + b"]", len(group)))
            for kind, group in groups.items()}


def _costs(chunk: bytes, n: int) -> tuple[float, float]:
    """(decode, column building) CPU us an event of ``chunk``, by the decoder the loader would use on it."""
    if native.chosen() == "native" and not isinstance(native.decode(chunk), str):
        decode = _best(lambda: native.decode(chunk))
        both = _best(lambda: ColumnBuilder(file_id=0, rank=0).add(native.decode(chunk)))
        return decode / n * 1e6, max(both - decode, 0.0) / n * 1e6
    batch = EVENTS.decode(chunk)
    decode = _best(lambda: EVENTS.decode(chunk))
    columns = _best(lambda: ColumnBuilder(file_id=0, rank=0).add(EventFields(batch)))
    return decode / n * 1e6, columns / n * 1e6


def _best(work, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def line(costs: dict[str, tuple[float, float, float]]) -> str:
    """The phase line: each kind's share of the events and its decode + columns cost (kinds under
    1% of the events left out: a batch of a few events costs mostly its fixed overhead)."""
    return f"    decode by kind ({native.chosen()} decoder), us an event (decode + columns): " + ", ".join(
        f"{kind} {share:.0%} {d:.2f}+{c:.2f}" for kind, (share, d, c) in
        sorted(costs.items(), key=lambda kv: (kv[0] == "all", -kv[1][0])) if share >= 0.01)
