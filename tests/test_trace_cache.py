"""The columnar cache: hit on an unchanged file, miss on a changed one, ignored across versions."""
import json
import os

import pandas as pd

from perfkit.trace import load_trace
from perfkit.trace.loader import cache

from test_trace_errors import GOOD, kineto_text


def make(tmp_path, doc=GOOD):
    path = tmp_path / "t.json"
    path.write_bytes(kineto_text(doc))
    return path


def test_second_load_reads_the_cache(tmp_path, monkeypatch):
    path = make(tmp_path)
    first = load_trace(path)
    assert any(p.name.endswith(".events.arrow") for p in cache.cache_dir().iterdir())
    calls = []
    monkeypatch.setattr("perfkit.trace.loader.load._parse_file", lambda *a, **k: calls.append(a) or 1 / 0)
    second = load_trace(path)
    assert not calls
    pd.testing.assert_frame_equal(first.events, second.events)
    assert second.files[0].trace_name == "t"


def test_changed_file_invalidates(tmp_path):
    path = make(tmp_path)
    load_trace(path)
    doc = dict(GOOD, traceEvents=GOOD["traceEvents"][:2])
    path.write_bytes(kineto_text(doc))
    os.utime(path, ns=(1, 1))
    assert len(load_trace(path).events) == 2


def test_other_version_is_ignored_not_misread(tmp_path):
    path = make(tmp_path)
    load_trace(path)
    meta_file = next(p for p in cache.cache_dir().iterdir() if p.suffix == ".json")
    info = json.loads(meta_file.read_text())
    info["perfkit"] = "0.0.0-other"
    info["meta"]["trace_name"] = "WRONG"
    meta_file.write_text(json.dumps(info))
    assert load_trace(path).files[0].trace_name == "t"


def test_corrupt_cache_file_is_ignored(tmp_path):
    path = make(tmp_path)
    load_trace(path)
    for p in cache.cache_dir().iterdir():
        if p.name.endswith(".events.arrow"):
            p.write_bytes(b"garbage")
    assert len(load_trace(path).events) == 3


def test_unwritable_cache_dir_warns(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("PERFKIT_CACHE_DIR", str(blocker / "sub"))
    trace = load_trace(make(tmp_path))
    assert any("cache not written" in w for w in trace.warnings)


def test_progress_bar_over_bytes_of_a_large_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("perfkit.trace.loader.load.CHUNK_BYTES", 64)
    monkeypatch.setattr("perfkit.trace.loader.parse.CHUNK_BYTES", 64)
    doc = dict(GOOD, traceEvents=GOOD["traceEvents"] * 20)
    trace = load_trace(make(tmp_path, doc), use_cache=False, progress=True)
    assert len(trace.events) == 60
    assert "parsing t.json" in capsys.readouterr().err


def test_cache_tables_are_one_record_batch_each(tmp_path):
    """Arrow's writer cuts tables into 64k-row batches by default, and a cached read then concatenates
    every column (and merges the dictionaries) instead of mapping it as it is."""
    import pyarrow.ipc as ipc

    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5}
              for i in range(70_000)]
    path = make(tmp_path, dict(GOOD, traceEvents=events))
    first = load_trace(path, workers=1)
    files = sorted(p for p in cache.cache_dir().iterdir() if p.name.endswith(".arrow"))
    assert len(files) == 3
    for file in files:
        with ipc.open_file(file) as reader:
            assert reader.num_record_batches == (0 if ".flows." in file.name else 1), file.name
    pd.testing.assert_frame_equal(load_trace(path).events, first.events, check_exact=True)
