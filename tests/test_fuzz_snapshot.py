"""Fuzz: the memory snapshot reader on hostile pickles (issue 16: pickles of a few hundred bytes
whose lists repeat one reference 20,000 x 20,000 times ran into MemoryError after 22 s or ran past
120 s; mixed key types, bad times, bad settings and huge sizes gave raw TypeError / ValueError /
OverflowError)."""
import gzip
import pickle
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzkit import Budget, run_python
from perfkit.analysis.memory_leak.memory_snapshot import load_memory_snapshot, load_profiler_memory_timeline
from perfkit.errors import TraceError

LOAD = ("import sys\nfrom perfkit.analysis.memory_leak.memory_snapshot import load_memory_snapshot\nfrom perfkit.errors import PerfkitError\n"
        "try:\n    load_memory_snapshot(sys.argv[1])\nexcept PerfkitError as exc:\n"
        "    print(f'refused: {exc}', file=sys.stderr)\n    sys.exit(2)\n")
FRAME = {"filename": "/job/train.py", "line": 3, "name": "step"}
EVENT = {"action": "alloc", "addr": 16, "size": 512, "stream": 0, "time_us": 1, "frames": [FRAME]}
BLOCK = {"address": 16, "size": 512, "requested_size": 500, "state": "active_allocated", "frames": [FRAME]}
SEGMENT = {"device": 0, "address": 16, "total_size": 2**21, "allocated_size": 512, "active_size": 512,
           "requested_size": 500, "stream": 0, "segment_type": "small", "blocks": [BLOCK]}


def snapshot(**changes) -> dict:
    return {"segments": [SEGMENT], "device_traces": [[EVENT]], "allocator_settings": {}, **changes}


def write(tmp_path, obj, name="s.pickle.gz"):
    path = tmp_path / name
    data = obj if isinstance(obj, bytes) else pickle.dumps(obj)
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def refused(path, *needles):
    with pytest.raises(TraceError) as info:
        load_memory_snapshot(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    for needle in needles:
        assert needle in message
    return message


# --- the issue's cases, in a subprocess under a memory and time budget --------------------------

@pytest.mark.parametrize("shape", ["blocks", "frames"])
def test_one_reference_repeated_20000_x_20000_times_is_refused_in_budget(tmp_path, shape):
    if shape == "blocks":
        obj = {"segments": [dict(SEGMENT, blocks=[BLOCK] * 20_000)] * 20_000, "device_traces": []}
    else:
        obj = {"segments": [], "device_traces": [[dict(EVENT, frames=[FRAME] * 20_000)] * 20_000]}
    path = write(tmp_path, obj)
    assert path.stat().st_size < 1_000  # a few hundred bytes
    out = run_python(LOAD, path, budget=Budget(mem_mb=1024, cpu_s=30, wall_s=20))
    out.assert_clean(codes=(2,))
    assert "PERFKIT_SNAPSHOT_MAX_ITEMS" in out.err and str(path) in out.err


def test_memo_index_far_beyond_the_file_is_refused_before_allocating(tmp_path):
    path = write(tmp_path, b"\x80\x04]r" + struct.pack("<I", 2**31) + b".", "memo.pickle")
    out = run_python(LOAD, path, budget=Budget(mem_mb=1024, cpu_s=30, wall_s=20))
    out.assert_clean(codes=(2,))
    assert "memo index 2,147,483,648" in out.err


def test_gzip_bomb_snapshot_is_refused_at_the_decompressed_limit(tmp_path):
    path = tmp_path / "bomb.pickle.gz"
    path.write_bytes(gzip.compress(b"\x80\x04" + b"\x00" * (64 << 20)))  # starts like a pickle: the budget stops it
    out = run_python(LOAD, path, budget=Budget(mem_mb=1024, cpu_s=30, wall_s=20),
                     env={"PERFKIT_MAX_DECOMPRESSED_BYTES": str(16 << 20)})
    out.assert_clean(codes=(2,))
    assert "PERFKIT_MAX_DECOMPRESSED_BYTES" in out.err


@pytest.mark.parametrize("head", [b"\x00" * 8, b"PK\x03\x04", b"\x80\x01", b"not a pickle", b"\x89PNG"])
def test_a_bomb_that_is_no_pickle_is_refused_at_its_first_bytes(tmp_path, head):
    """Issue 54: 2.5 GB of zeros as a snapshot were inflated whole before the unpickler said no."""
    path = tmp_path / "bomb.pickle.gz"
    path.write_bytes(gzip.compress(head + b"\x00" * (256 << 20), compresslevel=1))
    out = run_python(LOAD, path, budget=Budget(mem_mb=1024, cpu_s=30, wall_s=20))
    out.assert_clean(codes=(2,))
    assert "refused before reading the rest" in out.err and str(path) in out.err


# --- the issue's cases, in this process ---------------------------------------------------------

@pytest.mark.parametrize("obj, needle", [
    ({1: "a", "b": 2, (3,): None}, "not a CUDA memory snapshot"),
    (snapshot(segments=[{**SEGMENT, 7: "x", (1, 2): 3}]), None),  # extra keys of other types: ignored
    ([{**SEGMENT, "blocks": [{**BLOCK, 5: 5}]}], None),
], ids=["top-level", "segment", "block"])
def test_mixed_key_types(tmp_path, obj, needle):
    path = write(tmp_path, obj)
    if needle:
        refused(path, needle)
    else:
        assert len(load_memory_snapshot(path).segments) == 1


@pytest.mark.parametrize("time_us", ["soon", None, 1.5, float("nan"), float("inf"), 2**64, [1], {"t": 1}],
                         ids=["str", "None", "float", "nan", "inf", "2**64", "list", "dict"])
def test_bad_times(tmp_path, time_us):
    path = write(tmp_path, snapshot(device_traces=[[EVENT, dict(EVENT, time_us=time_us)]]))
    refused(path, "device_traces[0][1]['time_us']", "not an integer")


@pytest.mark.parametrize("settings_value", [[1, 2], "expandable_segments:True", 5, {1: True}])
def test_bad_settings_are_ignored_with_a_warning(tmp_path, settings_value):
    snap = load_memory_snapshot(write(tmp_path, snapshot(allocator_settings=settings_value)))
    assert snap.allocator_settings == {} and any("allocator_settings" in w for w in snap.warnings)
    assert snap.net_growth_bytes == 512


@pytest.mark.parametrize("where, value", [("segment", 2**64), ("segment", -(2**70)), ("block", 10**400),
                                          ("event", 2**63), ("event", "1024")],
                         ids=["segment-2**64", "segment--2**70", "block-10**400", "event-2**63", "event-str"])
def test_huge_or_wrong_sizes(tmp_path, where, value):
    if where == "segment":
        obj, at = snapshot(segments=[dict(SEGMENT, total_size=value)]), "segments[0]['total_size']"
    elif where == "block":
        obj, at = snapshot(segments=[dict(SEGMENT, blocks=[dict(BLOCK, size=value)])]), "segments[0].blocks[0]['size']"
    else:
        obj, at = snapshot(device_traces=[[dict(EVENT, size=value)]]), "device_traces[0][0]['size']"
    refused(write(tmp_path, obj), at)


def test_frames_of_any_shape_show_as_question_marks(tmp_path):
    junk = [{"filename": [[1] * 10] * 10, "line": 10**5000, "name": 3}, 5, "x", {}]
    snap = load_memory_snapshot(write(tmp_path, snapshot(device_traces=[[dict(EVENT, frames=junk)]])))
    assert snap.events["frame"].tolist() == ["?:?:?"]


def test_timeline_rows_nested_100000_deep_or_of_the_wrong_type(tmp_path):
    deep = tmp_path / "deep.raw"
    deep.write_bytes(b"[" * 100_000)
    with pytest.raises(TraceError, match="not a profiler memory timeline"):
        load_profiler_memory_timeline(deep)
    typed = tmp_path / "typed.raw"
    typed.write_bytes(b"[[1, 2, 3, 4], [1, 2, 3e400, 4]]")
    with pytest.raises(TraceError):
        load_profiler_memory_timeline(typed)
    words = tmp_path / "words.raw"
    words.write_bytes(b'[[1, 2, 3, 4], [1, 2, 3, "x"]]')
    with pytest.raises(TraceError, match=r"rows\[1\]\[3\] is 'x'"):
        load_profiler_memory_timeline(words)


# --- generated: any value anywhere in a snapshot loads or is refused cleanly ---------------------

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63), st.floats(),
                    st.text(max_size=8), st.binary(max_size=4), st.lists(st.integers(), max_size=3),
                    st.dictionaries(st.one_of(st.integers(), st.text(max_size=3)), st.integers(), max_size=2))
