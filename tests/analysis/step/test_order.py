"""The replay's node order (``perfkit.analysis.step.order``): every edge of a small graph, by recorded start, moved
after a dependency where clock skew puts one later, and Kahn's sort where a cycle leaves an edge pointing back."""
from __future__ import annotations

import numpy as np

from perfkit.analysis.step import order as od


def _graph(seg_start=(0.0, 10.0, 5.0, 7.0), gpu_start=(3.0, 20.0, 30.0), waits=((1,), (2,)), hdeps=((1,), (2,)),
           prev=(-1, 0, 1), launch=(0, -1, 3), cross=(-1, -1, 0)):
    """Three runs (threads 0, 0, 1; run 2 of two segments) and three GPU events: event 0 launched by segment 0,
    event 1 after event 0 on its stream, event 2 after event 1 on its stream, launched by segment 3 and waiting for
    event 0 on another stream; run 2 waits for GPU event 1 and for segment 1 (a host dependency)."""
    seg = {"start": np.array(seg_start), "run": np.array([0, 1, 2, 2])}
    runs = {"first": np.array([0, 1, 2]), "thread": np.array([0, 0, 1])}
    gpu = {"start": np.array(gpu_start), "prev": np.array(prev), "launch_seg": np.array(launch), "cross": np.array(cross)}
    return seg, runs, gpu, {"gpu": np.array(waits[0], dtype=np.int64), "run": np.array(waits[1], dtype=np.int64)}, \
        {"seg": np.array(hdeps[0], dtype=np.int64), "run": np.array(hdeps[1], dtype=np.int64)}


def test_every_edge_of_the_graph():
    src, dst = od.edges(*_graph())
    assert src.dtype == np.int64 and dst.dtype == np.int64
    # run 0 -> run 1 (one thread); GPU 0 -> 1 -> 2 (stream order: nodes 3, 4, 5); seg 0's run -> GPU 0,
    # seg 3's run (2) -> GPU 2; GPU 0 -> GPU 2 (cross-stream); GPU 1 -> run 2 (a wait); seg 1's run -> run 2
    assert list(zip(src, dst)) == [(0, 1), (3, 4), (4, 5), (0, 3), (2, 5), (3, 5), (4, 2), (1, 2)]


def test_no_edges_of_one_run_per_thread():
    seg, runs, gpu, waits, hdeps = _graph(waits=((), ()), hdeps=((), ()), prev=(-1, -1, -1), launch=(-1, -1, -1),
                                          cross=(-1, -1, -1))
    runs["thread"] = np.array([0, 1, 2])
    src, dst = od.edges(seg, runs, gpu, waits, hdeps)
    assert len(src) == 0 and len(dst) == 0
    assert list(od.topological_order(seg, runs, gpu, waits, hdeps)) == [0, 3, 2, 1, 4, 5]  # by start alone


def test_the_order_is_by_start_with_every_dependency_first():
    order = list(od.topological_order(*_graph()))
    # starts: runs 0, 10, 5; GPU 3, 20, 30; run 2 waits for GPU 1 (20) and run 1 (10): it moves after 20
    assert order == [0, 3, 1, 4, 2, 5]
    position = {n: i for i, n in enumerate(order)}
    assert all(position[s] < position[d] for s, d in zip(*od.edges(*_graph())))


def test_a_run_and_a_gpu_event_at_one_start_put_the_run_first():
    seg, runs, gpu, waits, hdeps = _graph(seg_start=(0.0, 3.0, 50.0, 60.0), gpu_start=(3.0, 20.0, 70.0))
    runs["thread"] = np.array([0, 1, 2])  # no chain: run 1 (3.0) and GPU 0 (3.0) do not depend on each other
    order = list(od.topological_order(seg, runs, gpu, waits, hdeps))
    assert order.index(1) < order.index(3)


def test_clock_skew_moves_a_node_after_its_dependency():
    """GPU event 0 recorded at 1.0, before the segment that launched it (at 2.0): it moves just after it."""
    order = list(od.topological_order(*_graph(seg_start=(2.0, 10.0, 5.0, 7.0), gpu_start=(1.0, 20.0, 30.0))))
    assert order.index(0) < order.index(3) and order[:2] == [0, 3]


