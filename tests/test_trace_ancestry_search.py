"""The vectorized ancestry helpers against plain reference walks: ``enclosing`` (binary search over
block maxima) against a stack walk over the sorted events, ``with_ancestors`` (boolean marks over a
0..n-1 table) against a walk up parent links, ``thread_key`` (categorical codes) against grouping
by the pid/tid text. Random cases span many search blocks, ties, zero and missing durations,
improper overlaps and several threads; the real trace has a million-frame-like Python stack."""
import numpy as np
import pandas as pd
import pytest

from perfkit.trace import load_trace
from perfkit.trace.ancestry import enclosing, with_ancestors
from perfkit.trace.threads import thread_key

from conftest import shared_trace


def stack_walk(containers: pd.DataFrame, queries: pd.DataFrame) -> list:
    """Innermost container running on the query's thread when it starts: containers sorted by
    (thread, start, longest first, table order), each query after the containers that start with it,
    a stack popped of what ended by the query's start. A missing end never ends; a missing start
    sorts last."""
    def rows(f, kind):
        thread = zip(f["file_id"].tolist(), f["pid"].astype(str).tolist(), f["tid"].astype(str).tolist())
        start = f["ts_us"].to_numpy(dtype=float)
        end = start + f["dur_us"].to_numpy(dtype=float)
        return [(t, np.inf if np.isnan(s) else s, kind, np.inf if np.isnan(e) else -e, i, s, e)
                for i, (t, s, e) in enumerate(zip(thread, start, end))]

    found, stack, current = [-1] * len(queries), [], None
    for key, _, kind, _, i, start, end in sorted(rows(containers, 0) + rows(queries, 1)):
        if key != current:
            stack, current = [], key
        while stack and stack[-1][1] <= start:
            stack.pop()
        if kind:
            found[i] = int(containers.index[stack[-1][0]]) if stack else -1
        else:
            stack.append((i, end))
    return found


def random_events(rng, n: int, threads: int, span: int, missing: float = 0.0) -> pd.DataFrame:
    dur = rng.choice([0, 1, 2, 5, 10, 50, 300], n).astype(float)
    dur[rng.random(n) < missing] = np.nan
    return pd.DataFrame({"file_id": rng.integers(0, 2, n).astype(np.int16),
                         "pid": pd.Categorical(rng.integers(0, threads, n).astype(str)),
                         "tid": pd.Categorical(rng.integers(0, threads, n).astype(str)),
                         "ts_us": rng.integers(0, span, n).astype(float), "dur_us": dur})


@pytest.mark.parametrize("seed", range(12))
def test_enclosing_matches_a_stack_walk_on_random_events(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 1500))
    containers = random_events(rng, n, 2, int(rng.integers(20, 3000)), missing=0.02 if seed % 3 == 0 else 0.0)
    containers.index = rng.permutation(n) + 7
    queries = random_events(rng, 150, 2, 3000)
    queries.index = np.arange(len(queries)) * 3
    got = enclosing(containers, queries)
    assert got.index.equals(queries.index)
    assert got.tolist() == stack_walk(containers, queries)
    assert (got >= 0).any() and (got < 0).any()


def test_enclosing_keeps_the_stack_walk_for_a_start_that_is_not_a_number():
    rng = np.random.default_rng(99)
    containers, queries = random_events(rng, 400, 1, 300), random_events(rng, 60, 1, 300)
    queries.loc[queries.index[::7], "ts_us"] = np.nan
    got = enclosing(containers, queries)
    valid = queries["ts_us"].notna().to_numpy()
    assert got[valid].tolist() == [x for x, v in zip(stack_walk(containers, queries), valid) if v]


def test_enclosing_finds_each_python_frame_of_a_real_trace_like_a_stack_walk():
    trace = load_trace(shared_trace("tracelens_mi300x_xdit_sd35_compiled.json.gz"))
    frames = trace.select("python_function")
    ops = trace.select("cpu_op").iloc[::50]
    got = enclosing(frames, ops)
    assert len(ops) > 500 and (got >= 0).mean() > 0.5
    assert got.tolist() == stack_walk(frames, ops)


def walk_up(parents: pd.Series, labels) -> set:
    out = set()
    for label in labels:
        while label not in out:
            out.add(int(label))
            if label < 0 or label not in parents.index:
                break
            label = int(parents.at[label])
            if label < 0:
                break
    return out


@pytest.mark.parametrize("seed", range(6))
def test_with_ancestors_matches_a_walk_up_the_parent_links(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    parents = pd.Series(rng.integers(-1, n + 5, n))  # parents past the table, and cycles
    labels = rng.integers(-3, n + 8, 40)
    expected = walk_up(parents, labels)
    assert set(with_ancestors(parents, labels).tolist()) == expected
    shifted = parents.set_axis(parents.index * 2)  # not 0..n-1: the general path
    assert set(with_ancestors(shifted, labels * 2).tolist()) == walk_up(shifted, labels * 2)


def test_thread_key_groups_categorical_threads_by_their_text():
    frame = pd.DataFrame({"file_id": [0, 0, 0, 1, 0], "pid": pd.Categorical([1, "1", 2, 1, 2]),
                          "tid": pd.Categorical(["a", "a", "b", "a", "b"])})
    assert thread_key(frame).tolist() == [0, 0, 1, 2, 1]
    frame["pid"] = frame["pid"].astype(object)  # no categories: the text path
    assert thread_key(frame).tolist() == [0, 0, 1, 2, 1]
