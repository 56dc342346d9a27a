"""Fuzz: paths and ranks the loader is given (issue 16: an unreadable file or directory gave a
PermissionError traceback; traces claiming the same rank were merged: an unrelated rank-0 trace
beside DLRM ranks 0 and 1 gave "ranks [0, 1]", two copies of DLRM rank 0 gave "[0]")."""
import os
import shutil

import pytest

from conftest import shared_trace
from fuzzkit import Budget, can_drop_file_permissions, event, lock, run_cli, run_main, write_trace
from perfkit.errors import TraceError
from perfkit.trace import load_trace

needs_permissions = pytest.mark.skipif(not can_drop_file_permissions(),
                                       reason="cannot run a child that obeys file permissions here")


def rank_trace(path, rank, world_size=2, name="op"):
    meta = {} if rank is None else {"distributedInfo": {"rank": rank, "world_size": world_size}}
    return write_trace(path, [event(cat="user_annotation", name="ProfilerStep#1", ts=1_000, dur=500),
                              event(name=name, ts=1_100)], **meta)


@needs_permissions
def test_unreadable_file_is_a_trace_error_naming_it(tmp_path):
    path = lock(rank_trace(tmp_path / "t.json", 0))
    run_cli("summary", path, drop_file_permissions=True).assert_refused(path, "Permission denied")


@needs_permissions
def test_unreadable_directory_is_a_trace_error_naming_it(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    rank_trace(folder / "t.json", 0)
    lock(folder)
    try:
        run_cli("summary", folder, drop_file_permissions=True).assert_refused(folder, "Permission denied")
    finally:
        folder.chmod(0o700)  # so that pytest can clean it up


def test_a_pipe_named_like_a_trace_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)
    run_cli("summary", fifo, budget=Budget(wall_s=30)).assert_refused(fifo, "not a regular file")


def test_a_dangling_link_in_a_directory_is_named(tmp_path):
    rank_trace(tmp_path / "a.json", 0)
    (tmp_path / "b.json").symlink_to(tmp_path / "gone.json")
    with pytest.raises(TraceError, match="b.json: a symbolic link to a missing file"):
        load_trace(tmp_path)


@pytest.mark.parametrize("source", [b"/nonexistent.json", 5, [5], {"a": 1}, [], object()])
def test_odd_sources_are_trace_errors(source):
    with pytest.raises(TraceError):
        load_trace(source)


def test_unrelated_rank0_beside_two_ranks_is_kept_apart(tmp_path):
    rank_trace(tmp_path / "run_rank0.json", 0, world_size=2)
    rank_trace(tmp_path / "run_rank1.json", 1, world_size=2)
    rank_trace(tmp_path / "zz_other.json", 0, world_size=1, name="other")
    trace = load_trace(tmp_path)
    assert trace.ranks == [0, 1, 2]
    other = next(f for f in trace.files if f.path.endswith("zz_other.json"))
    assert other.rank == 2 and other.claimed_rank == 0
    assert set(trace.events.loc[trace.events["name"] == "other", "rank"]) == {2}
    assert len(trace.steps) == 3 and sorted(trace.steps["rank"]) == [0, 1, 2]
    [warning] = [w for w in trace.warnings if "claims rank 0" in w]
    assert "zz_other.json" in warning and "run_rank0.json" in warning and "rank 2" in warning


def test_two_copies_of_one_rank_load_as_two_ranks(tmp_path):
    rank_trace(tmp_path / "a.json", 0, world_size=4)
    shutil.copy(tmp_path / "a.json", tmp_path / "b.json")
    trace = load_trace(tmp_path)
    assert trace.ranks == [0, 4] and [f.claimed_rank for f in trace.files] == [0, 0]
    assert len(trace.events) == 4 and sorted(trace.steps["rank"]) == [0, 4]
    assert any("b.json claims rank 0 like a.json: loaded as rank 4" in w for w in trace.warnings)


def test_files_with_and_without_a_rank_never_share_one(tmp_path):
    rank_trace(tmp_path / "a.json", None)  # no claim: its position (0) is taken by b's claim
    rank_trace(tmp_path / "b.json", 0, world_size=2)
    trace = load_trace(tmp_path)
    assert trace.ranks == [0, 2]  # a gets an id above b's run (world_size 2), not b's rank 1
    assert [f.claimed_rank for f in trace.files] == [None, 0]


@pytest.mark.parametrize("rank", [2**70, "inf", -1, "zero", 1.5e300, [0], True])
def test_an_unusable_rank_claim_is_ignored_with_a_warning(tmp_path, rank):
    trace = load_trace(rank_trace(tmp_path / "t.json", rank), use_cache=False)
    assert trace.ranks == [0] and trace.files[0].claimed_rank is None
    assert any("distributedInfo.rank" in w and "ignored" in w for w in trace.warnings)


@pytest.mark.shared
def test_unrelated_rank0_beside_dlrm_ranks_0_and_1(tmp_path):
    for name in ("param_v100_dlrm_rank0.pt.trace.json.gz", "param_v100_dlrm_rank1.pt.trace.json.gz"):
        shutil.copy(shared_trace(name), tmp_path / name)
    shutil.copy(shared_trace("hta_timeline_analysis__sampled_rank-0.json.gz"), tmp_path / "unrelated.json.gz")
    out = run_main("summary", "--json", tmp_path)
    out.assert_clean(json_out=True, codes=(0,))
    summary = out.json()
    assert len(summary["ranks"]) == 3 and summary["ranks"][:2] == [0, 1]
    assert any("unrelated.json.gz claims rank 0" in w for w in summary["warnings"])


@pytest.mark.shared
def test_two_copies_of_dlrm_rank0_load_as_two_ranks(tmp_path):
    source = shared_trace("param_v100_dlrm_rank0.pt.trace.json.gz")
    shutil.copy(source, tmp_path / "a.json.gz")
    shutil.copy(source, tmp_path / "b.json.gz")
    trace = load_trace(tmp_path)
    assert trace.ranks == [0, 8]  # DLRM's world_size is 8: the copy gets an id no real rank has
    assert [f.claimed_rank for f in trace.files] == [0, 0]
    one = load_trace(source)
    assert len(trace.events) == 2 * len(one.events) and len(trace.steps) == 2 * len(one.steps)
    assert any("b.json.gz claims rank 0 like a.json.gz" in w for w in trace.warnings)