def _skewed_chain(n: int, host_start: float) -> list:
    """The replay order of ``n`` GPU events on one stream, each recorded 1 us before the one ahead of it, after
    one host segment starting at ``host_start``."""
    seg = {"start": np.array([host_start]), "run": np.array([0])}
    runs = {"first": np.array([0]), "thread": np.array([0])}
    gpu = {"start": np.arange(n, 0, -1, dtype=float), "prev": np.arange(-1, n - 1), "launch_seg": np.full(n, -1),
           "cross": np.full(n, -1)}
    none = {"gpu": np.array([], dtype=np.int64), "run": np.array([], dtype=np.int64)}
    return list(od.topological_order(seg, runs, gpu, none, {"seg": none["gpu"], "run": none["run"]}))


def test_a_long_chain_of_skew_is_bumped_through():
    """Ten GPU events on one stream, each recorded 1 us before the one ahead of it: bumping orders them all."""
    assert _skewed_chain(10, 100.0) == [*range(1, 11), 0]


def test_a_chain_longer_than_the_bumps_falls_to_kahn():
    """Seventy events each recorded before the one ahead: 64 rounds of bumping leave edges pointing back, so
    Kahn's sort orders them (the same stream order)."""
    assert _skewed_chain(70, 1000.0) == [*range(1, 71), 0]


def test_a_cycle_puts_its_nodes_last_in_key_order():
    """Node 3 is ready; 0 -> 1 -> 2 -> 0 is a cycle (clocks that disagree): Kahn emits 3, then the cycle by key."""
    src, dst = np.array([0, 1, 2]), np.array([1, 2, 0])
    key = np.array([5.0, 1.0, 3.0, 9.0])
    assert list(od._kahn(4, src, dst, key)) == [3, 1, 2, 0]


def test_kahn_takes_the_earliest_ready_node_first():
    src, dst = np.array([0, 0, 3]), np.array([1, 2, 2])
    key = np.array([0.0, 7.0, 1.0, 4.0])
    out = od._kahn(4, src, dst, key)
    assert out.dtype == np.int64 and list(out) == [0, 3, 2, 1]
    assert list(od._kahn(3, np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([2.0, 0.0, 1.0]))) \
        == [1, 2, 0]


def test_runs_chain_only_after_a_run_of_their_own_thread():
    """Four runs on threads 0, 1, 1, 2: the one edge is run 1 -> run 2."""
    seg = {"start": np.array([0.0, 1.0, 2.0, 3.0]), "run": np.arange(4)}
    runs = {"first": np.arange(4), "thread": np.array([0, 1, 1, 2])}
    gpu = {"start": np.array([]), "prev": np.array([], dtype=np.int64), "launch_seg": np.array([], dtype=np.int64),
           "cross": np.array([], dtype=np.int64)}
    none = {"gpu": np.array([], dtype=np.int64), "run": np.array([], dtype=np.int64)}
    src, dst = od.edges(seg, runs, gpu, none, {"seg": none["gpu"], "run": none["run"]})
    assert list(zip(src, dst)) == [(1, 2)]


def test_a_cross_stream_edge_starts_at_the_event_waited_for():
    src, dst = od.edges(*_graph(cross=(-1, -1, 1)))  # GPU event 2 waits for event 1 (node 4) on another stream
    assert list(zip(src, dst)) == [(0, 1), (3, 4), (4, 5), (0, 3), (2, 5), (4, 5), (4, 2), (1, 2)]


def test_a_skewed_node_moves_only_just_after_its_dependency():
    """GPU event 0 recorded at 1.0, launched by the run at 2.0: it moves to just after 2.0, still before GPU event 1
    (at 2.5, independent)."""
    seg = {"start": np.array([2.0]), "run": np.array([0])}
    runs = {"first": np.array([0]), "thread": np.array([0])}
    gpu = {"start": np.array([1.0, 2.5]), "prev": np.array([-1, -1]), "launch_seg": np.array([0, -1]),
           "cross": np.array([-1, -1])}
    none = {"gpu": np.array([], dtype=np.int64), "run": np.array([], dtype=np.int64)}
    assert list(od.topological_order(seg, runs, gpu, none, {"seg": none["gpu"], "run": none["run"]})) == [0, 1, 2]


def test_kahn_of_a_graph_that_is_all_cycle_gives_node_ids():
    out = od._kahn(2, np.array([0, 1]), np.array([1, 0]), np.array([1.0, 0.0]))
    assert out.dtype == np.int64 and list(out) == [1, 0]
