"""The streaming parser: chunk cuts that must be re-made, truncation at any byte, errors that say
where, and the same tables whatever the chunk size, the layout or the number of workers."""
import gzip
import json
import zlib

import pandas as pd
import pytest

from perfkit.errors import ParameterError, TraceError, TruncatedTraceError
from perfkit.trace import load_trace
from perfkit.trace.loader.parse import parse_trace
from perfkit.trace.loader.scan import scan


def events(n: int, **extra_args) -> list[dict]:
    out = []
    for i in range(n):
        out.append({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", "pid": 1, "tid": 2,
                    "ts": 1000 + 10 * i, "dur": 5, "args": {"External id": i + 1, **extra_args}})
        out.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1002 + 10 * i, "dur": 3,
                    "args": {"correlation": i + 1, "device": 0, "stream": 7}})
    return out


def trace_doc(evs: list[dict]) -> dict:
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}], "traceEvents": evs,
            "traceName": "t", "baseTimeNanoseconds": 17}


def write(tmp_path, name: str, doc, *, indent=None) -> object:
    path = tmp_path / name
    text = json.dumps(doc, indent=indent).encode()
    path.write_bytes(gzip.compress(text, 1) if name.endswith(".gz") else text)
    return path


def tables(path, **kw):
    trace = load_trace(path, use_cache=False, **kw)
    return trace.events, trace.flows


def assert_same(a, b):
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y)


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr("perfkit.trace.loader.parse.CHUNK_BYTES", 2048)


@pytest.mark.parametrize("trap", [
    {"note": "a}, {\"b\": 1}, {\"c"},  # the fast cut's pattern inside a string
    {"shapes": [{"a": 1}, {"b": [2, {"c": 3}]}]},  # ... and between objects nested in args
    {"note": "back\\slash \\\" }, {\"x\" \\\\"},  # escaped quotes and backslashes around it
])
@pytest.mark.parametrize("workers", [1, 2])
def test_cuts_inside_strings_or_nested_objects_are_remade_exactly(tmp_path, small_chunks, trap, workers):
    doc = trace_doc(events(300, **trap))
    expected = tables(write(tmp_path, "whole.json", doc), workers=1)
    for name, indent in (("t.json", None), ("t.json.gz", 2)):
        got = tables(write(tmp_path, name, doc, indent=indent), workers=workers)
        assert_same(got, expected)
    assert len(expected[0]) == 600


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_chunk_size_and_workers_do_not_change_the_tables(tmp_path, monkeypatch, name):
    monkeypatch.setattr("perfkit.trace.loader.stream.BLOCK_BYTES", 4096)  # many blocks: gzip's pass through the slots
    path = write(tmp_path, name, trace_doc(events(2000)))
    expected = tables(path, workers=1)
    for chunk in (1000, 4096, 50_000):
        monkeypatch.setattr("perfkit.trace.loader.parse.CHUNK_BYTES", chunk)
        assert_same(tables(path, workers=2), expected)


def test_an_event_longer_than_a_shared_slot_leaves_room_for_none(tmp_path, monkeypatch):
    """A gzip file's chunks are inflated straight into shared slots (a chunk's size plus 5 MiB):
    an event longer than that sends the rest of the file down the general path, same tables."""
    monkeypatch.setattr("perfkit.trace.loader.parse.CHUNK_BYTES", 4096)
    monkeypatch.setattr("perfkit.trace.loader.stream.BLOCK_BYTES", 1 << 20)
    evs = events(3000)
    evs[2500]["args"]["note"] = "x" * (6 << 20)
    path = write(tmp_path, "t.json.gz", trace_doc(evs))
    expected = tables(path, workers=1)
    assert_same(tables(path, workers=2), expected)
    assert len(expected[0]) == 6000


def test_metadata_before_and_after_the_events_is_read(tmp_path, small_chunks):
    trace = load_trace(write(tmp_path, "t.json", trace_doc(events(200))), use_cache=False)
    assert trace.files[0].trace_name == "t" and trace.files[0].base_time_ns == 17
    assert trace.files[0].devices == ({"id": 0, "name": "GPU"},)


def test_concatenated_gzip_members_and_a_byte_order_mark(tmp_path):
    text = b"\xef\xbb\xbf" + json.dumps(trace_doc(events(50))).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:700]) + gzip.compress(text[700:]))
    assert len(load_trace(path, use_cache=False).events) == 100


