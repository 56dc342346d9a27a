"""Fuzz: event numbers that are not finite or out of range are dropped and counted, one warning
per field; the figures are those of the valid events (issue 16: "dur": "inf" gave "GPU busy inf s"
and `--json` printed Infinity; "ts": "-inf" gave nan; 2**70 was accepted or wrapped)."""
import functools
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzkit import HUGE_INTS, NON_FINITE_TOKENS, event, kineto_text, run_main, strict_json, write_trace
from perfkit.analysis.summary import summarize
from perfkit.text import json_text
from perfkit.trace import load_trace

STEP = event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=5_000)


def kernel(i: int, **args) -> dict:
    base = {"device": 0, "stream": 7, "correlation": 100 + i}
    return event(cat="kernel", name=f"k{i}", pid=0, tid=7, ts=1_100 + 100 * i, dur=10, args={**base, **args})


VALID = [STEP] + [kernel(i) for i in range(4)]


def hostile_text(field: str, token: str) -> str:
    """A kernel event whose ``field`` (top level or in args) is the raw JSON ``token``."""
    e = kernel(9)
    marker = '"__HOSTILE__"'
    if field in ("ts", "dur"):
        e[field] = "__HOSTILE__"
    else:
        e["args"][field] = "__HOSTILE__"
    return json.dumps(e).replace(marker, token)


def comparable(summary: dict) -> dict:
    """A summary without what depends on the file itself (its path, events read, warnings)."""
    return {k: v for k, v in summary.items() if k not in ("trace", "warnings", "events")} | {
        "by_category": summary["events"]["by_category"]}


@functools.lru_cache(maxsize=1)
def clean_summary() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return comparable(summarize(load_trace(write_trace(Path(tmp) / "clean.json", VALID), use_cache=False)))


def assert_same_as_valid(tmp_path, hostile: list, *, dropped: int, field_key: str) -> dict:
    trace = load_trace(write_trace(tmp_path / "hostile.json", VALID + hostile), use_cache=False)
    got = summarize(trace)
    assert comparable(got) == clean_summary()
    notes = [w for w in got["warnings"] if "dropped" in w]
    assert len(notes) == 1, got["warnings"]  # one warning per field, not one per event
    assert f"dropped {dropped} of {len(VALID) + len(hostile)} events: '{field_key}'" in notes[0]
    strict_json(json_text(got))
    return got


# --- the cases --------------------------------------------------------------------------

def test_dur_inf_does_not_give_gpu_busy_inf(tmp_path):
    path = write_trace(tmp_path / "t.json", VALID + [hostile_text("dur", '"inf"')])
    out = run_main("summary", "--no-cache", path)
    out.assert_clean(codes=(0,))
    assert "inf s" not in out.out and "nan" not in out.out
    assert "GPU busy 40.0 us" in out.out and "dropped 1 of 6 events: 'dur'" in out.out


def test_summary_json_never_prints_infinity(tmp_path):
    path = write_trace(tmp_path / "t.json", VALID + [hostile_text("dur", '"Infinity"'), hostile_text("ts", '"inf"')])
    out = run_main("summary", "--json", "--no-cache", path)
    out.assert_clean(json_out=True, codes=(0,))  # strict: a bare Infinity or NaN fails here
    assert out.json()["gpu"]["busy_us"] == 40.0


def test_ts_minus_inf_gives_no_nan(tmp_path):
    got = assert_same_as_valid(tmp_path, [hostile_text("ts", '"-inf"')], dropped=1, field_key="ts")
    assert got["gpu"]["busy_us"] == 40.0


@pytest.mark.parametrize("field", ["ts", "dur"])
def test_times_of_2_pow_70_are_dropped(tmp_path, field):
    assert_same_as_valid(tmp_path, [hostile_text(field, str(2**70))] * 3, dropped=3, field_key=field)


@pytest.mark.parametrize("field", ["device", "stream", "correlation", "External id"])
def test_ids_of_2_pow_70_are_dropped_not_wrapped(tmp_path, field):
    assert_same_as_valid(tmp_path, [hostile_text(field, str(2**70))] * 2, dropped=2, field_key=field)
    trace = load_trace(tmp_path / "hostile.json", use_cache=False)
    ev = trace.events
    assert ev["correlation"].min() >= -1 and ev["device"].isin([-1, 0]).all() and ev["stream"].isin([-1, 7]).all()