_PLACES = [("segments", 0, k) for k in SEGMENT] + [("blocks", 0, k) for k in BLOCK] + \
          [("events", 0, k) for k in EVENT] + [("frames", 0, k) for k in FRAME] + \
          [("top", None, k) for k in ("segments", "device_traces", "allocator_settings")]


def _plant(place, value) -> dict:
    kind, _, key = place
    frame, event, block = dict(FRAME), dict(EVENT), dict(BLOCK)
    target = {"segments": None, "blocks": block, "events": event, "frames": frame, "top": None}[kind]
    if target is not None:
        target[key] = value
    block["frames"] = event["frames"] = [frame] if kind == "frames" else [FRAME]
    segment = dict(SEGMENT, blocks=[block] if kind != "blocks" or key != "blocks" else value)
    if kind == "segments":
        segment[key] = value
    obj = {"segments": [segment], "device_traces": [[event]], "allocator_settings": {}}
    if kind == "top":
        obj[key] = value
    return obj


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(_PLACES), value=_VALUES)
def test_any_value_anywhere_loads_or_is_refused(tmp_path, place, value):
    path = write(tmp_path, _plant(place, value), "s.pickle")
    try:
        snap = load_memory_snapshot(path)
    except TraceError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        return
    repr(snap), snap._repr_html_(), snap.top_sites(), snap.live_bytes()  # the views work too


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 10_000), flip=st.integers(0, 10_000), byte=st.integers(0, 255))
def test_damaged_pickle_bytes_load_or_are_refused(tmp_path, cut, flip, byte):
    data = bytearray(pickle.dumps(snapshot(device_traces=[[EVENT] * 3])))
    data[flip % len(data)] = byte
    path = write(tmp_path, bytes(data[: max(1, len(data) - cut % len(data))]), "s.pickle")
    try:
        load_memory_snapshot(path)
    except TraceError as exc:
        assert str(path) in str(exc)
