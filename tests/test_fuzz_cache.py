"""Fuzz: the trace cache never serves figures that are not this file's (issue 16: a trace replaced
while loading was cached under the new file's stamp; another trace's .events.arrow copied over an
entry was served; metadata of the wrong shape gave AttributeError/KeyError on every run)."""
import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzkit import event, run_main, write_trace
from perfkit.trace import load_trace
from perfkit.trace.loader import cache
from perfkit.trace.loader import load as load_module


def events(n: int, dur: int = 10) -> list:
    return [event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=100_000)] + [
        event(name=f"op{i}", ts=2_000 + 100 * i, dur=dur) for i in range(n)]


def entry_files(kind: str) -> list:
    return sorted(p for p in cache.cache_dir().iterdir() if p.name.endswith(kind))


def test_trace_replaced_while_loading_is_not_cached_under_the_new_stamp(tmp_path, monkeypatch):
    path = write_trace(tmp_path / "t.json", events(3))
    real_parse = load_module._parse_file

    def parse_then_replace(p, **kw):
        parsed = real_parse(p, **kw)  # read the old file, then the new one lands (atomic rename)
        newer = write_trace(tmp_path / "new.json", events(5))
        os.replace(newer, p)
        return parsed

    monkeypatch.setattr(load_module, "_parse_file", parse_then_replace)
    during = load_trace(path)
    assert len(during.events) == 4
    assert any("changed while it was being read" in w for w in during.warnings)
    monkeypatch.setattr(load_module, "_parse_file", real_parse)
    assert len(load_trace(path).events) == 6  # the new file's figures, not the old ones
    assert len(load_trace(path).events) == 6  # and now from the cache


def test_another_traces_arrow_file_copied_over_an_entry_is_not_served(tmp_path):
    a = write_trace(tmp_path / "a.json", events(3))
    b = write_trace(tmp_path / "b.json", events(3, dur=77))  # same shape, other numbers
    load_trace(a), load_trace(b)
    arrows = {p.name: p for p in entry_files(".events.arrow")}
    a_key = cache._key(a)
    shutil.copy(arrows[f"{cache._key(b)}.events.arrow"], arrows[f"{a_key}.events.arrow"])
    again = load_trace(a)
    assert set(again.events.loc[again.events["name"] != "ProfilerStep#1", "dur_us"]) == {10.0}
    assert len(load_trace(a).events) == 4  # the rebuilt entry is served again


def test_another_traces_nesting_file_copied_over_an_entry_is_not_served(tmp_path, monkeypatch):
    """The nesting columns live in their own Arrow file (written while nesting is computed): one
    from another entry makes a miss, parsed again, never a mix of two traces' tables."""
    a = write_trace(tmp_path / "a.json", events(3))
    b = write_trace(tmp_path / "b.json", events(4))
    first = load_trace(a)
    load_trace(b)
    shutil.copy(cache.cache_dir() / f"{cache._key(b)}.nesting.arrow", cache.cache_dir() / f"{cache._key(a)}.nesting.arrow")
    parsed, real_parse = [], load_module._parse_file
    monkeypatch.setattr(load_module, "_parse_file", lambda p, **kw: parsed.append(p) or real_parse(p, **kw))
    again = load_trace(a)
    assert parsed == [a]
    assert again.events.equals(first.events)
    assert load_trace(a).events.equals(first.events) and parsed == [a]  # the rebuilt entry is a hit


def test_an_entry_copied_whole_from_another_trace_is_not_served(tmp_path):
    a = write_trace(tmp_path / "a.json", events(3))
    b = write_trace(tmp_path / "b.json", events(3, dur=77))
    load_trace(a), load_trace(b)
    for suffix in (".json", ".events.arrow", ".nesting.arrow", ".flows.arrow"):
        shutil.copy(cache.cache_dir() / f"{cache._key(b)}{suffix}", cache.cache_dir() / f"{cache._key(a)}{suffix}")
    assert 77.0 not in set(load_trace(a).events["dur_us"])


def test_fingerprint_is_more_than_the_file_size(tmp_path):
    """Issue 10's mutation gap: each edit keeps the size; a size-only fingerprint would serve the
    first figures three times."""
    path = write_trace(tmp_path / "t.json", events(3, dur=10))
    assert set(load_trace(path).events["dur_us"]) == {10.0, 100_000.0}
    size, stat = path.stat().st_size, path.stat()
    write_trace(path, events(3, dur=20))  # same length, new mtime
    assert path.stat().st_size == size
    assert 20.0 in set(load_trace(path).events["dur_us"])
    write_trace(path, events(3, dur=30))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and mtime: the content hash decides
    assert 30.0 in set(load_trace(path).events["dur_us"])


WHOLE = [[], 5, "x", None, {}]  # the file is valid JSON of another shape
EDITS = [{"meta": 5}, {"fingerprint": []}, {"tables": "x"}, {"meta": {"rank": "zero"}},  # one key of the wrong shape
         {"meta": {"steps": {"step": [1], "start_us": []}}}, {"binding": 7},
         {"tables": {"events": {"rows": "many", "bytes": 1}}}, {"meta": {"warnings": [1]}}]


@pytest.mark.parametrize("shape", [("whole", s) for s in WHOLE] + [("edit", s) for s in EDITS],
                         ids=lambda s: f"{s[0]}:{json.dumps(s[1])[:30]}")
def test_metadata_of_the_wrong_shape_is_a_miss_not_a_traceback(tmp_path, shape):
    path = write_trace(tmp_path / "t.json", events(3))
    load_trace(path)
    meta_file = entry_files(".json")[0]
    info = json.loads(meta_file.read_text())
    how, change = shape
    if how == "whole":
        info = change
    for key, value in (change.items() if how == "edit" else ()):
        info[key] = {**info[key], **value} if isinstance(value, dict) and isinstance(info.get(key), dict) else value
    meta_file.write_text(json.dumps(info))
    out = run_main("summary", "--json", path)
    out.assert_clean(json_out=True, codes=(0,))
    assert out.json()["events"]["total"] == 4
    assert json.loads(meta_file.read_text()) != info  # rebuilt, so later runs hit again


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=6)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.lists(st.sampled_from(["cache_format", "schema", "perfkit", "source", "fingerprint", "binding",
                                       "tables", "meta", "meta.rank", "meta.steps", "meta.devices", "meta.warnings",
                                       "meta.events_read", "tables.events", "tables.flows"]), min_size=1, max_size=3),
       value=_JSON)
def test_any_edit_of_the_metadata_loads_the_right_trace(tmp_path, where, value):
    path = tmp_path / "t.json"
    if not path.exists():
        write_trace(path, events(3))
    load_trace(path)
    meta_file = entry_files(".json")[0]
    info = json.loads(meta_file.read_text())
    for key in where:
        outer, _, inner = key.partition(".")
        if inner and isinstance(info.get(outer), dict):
            info[outer][inner] = value
        else:
            info[outer] = value
    meta_file.write_text(json.dumps(info))
    trace = load_trace(path)
    assert len(trace.events) == 4 and trace.files[0].events_read == 4 and list(trace.steps["step"]) == [1]