def test_truncated_at_any_byte_salvages_exactly_the_complete_events(tmp_path, small_chunks):
    text = json.dumps(trace_doc(events(20)), indent=1).encode()
    start = text.index(b'"traceEvents"')
    ends = scan(text, text.index(b"[", start) + 1).ends.tolist()
    for cut in range(start, len(text) - 40, 13):
        path = tmp_path / "cut.json"
        path.write_bytes(text[:cut])
        complete = sum(end <= cut for end in ends)
        if complete == 0:
            with pytest.raises(TraceError, match="no complete event"):
                load_trace(path, use_cache=False)
            continue
        with pytest.raises(TruncatedTraceError) as info:
            load_trace(path, use_cache=False)
        assert info.value.recoverable == complete
        parsed = parse_trace(path, salvage=True)
        assert parsed.columns.n_seen == complete, cut
        assert parsed.meta == {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU"}]}


def test_truncated_gzip_with_salvage_keeps_what_inflates(tmp_path):
    data = gzip.compress(json.dumps(trace_doc(events(400))).encode())
    path = tmp_path / "t.json.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(TraceError, match="gzip data is truncated"):
        load_trace(path, use_cache=False)
    trace = load_trace(path, use_cache=False, salvage=True)
    assert 0 < len(trace.events) < 800
    assert any("gzip stream truncated" in w for w in trace.warnings)
    assert any("cut off mid-write" in w for w in trace.warnings)


def test_truncated_gzip_salvaged_by_workers_keeps_the_same_events(tmp_path, small_chunks, monkeypatch):
    monkeypatch.setattr("perfkit.trace.loader.stream.BLOCK_BYTES", 4096)  # blocks pass through the shared slots
    data = gzip.compress(json.dumps(trace_doc(events(3000)), indent=1).encode())
    path = tmp_path / "t.json.gz"
    path.write_bytes(data[: len(data) * 2 // 3])
    one = load_trace(path, use_cache=False, salvage=True, workers=1)
    two = load_trace(path, use_cache=False, salvage=True, workers=2)
    assert_same((two.events, two.flows), (one.events, one.flows))
    assert 1000 < len(two.events) < 6000 and two.warnings == one.warnings


def test_a_bad_event_deep_in_a_big_file_is_named_by_its_index(tmp_path, small_chunks):
    evs = events(500)
    evs[777] = 42
    err = pytest.raises(TraceError, load_trace, write(tmp_path, "t.json", trace_doc(evs)), use_cache=False).value
    assert "traceEvents[777] is int, not an event object" in str(err)
    evs[777] = {"ph": "X", "name": ["a", "list"], "ts": 1, "dur": 1}
    err = pytest.raises(TraceError, load_trace, write(tmp_path, "t.json", trace_doc(evs)), use_cache=False).value
    assert "traceEvents[777] has a field of an unexpected type (name:" in str(err)


def test_broken_json_deep_in_a_big_file_says_at_which_byte(tmp_path, small_chunks):
    text = json.dumps(trace_doc(events(500))).encode()
    at = text.index(b'"aten::op3"', len(text) // 2)
    path = tmp_path / "t.json"
    path.write_bytes(text[:at] + b"?" + text[at + 1:])
    err = pytest.raises(TraceError, load_trace, path, use_cache=False).value
    assert f"(byte {at:,})" in str(err) and "not valid JSON" in str(err)


def test_invalid_utf8_deep_in_a_big_file(tmp_path, small_chunks):
    text = json.dumps(trace_doc(events(500))).encode()
    at = text.index(b"aten::op5", len(text) // 2)
    path = tmp_path / "t.json"
    path.write_bytes(text[:at] + b"\xff" + text[at + 1:])
    assert "not valid UTF-8" in str(pytest.raises(TraceError, load_trace, path, use_cache=False).value)


@pytest.mark.parametrize("text, needle", [
    (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}], "x": tru}', "not valid"),
    (b'[{"ph": "X", "name": "a", "ts": 1, "dur": 1}] trailing', "text after the array"),
    (b'{"traceEvents": {"ph": "X"}}', "traceEvents is dict"),
    (b'{"meta": {"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]}}', "not a key of the top-level"),
])
def test_malformed_documents(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_bytes(text)
    assert needle in str(pytest.raises(TraceError, load_trace, path, use_cache=False).value)


def test_unreadable_file_is_a_trace_error(tmp_path, monkeypatch):
    def refuse(path):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("perfkit.trace.loader.stream.is_gzip", refuse)  # chmod 0 does not stop root
    err = pytest.raises(TraceError, load_trace, write(tmp_path, "t.json", trace_doc(events(3))), use_cache=False).value
    assert "cannot read the file (Permission denied)" in str(err)


@pytest.mark.parametrize("workers", [0, -1, 1.5, "2", True])
def test_workers_must_be_a_positive_whole_number(tmp_path, workers):
    with pytest.raises(ParameterError, match="workers="):
        load_trace(write(tmp_path, "t.json", trace_doc(events(3))), workers=workers)


def test_scan_finds_events_strings_and_the_array_end():
    text = b'{"a": "}]\\"{"}, {"b": [[1], {"c": 2}]} ] , "tail": 1}'
    structure = scan(text)
    assert structure.ends.tolist() == [14, 38] and structure.close == 39
    assert structure.max_depth == 3 and structure.complete
    cut = scan(b'{"a": 1}, {"b": "x')
    assert cut.ends.tolist() == [8] and cut.close == -1 and not cut.complete


def test_inflater_reads_a_stream_that_is_not_a_multiple_of_its_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr("perfkit.trace.loader.stream.BLOCK_BYTES", 1000)
    monkeypatch.setattr("perfkit.trace.loader.stream._READ_BYTES", 333)
    doc = trace_doc(events(300))
    path = tmp_path / "t.json.gz"
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    path.write_bytes(deflate.compress(json.dumps(doc).encode()) + deflate.flush())
    assert len(load_trace(path, use_cache=False).events) == 600


def test_plain_file_shrinking_while_workers_read_it(tmp_path, small_chunks, monkeypatch):
    """Workers read their byte ranges of a plain file themselves: one that finds the file shorter
    than when it was cut reports it, and the load ends as for any truncated file."""
    import os

    from perfkit.trace.loader import parse

    path = write(tmp_path, "t.json", trace_doc(events(2000)))
    range_cuts, calls = parse.range_cuts, []

    def shrink_after_three_cuts(fd, start, size, *args):
        for cut in range_cuts(fd, start, size, *args):
            calls.append(cut)
            if len(calls) == 3:
                os.truncate(path, size // 2)
            yield cut

    monkeypatch.setattr(parse, "range_cuts", shrink_after_three_cuts)
    with pytest.raises(TruncatedTraceError):
        load_trace(path, use_cache=False, workers=2)
    assert len(calls) >= 3
