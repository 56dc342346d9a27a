"""Issue 54, rules 7 and 8 on the trace's own shape: a multi-member gzip is read whole wherever a member ends
(one ending at a 1 MiB read boundary was cut there: 5,988 of 8,160 events, salvaged as a cut-off file); a
``traceEvents`` key nested in another key before the top-level one is passed over, one given twice is
refused saying so; the cache folder set to the traces folder neither reads its entries as traces nor gives a
puzzling error."""
from __future__ import annotations

import gzip
import json
import zlib

import pytest

from fuzzkit import event, kineto_text, run_main
from perfkit.errors import TraceError
from perfkit.trace import load_trace
from perfkit.trace.loader.stream import _READ_BYTES

N = 8160
EVENTS = [event(name=f"op{i}", ts=1_000 + i, dur=1, args={"pad": "x" * 100}) for i in range(N)]
TEXT = kineto_text(EVENTS)


def _member(data: bytes, level: int = 0) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _split_at(size: int) -> int:
    """The length of TEXT's prefix whose stored (level 0) gzip member is ``size`` bytes or just over."""
    lo, hi = 0, len(TEXT)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if len(_member(TEXT[:mid])) < size else (lo, mid)
    return lo


@pytest.mark.parametrize("delta", [-1, 0, 1, 2])
@pytest.mark.parametrize("reads", [1, 2])
def test_a_gzip_member_ending_at_any_read_boundary_is_followed_by_the_next(tmp_path, reads, delta):
    cut = _split_at(reads * _READ_BYTES + delta)
    path = tmp_path / "multi.json.gz"
    path.write_bytes(_member(TEXT[:cut]) + _member(TEXT[cut:], 6))
    for salvage in (False, True):
        trace = load_trace(path, use_cache=False, salvage=salvage)
        assert len(trace.events) == N and not any("cut off" in w for w in trace.warnings)


def test_many_small_members_and_trailing_zeros_read_whole(tmp_path):
    path = tmp_path / "many.json.gz"
    step = len(TEXT) // 37 + 1
    path.write_bytes(b"".join(gzip.compress(TEXT[i:i + step]) for i in range(0, len(TEXT), step)) + b"\0" * 512)
    assert len(load_trace(path, use_cache=False).events) == N
    out = run_main("annotate", path, "--no-cache", "-o", tmp_path / "a.json")
    out.assert_clean(codes=(0,))
    assert sum(e["name"].startswith("op") for e in json.loads((tmp_path / "a.json").read_text())["traceEvents"]) == N


STEP = event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500)
KERNELS = [event(name=f"k{i}", ts=1_100 + i, dur=2) for i in range(3)]
NESTED_FIRST = {  # a traceEvents key before the top-level one, nested or inside a string
    "object": '{"meta": {"traceEvents": [%s]}, "traceEvents": [%s]}',
    "list": '{"meta": [{"traceEvents": [%s]}], "traceEvents": [%s]}',
    "string": '{"note": "\\"traceEvents\\": [%s", "traceEvents": [%s]}',
    "deep": '{"a": {"b": {"c": {"traceEvents": [%s]}}}, "traceEvents": [%s]}',
}


@pytest.mark.parametrize("shape", sorted(NESTED_FIRST))
def test_a_nested_traceevents_key_before_the_top_level_one_is_passed_over(tmp_path, shape):
    decoy = json.dumps(event(name="decoy", ts=5, dur=1))
    real = ", ".join(json.dumps(e) for e in [STEP, *KERNELS])
    text = NESTED_FIRST[shape] % ((decoy if shape != "string" else "x"), real)
    path = tmp_path / "t.json"
    path.write_text(text)
    trace = load_trace(path, use_cache=False)
    assert sorted(trace.events["name"]) == sorted(["ProfilerStep#1", "k0", "k1", "k2"])
    out = run_main("annotate", path, "--no-cache", "-o", tmp_path / "a.json")
    out.assert_clean(codes=(0,))
    written = json.loads((tmp_path / "a.json").read_text())
    ours = {e["pid"] for e in written["traceEvents"] if e["ph"] == "M" and e["args"].get("name") == "perfkit"}
    assert json.loads(text)["traceEvents"] == [e for e in written["traceEvents"] if e["pid"] not in ours]
    assert {k: v for k, v in written.items() if k != "traceEvents"} == \
        {k: v for k, v in json.loads(text).items() if k != "traceEvents"}  # the nested key is left as it was


@pytest.mark.parametrize("second", ["[]", '[{"ph": "X", "name": "b", "ts": 1, "dur": 1}]', "{}", "null"])
def test_a_traceevents_key_given_twice_is_refused_saying_so(tmp_path, second):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [%s], "other": 1, "traceEvents": %s}' % (json.dumps(STEP), second))
    if second == "[]":  # the same as one array and an empty one: orjson keeps the last, which is []
        load_trace(path, use_cache=False)
        return
    with pytest.raises(TraceError, match="has the key traceEvents twice.*keep one traceEvents array"):
        load_trace(path, use_cache=False)
    run_main("summary", path, "--no-cache").assert_refused(path, "twice")


def test_a_traceevents_key_only_nested_says_where_it_is(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"meta": {"traceEvents": [%s]}}' % json.dumps(STEP))
    with pytest.raises(TraceError, match="only nested inside another key's value .top level: meta"):
        load_trace(path, use_cache=False)


def test_the_cache_folder_set_to_the_traces_folder(tmp_path, monkeypatch):
    trace = tmp_path / "run.json"
    trace.write_bytes(kineto_text([STEP, *KERNELS]))
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(tmp_path))
    first = load_trace(tmp_path)  # writes its cache entry beside the trace
    assert list(tmp_path.glob("*.json")) != [trace]
    again = load_trace(tmp_path)  # the entry is not read as a second trace
    assert len(again.files) == 1 and len(again.events) == len(first.events) == 4
    entry = next(p for p in tmp_path.glob("*.json") if p != trace)
    run_main("summary", entry).assert_refused(entry, "an entry of perfkit's trace cache", "PERFKIT_CACHE_DIR")
