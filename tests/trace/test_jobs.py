"""Which files are ranks of one job (perfkit.trace.loader.jobs): one row each side of every rule."""
import pytest

from perfkit.trace.loader.jobs import NEAR_US, FileFacts, group_runs


def facts(name, rank, world, start, end=None):
    return FileFacts(name, rank, world, start, start + 1000 if end is None else end)


@pytest.mark.parametrize("b, runs", [
    (facts("b", 1, 2, 1000 + NEAR_US), 1),       # a minute after a's end: still one window
    (facts("b", 1, 2, 2000 + NEAR_US + 1), 2),   # past it: another window or job
    (facts("b", 0, 2, 0), 2),                    # rank 0 twice
    (facts("b", 1, 4, 0), 2),                    # another world size
    (facts("b", None, None, 0), 2),              # no rank claimed: one process
    (facts("b", 2, 2, 0), 2),                    # rank outside its world size
])
def test_two_files_are_one_job_only_when_their_metadata_says_so(b, runs):
    assert len(group_runs([facts("a", 0, 2, 0), b])) == runs
