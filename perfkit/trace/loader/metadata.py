"""The JSON around a trace's events: the top-level keys before and after ``traceEvents``.

The streaming parser (:mod:`perfkit.trace.loader.parse`) keeps the text before the events array
(``{..., "traceEvents":``, the *header*) and after it (the *trailer*); these functions turn them into
the metadata dict, check their nesting depth without recursion, and say what is wrong with a
document that has no events array at all. Each raises :class:`TraceError` naming the file.
"""
from __future__ import annotations

import re
from pathlib import Path

import orjson

from ...errors import TraceError
from ...limits import MAX_NESTING_DEPTH
from .scan import open_depth, scan
from .values import short_repr

EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
REPORT_FIX = "Re-export the trace with torch.profiler (prof.export_chrome_trace or tensorboard_trace_handler)"
CUT_OFF = "JSON ends mid-write and no complete event can be recovered"
_SPACE = b" \t\r\n"


def check_depth(path: Path, depth: int, where: str) -> None:
    """Raise when ``depth`` levels of nesting exceed MAX_NESTING_DEPTH."""
    if depth > MAX_NESTING_DEPTH.value():
        raise TraceError(path, MAX_NESTING_DEPTH.refusal(f"JSON nested {depth:,} levels deep ({where})"),
                         "A profiler trace nests fewer than 10 levels: this file is corrupt or not a trace")


def around_events(path: Path, header: bytes, trailer: bytes) -> dict | None:
    """The top-level keys other than traceEvents; None when the trailer is cut off mid-write."""
    check_depth(path, scan(header).max_depth, "in the JSON before traceEvents")
    check_depth(path, scan(trailer).max_depth + 1, "in the JSON after traceEvents")
    text = header + b"[]" + trailer
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("unexpected end of data"):
            return None  # every event is whole, the keys after them are not
        doc = load_json(path, text, "the JSON around traceEvents is not valid")
    if isinstance(doc, dict) and doc.get("traceEvents") != []:  # a later key of the same name took its place
        raise TraceError(path, "the top-level object has the key traceEvents twice: perfkit read the first "
                         "array; which one is the trace cannot be told (two traces joined into one file?)",
                         "keep one traceEvents array, or split the file into one trace per array")
    if not isinstance(doc, dict):
        raise TraceError(path, "traceEvents is not a key of the top-level JSON object", REPORT_FIX)
    del doc["traceEvents"]
    return doc


def top_level_events_key(data, first: int, start: int | None = None):
    """The match of the first ``"traceEvents": [`` in ``data`` from ``start`` (default ``first``, the offset of
    the document's opening ``{``) that is a key of the top-level object: one nested in another key's value
    (``{"meta": {"traceEvents": []}, "traceEvents": [...]}``) or inside a string is passed over. None when there
    is none (in the bytes so far)."""
    start = first if start is None else start
    while found := EVENTS_KEY.search(data, start):
        if open_depth(data, first, found.start()) == 1:
            return found
        start = found.start() + 1
    return None


def keys_before(path: Path, header: bytes) -> dict:
    """The metadata keys written before traceEvents (all a truncated file has)."""
    check_depth(path, scan(header).max_depth, "in the JSON before traceEvents")
    keys = header[:header.rfind(b'"traceEvents"')].rstrip(_SPACE + b",")
    try:
        meta = orjson.loads(keys + b"}")
    except orjson.JSONDecodeError:
        return {}
    return meta if isinstance(meta, dict) else {}


def without_events_array(path: Path, text: bytes) -> tuple[dict, list]:
    """(metadata, events) of a whole document in which no ``"traceEvents": [`` was found (held
    whole: it is under MAX_METADATA_BYTES); raises saying what the document is instead."""
    if not text.strip(_SPACE):
        raise TraceError(path, "file is empty (0 bytes of JSON)", REPORT_FIX)
    check_depth(path, scan(text).max_depth, "in a JSON document without a traceEvents array")
    doc = load_json(path, text, "not valid JSON")
    if not isinstance(doc, dict):
        raise TraceError(path, f"JSON top level is {type(doc).__name__}, not a trace object", REPORT_FIX)
    if "traceEvents" not in doc and {"cache_format", "fingerprint", "tables"} <= set(doc):
        raise TraceError(path, "this is an entry of perfkit's trace cache, not a trace (the cache folder, "
                         "PERFKIT_CACHE_DIR, is this trace folder?)", "give the trace itself, and point "
                         "PERFKIT_CACHE_DIR at a folder of its own (default ~/.cache/perfkit)")
    if "traceEvents" not in doc and EVENTS_KEY.search(text):
        raise TraceError(path, "traceEvents is not a key of the top-level JSON object, only nested inside another "
                         f"key's value (top level: {', '.join(sorted(doc)[:8])})", REPORT_FIX)
    if "traceEvents" not in doc:
        keys = ", ".join(sorted(doc)[:8]) or "an empty object"
        raise TraceError(path, f"JSON has no 'traceEvents' list (top level: {keys}); this is not a PyTorch "
                         "profiler trace", "Pass a Chrome trace written by torch.profiler")
    events = doc.pop("traceEvents")
    if not isinstance(events, list):
        raise TraceError(path, f"traceEvents is {type(events).__name__}, not a list of events", REPORT_FIX)
    return doc, events  # a list here means the key was spelled with \\u escapes


def load_json(path: Path, text: bytes, what: str):
    """``orjson.loads(text)``, its failure said as a TraceError: invalid UTF-8, cut off, or ``what``."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        try:
            text.decode("utf-8")
        except UnicodeDecodeError as uexc:
            raise TraceError(path, f"bytes at offset {uexc.start} are not valid UTF-8 ({text[uexc.start:uexc.start + 4]!r})",
                             "The file is corrupt or not a JSON trace; re-export it") from None
        if str(exc).startswith("unexpected end of data"):  # cut off before the first event
            raise TraceError(path, CUT_OFF, REPORT_FIX) from None
        raise TraceError(path, f"{what}: {exc}", REPORT_FIX) from None


def checked_devices(value) -> tuple[list[dict], list[str]]:
    """``deviceProperties`` as a list of dicts whose ``totalGlobalMem`` (if any) is a whole number
    of bytes, and a warning for each part set aside (a number, ``true``, ``"lots"``...)."""
    if value is None or value == []:
        return [], []
    if not isinstance(value, list):
        return [], [f"deviceProperties is {short_repr(value)}, not a list of devices: ignored "
                    "(no device names or memory)"]
    devices = [dict(d) for d in value if isinstance(d, dict)]
    warnings = [] if len(devices) == len(value) else [
        f"deviceProperties: {len(value) - len(devices)} of {len(value)} entries are not objects: ignored"]
    bad = [d.pop("totalGlobalMem") for d in devices if "totalGlobalMem" in d and not _byte_count(d["totalGlobalMem"])]
    if bad:
        warnings.append(f"deviceProperties: totalGlobalMem {short_repr(bad[0])} is not a number of bytes: ignored")
    return devices, warnings


def checked_base_time(value) -> tuple[int | None, list[str]]:
    """``baseTimeNanoseconds`` as an int64 count of nanoseconds, or None with a warning."""
    if value is None or (_byte_count(value) and value <= 2**63 - 1):
        return value, []
    return None, [f"baseTimeNanoseconds {short_repr(value)} is not a whole number of nanoseconds in 0..2**63-1: "
                  "ignored"]


def _byte_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value