def test_kineto_unsigned_minus_one_stream_is_read_as_minus_one(tmp_path):
    """Kineto writes stream 2**32-1 on Context Sync events (hta alexnet trace): not dropped."""
    sync = event(cat="cuda_sync", name="Context Sync", pid=0, tid=-1, ts=1_500, dur=9,
                 args={"stream": 2**32 - 1, "device": 0, "correlation": 225})
    trace = load_trace(write_trace(tmp_path / "t.json", VALID + [sync]), use_cache=False)
    assert not trace.warnings
    assert trace.events.loc[trace.events["name"] == "Context Sync", "stream"].tolist() == [-1]


def test_ids_beyond_2_pow_53_are_kept_exactly(tmp_path):
    big = 2**60 + 1  # float64 would round it to 2**60
    trace = load_trace(write_trace(tmp_path / "t.json", [STEP, kernel(0, correlation=big)]), use_cache=False)
    assert trace.events["correlation"].max() == big and not trace.warnings


def test_a_file_of_only_unusable_events_is_refused(tmp_path):
    path = write_trace(tmp_path / "t.json", [hostile_text("ts", '"-inf"'), hostile_text("dur", str(2**70))])
    run_main("summary", "--no-cache", path).assert_refused(path, "no usable event", "'ts'", "'dur'")


def test_drop_warnings_survive_the_cache(tmp_path):
    path = write_trace(tmp_path / "t.json", VALID + [hostile_text("dur", '"inf"')])
    first, second = load_trace(path), load_trace(path)
    assert first.warnings == second.warnings and any("dropped 1" in w for w in second.warnings)
    assert len(second.events) == len(VALID)


# --- generated: any hostile value in any field gives the valid events' figures --------------------

_OUT_OF_RANGE = {
    "ts": st.one_of(st.sampled_from(NON_FINITE_TOKENS[:4]), st.integers(2**53 + 1, 2**80).map(str),
                    st.integers(-(2**80), -1).map(str), st.floats(max_value=-1e-3, allow_nan=False,
                                                                  allow_infinity=False).map(repr)),
    "device": st.one_of(st.integers(2**15, 2**80), st.integers(-(2**80), -2), st.sampled_from(HUGE_INTS)).map(str),
    "stream": st.one_of(st.integers(2**31, 2**32 - 2), st.integers(2**32, 2**80), st.integers(-(2**80), -2)).map(str),
    "correlation": st.one_of(st.integers(2**63, 2**90), st.integers(-(2**90), -2),
                             st.sampled_from(['"inf"', '"-inf"'])).map(str),
}
_OUT_OF_RANGE["dur"] = _OUT_OF_RANGE["ts"]
_OUT_OF_RANGE["External id"] = _OUT_OF_RANGE["correlation"]


@st.composite
def hostile_events(draw):
    field = draw(st.sampled_from(sorted(_OUT_OF_RANGE)))
    tokens = draw(st.lists(_OUT_OF_RANGE[field], min_size=1, max_size=4))
    return field, [hostile_text(field, t) for t in tokens]


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=hostile_events())
def test_any_out_of_range_value_is_dropped_and_counted(tmp_path, case):
    field, hostile = case
    assert_same_as_valid(tmp_path, hostile, dropped=len(hostile), field_key=field)


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
                       min_size=1, max_size=6),
       field=st.sampled_from(["ts", "dur", "device", "stream", "correlation", "External id", "bytes", "Python id"]))
def test_arbitrary_values_load_or_refuse_cleanly(tmp_path, values, field):
    """Any JSON value in a numeric field: the trace loads (bad events dropped, never NaN or inf
    in a figure) or the CLI refuses with one line naming the file."""
    hostile = [hostile_text(field, json.dumps(v)) for v in values]
    path = tmp_path / "t.json"
    path.write_bytes(kineto_text(VALID + hostile))
    out = run_main("summary", "--json", "--no-cache", path)
    if out.rc == 2:
        out.assert_refused(path)
        return
    out.assert_clean(json_out=True, codes=(0,))
    got = out.json()
    assert np.isfinite(got["gpu"]["busy_us"]) and got["gpu"]["kernel_count"] >= len(VALID) - 1
