"""Safe memory-snapshot reader: the shared CUDA snapshots, synthetic exact cases, refusals."""
import gzip
import os
import pickle

import pytest

from conftest import shared_memory
from perfkit.analysis.memory_leak.memory_snapshot import (TIMELINE_CATEGORIES,
    frame_site,
    load_memory_snapshot,
    load_profiler_memory_timeline)
from perfkit.errors import TraceError

BALANCED = ["cs336_magma27_memsnap_bench.pickle.gz", "cs336_silmont_memsnap_fwd_bf16_ctx128.pickle.gz",
            "cs336_silmont_memsnap_fwd_fp32_ctx128.pickle.gz"]
GROWING = ["cs336_nothanmin_memsnap_fwd_bf16autocast.pickle.gz", "cs336_nothanmin_memsnap_fwd_fp32.pickle.gz"]
STATES = {"active_allocated", "active_pending_free", "inactive"}


@pytest.mark.shared
@pytest.mark.parametrize("name", BALANCED)
def test_balanced_snapshots_have_zero_net_growth(name):
    snap = load_memory_snapshot(shared_memory(name))
    assert snap.net_growth_bytes == 0
    assert snap.allocated_bytes > 0 and snap.peak_bytes > 0
    live = snap.live_bytes()
    assert live["live_bytes"].iloc[-1] == 0 and live["live_bytes"].min() >= 0
    assert snap.top_sites(n=10_000)["live_bytes"].sum() == 0
    assert not any("grew" in f.title for f in snap.findings)


@pytest.mark.shared
@pytest.mark.parametrize("name", GROWING)
def test_growing_snapshots_grow_and_name_the_sites(name):
    snap = load_memory_snapshot(shared_memory(name))
    assert snap.net_growth_bytes > 10 * 2**30
    assert snap.live_bytes()["live_bytes"].iloc[-1] == snap.net_growth_bytes
    sites = snap.top_sites(n=10_000)
    assert sites["live_bytes"].sum() == snap.net_growth_bytes  # every kept byte has a site
    assert snap.top_sites(5)["frame"].head(5).str.contains("cs336_systems/adapters.py:").all()
    assert any("grew" in f.title for f in snap.findings)


@pytest.mark.shared
def test_magma27_tables_and_peak():
    snap = load_memory_snapshot(shared_memory("cs336_magma27_memsnap_bench.pickle.gz"))
    # one 312.5 MiB block allocated before recording is freed inside the history; another of the
    # same size is allocated and kept: net 0, but the sites show both
    sites = snap.top_sites(n=10_000).set_index("frame")
    assert sites.loc["(allocated before the history)", "live_bytes"] <= -327_680_000
    assert 12.4e9 < snap.peak_bytes < 12.7e9  # README: 12.5 GB peak in history
    assert len(snap.segments) == 216 and snap.reserved_bytes == snap.segments["total_size_bytes"].sum()
    assert set(snap.blocks["state"]) <= STATES
    assert list(snap.events.columns) == ["device", "time_us", "action", "address", "size_bytes", "stream", "frame"]
    assert set(snap.events["action"]) == {"alloc", "free_requested", "free_completed"}
    assert snap.events["time_us"].is_monotonic_increasing
    assert snap.allocator_settings["expandable_segments"] is False
    assert "MemorySnapshot(" in repr(snap) and "<table" in snap._repr_html_()


@pytest.mark.shared
def test_profiler_timeline_is_refused_by_the_snapshot_reader_and_read_by_its_own():
    path = shared_memory("hta_memory_timeline.raw.gz")
    with pytest.raises(TraceError, match="memory timeline") as err:
        load_memory_snapshot(path)
    assert "load_profiler_memory_timeline" in str(err.value)
    timeline = load_profiler_memory_timeline(path)
    assert len(timeline.events) == 16845
    assert set(timeline.events["category"]) <= set(TIMELINE_CATEGORIES)
    assert timeline.net_growth_bytes == 0 and timeline.peak_bytes > 2**30
    frame = timeline.to_frame()
    assert frame["time_ns"].iloc[0] == -1  # memory that existed before profiling
    assert frame["total"].iloc[-1] == timeline.events["bytes"].sum()


def _frames(*pairs):
    return [{"filename": f, "line": n, "name": "fn"} for f, n in pairs]


