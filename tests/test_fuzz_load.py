"""Fuzz: paths and ranks the loader is given (issue 16: an unreadable file or directory gave a
PermissionError traceback; traces claiming the same rank were merged: an unrelated rank-0 trace
beside DLRM ranks 0 and 1 gave "ranks [0, 1]", two copies of DLRM rank 0 gave "[0]"; since issue 53 files that
are not the ranks of one job are refused with the runs they hold)."""
import os
import shutil

import pytest

from conftest import shared_trace
from fuzzkit import Budget, can_drop_file_permissions, event, lock, run_cli, run_main, write_trace
from perfkit.errors import ParameterError, TraceError
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


def test_unrelated_rank0_beside_two_ranks_is_refused_with_the_runs(tmp_path):
    """Issue 53: files are ranks of one job only when their distributedInfo says so; a rank 0 of world size 1
    beside ranks 0 and 1 of world size 2 is another run, and the load names both instead of merging them."""
    rank_trace(tmp_path / "run_rank0.json", 0, world_size=2)
    rank_trace(tmp_path / "run_rank1.json", 1, world_size=2)
    rank_trace(tmp_path / "zz_other.json", 0, world_size=1, name="other")
    with pytest.raises(TraceError, match="holds 2 runs, not the ranks of one job") as refused:
        load_trace(tmp_path)
    assert "run_rank0.json, run_rank1.json: ranks 0, 1 of 2" in str(refused.value)
    assert "zz_other.json: rank 0 of 1" in str(refused.value) and "--run N" in str(refused.value)
    pair = load_trace(tmp_path, run=1)
    assert pair.ranks == [0, 1] and "other" not in set(pair.events["name"].astype(str))
    assert any("loaded run 1 of 2" in w and "the other runs were left out" in w for w in pair.warnings)


def test_two_copies_of_one_rank_are_two_runs(tmp_path):
    rank_trace(tmp_path / "a.json", 0, world_size=4)
    shutil.copy(tmp_path / "a.json", tmp_path / "b.json")
    with pytest.raises(TraceError, match="holds 2 runs"):
        load_trace(tmp_path)
    one = load_trace(tmp_path, run=2)
    assert one.ranks == [0] and len(one.events) == 2


def test_files_with_and_without_a_rank_are_two_runs(tmp_path):
    rank_trace(tmp_path / "a.json", None)
    rank_trace(tmp_path / "b.json", 0, world_size=2)
    with pytest.raises(TraceError, match="a.json: one process \\(no distributedInfo rank\\)"):
        load_trace(tmp_path)


@pytest.mark.parametrize("run", [0, 3, -1, True, "1"])
def test_a_run_that_is_not_listed_is_a_parameter_error(tmp_path, run):
    rank_trace(tmp_path / "a.json", None)
    rank_trace(tmp_path / "b.json", None)
    with pytest.raises(ParameterError, match="holds 2 runs .*pick one of 1..2"):
        load_trace(tmp_path, run=run)


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
    run_main("summary", "--json", tmp_path).assert_refused(tmp_path, "holds 2 runs", "ranks 0, 1 of 8",
                                                           "unrelated.json.gz")
    out = run_main("summary", "--json", "--run", "1", tmp_path)  # DLRM (2023) is newer than the HTA sample
    out.assert_clean(json_out=True, codes=(0,))
    summary = out.json()
    assert summary["ranks"] == [0, 1]
    assert any("loaded run 1 of 2" in w for w in summary["warnings"])


@pytest.mark.shared
def test_two_copies_of_dlrm_rank0_are_two_runs(tmp_path):
    source = shared_trace("param_v100_dlrm_rank0.pt.trace.json.gz")
    shutil.copy(source, tmp_path / "a.json.gz")
    shutil.copy(source, tmp_path / "b.json.gz")
    with pytest.raises(TraceError, match="holds 2 runs.*a.json.gz: rank 0 of 8.*b.json.gz: rank 0 of 8"):
        load_trace(tmp_path)
