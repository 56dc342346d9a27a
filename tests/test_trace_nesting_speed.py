"""The shortcuts that make nesting fast against the plain computations they stand for: the start
order against one lexsort of all its keys, tie resolution against the walk of every candidate one by
one, the pruning checks and depths against scans, on random cases (ties, zero durations, negative
and overflowing times) and on a real trace with whole-microsecond ties."""
import numpy as np
import pytest

from perfkit.trace import load_trace, nesting
from perfkit.trace.schema import LAUNCH_CATEGORIES, NESTED_CATEGORIES

from conftest import shared_trace

DLRM = "param_v100_dlrm_rank0.pt.trace.json.gz"


def plain_resolve_ties(order, parent, start, end, thread, launch, ext, names, calls):
    """Every candidate walks from its predecessor, in start order (the loop the module replaced)."""
    pos = np.asarray(order, dtype=np.int64)
    prev = np.full(len(pos), -1, dtype=np.int64)
    prev[pos[1:]] = np.where(thread[pos[1:]] == thread[pos[:-1]], pos[:-1], -1)
    width, pairs = calls["width"], calls["pairs"]
    for i in pos[(start[pos] == end[pos]) & (prev[pos] >= 0) & (prev[pos] != parent[pos])].tolist():
        strict, t, k = parent[i], start[i], prev[i]
        while k >= 0 and k != strict:
            if end[k] == t and not launch[k] and (
                    ext[i] == ext[k] if launch[i] and ext[i] >= 0 else int(names[k]) * width + int(names[i]) in pairs):
                parent[i] = k
                break
            k = parent[k]


def random_threads(rng, n):
    """Host events of a few threads at whole units: many ties, zero durations, runtime calls with and
    without an External id, a handful of names."""
    start = rng.integers(0, 30, n)
    end = start + rng.integers(0, 6, n) * (rng.random(n) < 0.5)
    thread = rng.integers(0, 3, n)
    launch = rng.random(n) < 0.3
    ext = np.where(rng.random(n) < 0.8, rng.integers(0, 12, n), -1)
    names = rng.integers(0, 4, n).astype(np.int16)
    return start, end, thread, launch, ext, names


def test_start_order_equals_one_lexsort_of_all_its_keys():
    rng = np.random.default_rng(3)
    for big in (False, True):  # True: (thread, start) overflows one key and takes the plain lexsort
        for _ in range(300):
            n = int(rng.integers(1, 60))
            start, end, thread, launch, ext, _ = random_threads(rng, n)
            if big:
                start, end = start + 2**61, end + 2**61
            expected = np.lexsort((start - end, launch, np.where((ext < 0) & launch, 2**62, ext), start, thread))
            assert (nesting._start_order(start, end, thread, ext, launch) == expected).all()


def test_tie_resolution_equals_the_walk_of_every_candidate_in_turn():
    rng = np.random.default_rng(5)
    moved_at_once = moved_by_walk = 0
    for _ in range(1500):
        n = int(rng.integers(1, 70))
        start, end, thread, launch, ext, names = random_threads(rng, n)
        order = nesting._start_order(start, end, thread, ext, launch)
        strict = nesting._sweep(order, start, end, thread, launch)
        calls = nesting._calls(strict, names, launch, [f"n{c}" for c in range(4)])
        got, expected = strict.copy(), strict.copy()
        nesting._resolve_ties(order, got, start, end, thread, launch, ext, names, calls)
        plain_resolve_ties(order, expected, start, end, thread, launch, ext, names, calls)
        assert (got == expected).all()
        candidates, before = nesting._candidates(order, strict, start, end, thread)
        moved = candidates[got[candidates] != strict[candidates]]
        moved_at_once += int((got[moved] == before[np.isin(candidates, moved)]).sum())
        moved_by_walk += int((got[moved] != before[np.isin(candidates, moved)]).sum())
    assert moved_at_once > 100 and moved_by_walk > 20  # both the vectorized test and the walk moved events


