"""A topological order of a rank graph's nodes (runs, then GPU events offset by the number of runs), for
``simulation`` to visit them in: by recorded start, each moved after its dependencies where clock skew puts one
later; Kahn's algorithm where even that leaves an edge pointing back."""
from __future__ import annotations

import heapq

import numpy as np

def topological_order(seg: dict, runs: dict, gpu: dict, waits: dict, hdeps: dict) -> np.ndarray:
    """A topological order of the nodes (runs, then GPU events offset by the number of runs): by recorded start,
    moved after every dependency where clock skew puts one later."""
    n_run = len(runs["first"])
    key = np.concatenate([seg["start"][runs["first"]], gpu["start"]])
    src, dst = edges(seg, runs, gpu, waits, hdeps)
    eps = 1e-6
    for _ in range(64):
        bumped = key.copy()
        np.maximum.at(bumped, dst, key[src] + eps)
        if np.array_equal(bumped, key):
            break
        key = bumped
    order = np.lexsort((np.arange(len(key)) >= n_run, key))
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    if len(src) and (position[src] >= position[dst]).any():
        order = _kahn(len(key), src, dst, key)
    return order


def edges(seg: dict, runs: dict, gpu: dict, waits: dict, hdeps: dict) -> tuple[np.ndarray, np.ndarray]:
    """(source, destination) node ids of every edge of the graph."""
    n_run = len(runs["first"])
    run_thread = runs["thread"]
    chain = np.flatnonzero(np.concatenate(([False], run_thread[1:] == run_thread[:-1])))
    gpu_ids = np.arange(len(gpu["start"]))
    has_prev, launched, crossed = gpu["prev"] >= 0, gpu["launch_seg"] >= 0, gpu["cross"] >= 0
    src = [chain - 1, n_run + gpu["prev"][has_prev], seg["run"][gpu["launch_seg"][launched]],
           n_run + gpu["cross"][crossed], n_run + waits["gpu"], seg["run"][hdeps["seg"]]]
    dst = [chain, n_run + gpu_ids[has_prev], n_run + gpu_ids[launched], n_run + gpu_ids[crossed], waits["run"],
           hdeps["run"]]
    return np.concatenate(src).astype(np.int64), np.concatenate(dst).astype(np.int64)


def _kahn(n: int, src: np.ndarray, dst: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Kahn's topological sort, earliest key first among the ready nodes; nodes on a cycle (a trace whose clocks
    disagree) follow in key order."""
    indegree = np.bincount(dst, minlength=n)
    order_src = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order_src], np.arange(n + 1))
    heap = [(key[i], i) for i in np.flatnonzero(indegree == 0)]
    heapq.heapify(heap)
    out, seen = [], np.zeros(n, dtype=bool)
    while heap:
        _, i = heapq.heappop(heap)
        out.append(i)
        seen[i] = True
        for j in dst[order_src[starts[i]:starts[i + 1]]]:
            indegree[j] -= 1
            if indegree[j] == 0:
                heapq.heappush(heap, (key[j], j))
    rest = np.flatnonzero(~seen)
    return np.concatenate([np.asarray(out, dtype=np.int64), rest[np.argsort(key[rest], kind="stable")]])
