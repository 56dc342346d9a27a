"""``perfkit.profiling.session.trace_path``: two runs started in the same second never share a trace name,
and the reservation is removed when no trace was recorded."""
from __future__ import annotations

import datetime as dt

from perfkit.profiling.session import _release, trace_path

NOW = dt.datetime(2026, 11, 28, 12, 0, 0)


def test_two_runs_in_one_second_get_two_names(tmp_path):
    first, second, third = (trace_path("train.py", tmp_path, NOW) for _ in range(3))
    assert first.name == "train-2026-11-28-120000.pt.trace.json.gz"
    assert second.name == "train-2026-11-28-120000-2.pt.trace.json.gz"
    assert third.name == "train-2026-11-28-120000-3.pt.trace.json.gz"
    assert all(p.is_file() for p in (first, second, third))  # reserved: a third process cannot take them


def test_a_relative_folder_is_fixed_before_the_script_changes_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = trace_path("train.py", "traces", NOW)
    assert path.is_absolute() and path.parent == tmp_path / "traces"


def test_an_unused_reservation_is_removed_and_a_written_trace_kept(tmp_path):
    empty, written = trace_path("a.py", tmp_path, NOW), trace_path("b.py", tmp_path, NOW)
    written.write_bytes(b"\x1f\x8b recorded")
    _release(empty)
    _release(written)
    assert not empty.exists() and written.read_bytes() == b"\x1f\x8b recorded"
