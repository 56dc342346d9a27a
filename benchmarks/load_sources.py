"""The large traces ``bench_load`` measures, built from the shared real ones in every layout.

Each source is a real trace replicated to at least the asked number of events (timestamps shifted so
that copies follow each other, ids offset so that correlations and flows stay unique):

- ``a100``: the A100 trace of HTA's trace-diff example (no stacks, 31% flow events);
- ``v100``: the V100 ResNet-50 trace of Kineto's samples (``record_shapes``, ``with_stack``: heavy
  args, call stacks; 24% flow events, 17% ``[memory]`` instants without a category);
- ``flows``: shaped like the V100 training trace of issue 41, whose events cost twice as much to
  decode as the two above: the V100 side of HTA's trace-diff example (no stacks, 2-13 args an event,
  ~250 bytes an event), with a ``cpu_instant_event`` ``[memory]`` event (modern Kineto's, taken in
  turn from the H100 TimeSformer trace) inside every second ``cpu_op``: 30% flow events, 13% instants;
- ``resolver``: that V100 training trace itself, from HTA's ``tests/data/df_index_resolver`` (216,092 events: 26%
  ``cpu_op``, 20% ``cuda_runtime``, 30% flows, 13% ``cpu_instant_event``, 9% kernels with ten args each, 16-digit
  whole-microsecond timestamps, which the replication shifts into floats such as ``1669783687464181.0``).

Each is written in three layouts (Kineto's pretty-printed multi-line events, one event a line,
json.dump's single line with ", " separators), plain and gzip at once.
"""
from __future__ import annotations

import gzip
import itertools
import json
import os
import zlib
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PERFKIT_SHARED", ROOT.parent / "shared")) / "traces" / "public"
SOURCES = {
    "a100": "hta_trace_diff__control__control.json.gz",
    "v100": "kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz",
    "flows": "hta_trace_diff__test__test.json.gz",
    # HTA's V100 training trace (tests/data/df_index_resolver): 30% flows, 13% [memory] instants, kernels with ten
    # args, 16-digit timestamps written as floats once shifted (issue 52: 2.8 us an event where "flows" cost 1.4)
    "resolver": "hta_df_index_resolver__df_index_resolver.json.gz",
}
MEMORY_EVENTS = "tracelens_h100_timesformer_infer_bf16.json.gz"  # cpu_instant_event [memory] events
LAYOUTS = ("pretty", "lines", "compact")
ID_STRIDE = 10_000_000  # a copy's ids start this far past the previous copy's


def source_files(trace: str) -> list[Path]:
    """The shared trace files ``trace`` is built from."""
    return [SHARED / SOURCES[trace]] + ([SHARED / MEMORY_EVENTS] if trace == "flows" else [])


def source(trace: str) -> tuple[dict, list[dict]]:
    """(the document's other keys, its events) of one source, before replication."""
    doc = _read(SHARED / SOURCES[trace])
    events = doc.pop("traceEvents")
    if trace == "flows":
        memory = [e for e in _read(SHARED / MEMORY_EVENTS)["traceEvents"]
                  if e.get("ph") == "i" and e.get("cat") == "cpu_instant_event"]
        events = with_memory_events(events, memory)
    return doc, events


def with_memory_events(events: list[dict], memory: list[dict]) -> list[dict]:
    """``events`` with a copy of one of ``memory`` (in turn) after every second cpu_op, on its
    thread halfway through it, as the profiler records an allocation inside an op."""
    out, supply, ops = [], itertools.cycle(memory), 0
    for e in events:
        out.append(e)
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops += 1
            if ops % 2 == 0:
                out.append(dict(next(supply), pid=e["pid"], tid=e["tid"], ts=e["ts"] + e.get("dur", 0) // 2))
    return out


def _read(path: Path) -> dict:
    data = path.read_bytes()
    return orjson.loads(gzip.decompress(data) if path.suffix == ".gz" else data)


def build_source(trace: str, min_events: int, writers: dict) -> int:
    """Write the source ``trace`` replicated to ``min_events`` events through each layout writer;
    returns the count."""
    return replicate(*source(trace), min_events, writers)


def build(path: Path, min_events: int, writers: dict) -> int:
    """Write the trace file at ``path`` replicated to ``min_events`` events through each layout
    writer; returns the count."""
    doc = _read(path)
    return replicate(doc, doc.pop("traceEvents"), min_events, writers)


def replicate(doc: dict, events: list[dict], min_events: int, writers: dict) -> int:
    """Write ``events`` (with ``doc``'s other keys) replicated to ``min_events`` events through each
    layout writer; returns the count."""
    stamped = [e for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(e["ts"] + e.get("dur", 0) for e in stamped) - min(e["ts"] for e in stamped) + 1000
    for writer in writers.values():
        writer.start(doc)
    written = 0
    for k in range(-(-min_events // len(events))):
        for e in events:
            if k and e.get("ph") == "M":
                continue
            e = shift(e, k, span)
            for writer in writers.values():
                writer.event(e, first=not written)
            written += 1
    for writer in writers.values():
        writer.close()
    return written


class LayoutWriter:
    """Writes one layout, plain and gzip at once: ``pretty`` (Kineto's: each event over several
    lines), ``lines`` (one event a line) or ``compact`` (one line, json.dump's separators)."""

    def __init__(self, layout: str, plain: Path, gz: Path):
        self.layout = layout
        self.plain, self.gz = open(plain, "wb"), open(gz, "wb")
        self.deflate = zlib.compressobj(6, zlib.DEFLATED, 31)

    def write(self, data: bytes) -> None:
        self.plain.write(data)
        self.gz.write(self.deflate.compress(data))

    def start(self, meta: dict) -> None:
        head = json.dumps(meta) if self.layout == "compact" else orjson.dumps(meta, option=orjson.OPT_INDENT_2).decode()
        sep = ", " if self.layout == "compact" else ",\n  "
        self.write((head[:-1].rstrip() + sep + '"traceEvents": [' + ("" if self.layout == "compact" else "\n")).encode())

    def event(self, e: dict, first: bool) -> None:
        if self.layout == "compact":
            self.write((b"" if first else b", ") + json.dumps(e).encode())
        elif self.layout == "lines":
            self.write((b"" if first else b",\n") + orjson.dumps(e))
        else:
            body = orjson.dumps(e, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n  ")
            self.write((b"  " if first else b",\n  ") + body)

    def close(self) -> None:
        self.write(b"]}" if self.layout == "compact" else b"\n]}\n")
        self.gz.write(self.deflate.flush())
        self.plain.close()
        self.gz.close()


def shift(e: dict, k: int, span: float, *, renumber_steps: bool = False) -> dict:
    """Event ``e`` as the ``k``-th copy of its trace: ``k * span`` us later, its flow, correlation,
    External and Python ids moved past the other copies' (and, ``renumber_steps``, ``ProfilerStep#N``
    renamed ``ProfilerStep#N+k``, for a trace of ``k`` times the steps)."""
    if not k:
        return e
    e = dict(e)
    if isinstance(e.get("ts"), (int, float)):
        e["ts"] = e["ts"] + k * span
    name = e.get("name")
    if renumber_steps and isinstance(name, str) and name.startswith("ProfilerStep#"):
        e["name"] = f"ProfilerStep#{int(name.split('#')[1]) + k}"
    if e.get("ph") in ("s", "f") and isinstance(e.get("id"), int):
        e["id"] = e["id"] + k * ID_STRIDE
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id", "external id", "Python id", "Python parent id"):
            if isinstance(args.get(key), int):
                args[key] += k * ID_STRIDE
        e["args"] = args
    return e