def _write(tmp_path, obj, name="snap.pickle.gz"):
    path = tmp_path / name
    data = pickle.dumps(obj)
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def _synthetic():
    user = _frames(("??", 0), ("/x/site-packages/torch/nn/modules/module.py", 1), ("/job/train.py", 42))
    other = _frames(("/job/model.py", 7))
    ev = [("alloc", 1, 100, user, 10), ("alloc", 2, 50, other, 11), ("free_requested", 1, 100, other, 12),
          ("free_completed", 1, 100, other, 13), ("alloc", 3, 30, user, 14)]
    trace = [{"action": a, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": fr}
             for a, addr, size, fr, t in ev]
    segment = {"device": 0, "address": 1, "total_size": 2**21, "allocated_size": 80, "active_size": 80,
               "requested_size": 80, "stream": 0, "segment_type": "small",
               "blocks": [{"address": 2, "size": 50, "requested_size": 50, "state": "active_allocated",
                           "frames": other}]}
    return {"segments": [segment], "device_traces": [trace], "allocator_settings": {}}


def test_synthetic_snapshot_exact_numbers(tmp_path):
    snap = load_memory_snapshot(_write(tmp_path, _synthetic()))
    assert snap.live_bytes()["live_bytes"].tolist() == [100, 150, 50, 80]  # free_requested is not a free
    assert snap.peak_bytes == 150 and snap.net_growth_bytes == 80
    sites = snap.top_sites().set_index("frame")
    assert sites.loc["/job/train.py:42:fn", "allocated_bytes"] == 130
    assert sites.loc["/job/train.py:42:fn", "live_bytes"] == 30  # the free is charged to the alloc's site
    assert sites.loc["/job/model.py:7:fn", "live_bytes"] == 50
    assert snap.blocks["frame"].tolist() == ["/job/model.py:7:fn"]


def test_plain_pickle_and_segment_list_formats(tmp_path):
    snap = load_memory_snapshot(_write(tmp_path, _synthetic()["segments"], "old.pickle"))
    assert len(snap.segments) == 1 and snap.events.empty
    assert snap.peak_bytes == 0 and "record_memory_history" in snap.warnings[0]


def test_frame_site_prefers_user_python_frames():
    assert frame_site(_frames(("??", 0), ("C:\\v\\site-packages\\torch\\x.py", 3), ("D:\\a\\m.py", 5))) == "D:\\a\\m.py:5:fn"
    assert frame_site(_frames(("??", 0), ("/t/torch/x.py", 3))) == "/t/torch/x.py:3:fn"
    assert frame_site(_frames(("alloc.cpp", 0))) == "alloc.cpp:0:fn"
    assert frame_site([]) == ""


class _Evil:
    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.mark.parametrize("name", ["evil.pickle", "evil.pickle.gz"])
def test_malicious_pickle_is_refused_before_running(tmp_path, name):
    marker = tmp_path / "pwned"
    payload = {"segments": [], "device_traces": [[_Evil(f"touch {marker}")]]}
    with pytest.raises(TraceError, match=r"tries to construct `(posix|nt)\.system` and was refused"):
        load_memory_snapshot(_write(tmp_path, payload, name))
    assert not marker.exists()


def test_any_global_is_refused(tmp_path):
    path = tmp_path / "g.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "when": __import__("datetime").date(2024, 1, 1)}))
    with pytest.raises(TraceError, match="`datetime.date`"):
        load_memory_snapshot(path)


@pytest.mark.parametrize("content,match", [
    (pickle.dumps({"a": 1}), "not a CUDA memory snapshot"),
    (pickle.dumps([{"no_address": 1}]), "malformed"),
    (pickle.dumps(_synthetic())[:200], "cannot unpickle"),
    (b"\x1f\x8b\x08\x00garbage", "gzip"),
])
def test_bad_files_raise_trace_error(tmp_path, content, match):
    path = tmp_path / "bad.pickle"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=match):
        load_memory_snapshot(path)


def test_missing_file_and_bad_timeline(tmp_path):
    with pytest.raises(TraceError, match="not found"):
        load_memory_snapshot(tmp_path / "nope.pickle")
    path = tmp_path / "t.raw.gz"
    path.write_bytes(gzip.compress(b'{"not": "rows"}'))
    with pytest.raises(TraceError, match="raw profiler memory timeline"):
        load_profiler_memory_timeline(path)