def test_a_real_trace_resolves_ties_as_the_plain_walk_does():
    path = shared_trace(DLRM)
    ev = load_trace(path, use_cache=False).events
    complete = (ev["ph"] == "X").to_numpy()
    rows = np.flatnonzero(complete & ev["cat"].isin(NESTED_CATEGORIES).to_numpy())
    start, end = nesting._nanoseconds(ev["ts_us"].to_numpy()[rows], ev["dur_us"].to_numpy()[rows])
    thread = nesting._threads(ev, rows)
    launch = ev["cat"].isin(LAUNCH_CATEGORIES).to_numpy()[rows]
    ext = nesting._op_links(ev["external_id"].to_numpy()[rows], ev["correlation"].to_numpy()[rows], launch)
    order = nesting._start_order(start, end, thread, ext, launch)
    strict = nesting._sweep(order, start, end, thread, launch)
    names, categories = nesting._name_codes(ev["name"], rows)
    calls = nesting._calls(strict, names, launch, categories)
    got, expected = strict.copy(), strict.copy()
    nesting._resolve_ties(order, got, start, end, thread, launch, ext, names, calls)
    plain_resolve_ties(order, expected, start, end, thread, launch, ext, names, calls)
    assert (got == expected).all()
    assert (got != strict).sum() > 10  # the trace has ties the walk settles
    # the loaded parents are these, as row labels
    loaded = ev["parent"].to_numpy()[rows]
    assert (loaded == np.where(got >= 0, rows[np.clip(got, 0, None)], -1)).all()


def test_closed_at_start_equals_a_scan_of_the_thread():
    rng = np.random.default_rng(9)
    seen = set()
    for _ in range(1000):
        n = int(rng.integers(1, 40))
        start, end, thread, launch, _, _ = random_threads(rng, n)
        end = np.where(rng.random(n) < 0.1, start - 3, end)  # negative durations end before any start
        rows = np.flatnonzero(start == end)
        expected = [any(k != i and thread[k] == thread[i] and not launch[k] and end[k] == start[i] for k in range(n))
                    for i in rows]
        got = nesting._closed_at_start(rows, start, end, thread, launch)
        assert got.tolist() == expected
        seen.update(expected)
    assert seen == {True, False}


@pytest.mark.parametrize("runs", [(1, 8), (65, 80)])
def test_open_before_equals_a_scan_of_the_run(runs):
    """Over 64 runs: every position past a run's first is reported open (the walk decides)."""
    rng = np.random.default_rng(13)
    for _ in range(300):
        count = int(rng.integers(*runs))
        run = np.sort(np.r_[np.arange(count), rng.integers(0, count, int(rng.integers(0, 40)))])
        first = np.r_[True, run[1:] != run[:-1]]
        start = np.concatenate([np.sort(rng.integers(-5, 30, (run == r).sum())) for r in range(count)])
        end = start + rng.integers(-2, 8, len(run))
        got = nesting._open_before(start, end, first)
        if count > 64:
            assert (got == ~first).all()
            continue
        expected = [any(run[k] == run[j] and end[k] > start[j] for k in range(j)) for j in range(len(run))]
        assert got.tolist() == expected


def test_depths_equal_a_walk_to_the_root():
    rng = np.random.default_rng(17)
    for _ in range(300):
        n = int(rng.integers(1, 80))
        parent = np.array([int(rng.integers(-1, i)) if i else -1 for i in range(n)], dtype=np.int64)
        perm = rng.permutation(n)  # parents need not come first
        relabel = np.empty(n, dtype=np.int64)
        relabel[perm] = np.arange(n)
        parent = np.where(parent >= 0, relabel[np.clip(parent, 0, None)], -1)[perm]
        expected = []
        for i in range(n):
            d, p = 0, parent[i]
            while p >= 0:
                d, p = d + 1, parent[p]
            expected.append(d)
        got = nesting.depths(parent)
        assert got.dtype == np.int32 and got.tolist() == expected
