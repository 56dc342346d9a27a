"""Loader correctness on every real trace, checked against an independent count of the raw JSON."""
import gzip
import json
from collections import Counter
from pathlib import Path

import orjson
import pandas as pd
import pytest

from perfkit.analysis.summary import summarize
from perfkit.trace import load_trace

from conftest import SHARED_TRACES, loaded_trace, shared_traces

OLD_TO_NEW = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
              "Memset": "gpu_memset", "Trace": "trace"}
BLOCKING = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
            "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipMemcpy",
            "hipMemcpyWithStream", "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"}


def raw_counts(path):
    doc = orjson.loads(gzip.decompress(Path(path).read_bytes()))
    events = doc["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    cats = Counter(OLD_TO_NEW.get(e.get("cat"), e.get("cat")) for e in complete)
    kernels = [e for e in complete if cats and OLD_TO_NEW.get(e.get("cat"), e.get("cat")) == "kernel"]
    copies = [e for e in complete if OLD_TO_NEW.get(e.get("cat"), e.get("cat")) == "gpu_memcpy"]
    memcpy = {}
    for direction in ("HtoD", "DtoH", "DtoD"):
        mine = [e for e in copies if f"Memcpy {direction}" in e["name"]]
        memcpy[direction] = {
            "count": len(mine),
            "pageable_count": sum("Pageable" in e["name"] for e in mine),
            "pinned_count": sum("Pinned" in e["name"] for e in mine),
        }
    syncs = [e for e in complete if OLD_TO_NEW.get(e.get("cat"), e.get("cat")) in ("cuda_runtime", "cuda_driver")
             and e["name"] in BLOCKING]
    return {
        "total": len(events), "by_category": dict(cats), "kernel_count": len(kernels),
        "kernel_time_us": sum(e["dur"] for e in kernels), "memcpy": memcpy,
        "memcpy_bytes": sum(e.get("args", {}).get("bytes", 0) for e in copies),
        "sync_count": len(syncs), "sync_us": sum(e["dur"] for e in syncs),
        "steps": sum(1 for e in complete if str(e.get("name", "")).startswith("ProfilerStep#")
                     and OLD_TO_NEW.get(e.get("cat"), e.get("cat")) in ("cpu_op", "user_annotation")),
    }


TRACES = shared_traces()


@pytest.mark.slow
@pytest.mark.skipif(not TRACES, reason=f"{SHARED_TRACES} not found: real traces live in ../shared/traces")
@pytest.mark.parametrize("path", TRACES, ids=[p.name[:50] for p in TRACES])
def test_counts_match_raw_json(path):
    expected = raw_counts(path)
    got = summarize(loaded_trace(path))
    assert got["events"]["total"] == expected["total"]
    assert got["events"]["by_category"] == expected["by_category"]
    assert got["gpu"]["kernel_count"] == expected["kernel_count"]
    assert got["gpu"]["kernel_time_us"] == pytest.approx(expected["kernel_time_us"], rel=1e-9, abs=1e-6)
    assert got["gpu"]["busy_us"] <= sum(
        got["memcpy"][d]["time_us"] for d in got["memcpy"]) + got["gpu"]["kernel_time_us"] + 1e6
    for direction, counts in expected["memcpy"].items():
        for key, value in counts.items():
            assert got["memcpy"][direction][key] == value, (direction, key)
    if expected["memcpy_bytes"]:
        assert sum(got["memcpy"][d]["bytes"] for d in got["memcpy"]) <= expected["memcpy_bytes"]
    assert got["syncs"]["count"] == expected["sync_count"]
    assert got["syncs"]["blocked_us"] == pytest.approx(expected["sync_us"], abs=1e-6)
    if expected["steps"]:
        assert got["steps"]["count"] == expected["steps"]


def test_old_2021_trace_has_string_tids_and_modern_categories():
    from conftest import shared_trace

    trace = load_trace(shared_trace("kineto_v100_resnet50_dataloader_nw0.pt.trace.json.gz"))
    cats = set(trace.events["cat"].astype(str))
    assert {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy"} <= cats
    assert not cats & {"Operator", "Runtime", "Kernel", "Memcpy"}
    kernels = trace.kernels()
    assert (kernels["stream"] == 7).any() and (kernels["device"] == 0).all()
    links = trace.launches()
    assert len(links) == len(trace.gpu_events()) - 0 or len(links) > 0.9 * len(trace.gpu_events())
    assert (links["queue_delay_us"] >= 0).mean() > 0.99


def test_rocm_copy_bytes_come_from_the_runtime_call():
    from conftest import shared_trace

    trace = load_trace(shared_trace("hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    copies = trace.select("gpu_memcpy")
    assert list(copies["bytes"]) == [2560, 2560] or (copies["bytes"] > 0).all()
    assert summarize(trace)["memcpy"]["HtoD"]["count"] == 2


def test_multi_rank_list_keeps_ranks_and_correlations_apart():
    from conftest import shared_trace

    paths = [shared_trace(f"param_v100_dlrm_rank{r}.pt.trace.json.gz") for r in range(8)]
    trace = load_trace(paths)
    assert trace.ranks == list(range(8))
    assert sorted(trace.steps["rank"]) == list(range(8))
    links = trace.launches()
    assert links.groupby("file_id").size().min() > 100
    single = load_trace(paths[3])
    assert len(trace.events[trace.events["rank"] == 3]) == len(single.events)


def test_directory_of_worker_files(tmp_path):
    from conftest import shared_trace

    for r in (0, 1):
        src = shared_trace(f"param_v100_dlrm_rank{r}.pt.trace.json.gz")
        (tmp_path / src.name).write_bytes(src.read_bytes())
    (tmp_path / "notes.txt").write_text("not a trace")
    trace = load_trace(tmp_path)
    assert trace.ranks == [0, 1] and len(trace.files) == 2


def test_cpu_only_trace_has_no_gpu_events():
    from conftest import shared_trace

    trace = load_trace(shared_trace("hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    assert not trace.has_gpu_events
    assert trace.ranks == [34]
    assert summarize(trace)["gpu"]["busy_us"] == 0


OWN = sorted(Path(__file__).resolve().parents[1].glob("data/traces/**/*.json.gz"))


@pytest.mark.parametrize("path", OWN, ids=[p.name for p in OWN])
def test_project_traces_load_with_steps_and_stacks(path):
    trace = load_trace(path)
    assert len(trace.steps) >= 1 and set(trace.steps["source"]) == {"ProfilerStep"}
    assert trace.has_python_stacks
    assert summarize(trace)["events"]["total"] == trace.files[0].events_read


def relayout(doc: dict, layout: str) -> bytes:
    """``doc`` re-serialized: json.dump's one line, separator-free one line, indented (each event
    over several lines), or one event a line with the metadata after the events (as Kineto puts
    traceName and baseTimeNanoseconds)."""
    if layout == "json.dump":
        return json.dumps(doc).encode()
    if layout == "compact":
        return json.dumps(doc, separators=(",", ":")).encode()
    if layout == "indented":
        return json.dumps(doc, indent=2).encode()
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    lines = ",\n".join(json.dumps(e) for e in doc["traceEvents"])
    return ('{"traceEvents": [\n' + lines + "\n]," + json.dumps(head)[1:]).encode()


LAYOUT_TRACES = [  # old 2021 schema, ROCm, json.dump'ed one-line, 8-GPU pretty, CPU-only, distributed
    "kineto_v100_resnet50_dataloader_nw4.pt.trace.json.gz", "hta_amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "tracelens_mi300x_vllm_piecewise_graph_exec.json.gz", "tracelens_b200_serving_eager_rank0.json.gz",
    "hta_cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", "param_v100_dlrm_rank3.pt.trace.json.gz",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", LAYOUT_TRACES)
def test_every_layout_and_compression_gives_the_same_tables(name, tmp_path, monkeypatch):
    """The first 20,000 events of each trace; the reference is parsed whole, the others in 32 KiB
    chunks (cut many times), the indented gzip one by two worker processes."""
    from conftest import shared_trace

    doc = json.loads(gzip.decompress(shared_trace(name).read_bytes()))
    doc["traceEvents"] = doc["traceEvents"][:20_000]
    (tmp_path / "ref.json").write_bytes(json.dumps(doc).encode())
    expected = load_trace(tmp_path / "ref.json", use_cache=False, workers=1)
    monkeypatch.setattr("perfkit.trace.loader.parse.CHUNK_BYTES", 32 << 10)
    for layout in ("json.dump", "compact", "indented", "one event a line"):
        text = relayout(doc, layout)
        for path, data in ((tmp_path / "t.json", text), (tmp_path / "t.json.gz", gzip.compress(text, 1))):
            path.write_bytes(data)
            got = load_trace(path, use_cache=False, workers=2 if layout == "indented" and path.suffix == ".gz" else 1)
            pd.testing.assert_frame_equal(got.events, expected.events, obj=f"{layout} {path.name} events")
            pd.testing.assert_frame_equal(got.flows, expected.flows, obj=f"{layout} {path.name} flows")
            pd.testing.assert_frame_equal(got.steps, expected.steps, obj=f"{layout} {path.name} steps")
            assert got.files[0].devices == expected.files[0].devices and got.ranks == expected.ranks


def replicated_ranks(tmp_path, n: int) -> list[Path]:
    """``n`` copies of DLRM rank 0, each claiming its own rank (as a 64-GPU run's files would)."""
    from conftest import shared_trace

    doc = json.loads(gzip.decompress(shared_trace("param_v100_dlrm_rank0.pt.trace.json.gz").read_bytes()))
    tmp_path.mkdir(exist_ok=True)
    paths = []
    for rank in range(n):
        doc["distributedInfo"] = dict(doc["distributedInfo"], rank=rank, world_size=n)
        paths.append(tmp_path / f"rank{rank}.pt.trace.json.gz")
        paths[-1].write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    return paths


_CONCURRENCY_PROBE = """
import json, os, sys, time
from perfkit.trace import load_trace
from perfkit.trace.loader import load
parse = load._parse_file
def logged(path, **kw):  # forked workers inherit this patch
    with open(sys.argv[2], "a") as fh:
        fh.write(f"start {os.getpid()} {time.monotonic()}\\n")
    try:
        return parse(path, **kw)
    finally:
        with open(sys.argv[2], "a") as fh:
            fh.write(f"end {os.getpid()} {time.monotonic()}\\n")
load._parse_file = logged
trace = load_trace(sys.argv[1], workers=2, progress=True)
print(json.dumps({"ranks": trace.ranks, "parent": os.getpid(), "events": len(trace.events)}))
"""


def test_ranks_are_parsed_in_worker_processes_at_most_workers_at_once(tmp_path):
    """Each rank is parsed (and cached) in a worker; never more than ``workers`` parses at once.
    Run in a fresh interpreter: its workers are forked (pytest's threads would make them come
    from a fork server, which does not carry the probe)."""
    import os
    import subprocess
    import sys

    from perfkit.trace.loader import cache

    paths = replicated_ranks(tmp_path / "run", 8)
    log = tmp_path / "parses.log"
    done = subprocess.run([sys.executable, "-c", _CONCURRENCY_PROBE, str(tmp_path / "run"), str(log)],
                          capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ranks"] == list(range(8))
    lines = [line.split() for line in log.read_text().splitlines()]
    pids = {int(pid) for _, pid, _ in lines}
    assert result["parent"] not in pids and len(pids) == 2
    running = peak = 0
    for kind, _, _ in sorted(lines, key=lambda line: float(line[2])):
        running += 1 if kind == "start" else -1
        peak = max(peak, running)
    assert peak <= 2
    assert len([p for p in cache.cache_dir().iterdir() if p.name.endswith(".events.arrow")]) == 8
    assert "loading traces" in done.stderr and "parsing" not in done.stderr
    cached = load_trace(tmp_path / "run", workers=2)  # every rank from the cache, read in this process
    single = load_trace(paths, workers=1, use_cache=False)
    pd.testing.assert_frame_equal(cached.events, single.events)
    pd.testing.assert_frame_equal(cached.steps, single.steps)


def test_a_bad_rank_among_many_is_named_when_parsed_in_a_worker(tmp_path):
    paths = replicated_ranks(tmp_path / "run", 4)
    paths[2].write_bytes(gzip.compress(gzip.decompress(paths[2].read_bytes())[:-5000]))
    from perfkit.errors import TruncatedTraceError

    with pytest.raises(TruncatedTraceError) as info:
        load_trace(tmp_path / "run", workers=2)
    assert str(paths[2]) in str(info.value) and info.value.recoverable > 100
    trace = load_trace(tmp_path / "run", workers=2, salvage=True)
    assert trace.ranks == [0, 1, 2, 3] and any("rank2" in w and "cut off" in w for w in trace.warnings)


def test_ranks_load_in_a_pool_from_a_kernel_whose_main_has_no_spec(tmp_path, monkeypatch):
    """A Jupyter kernel: other threads running (so no fork) and a ``__main__`` without ``__spec__``,
    which the fork server reads to prepare each worker."""
    import sys
    import threading

    class KernelMain:  # like ipykernel's DummyMod
        pass

    paths = replicated_ranks(tmp_path / "run", 2)
    monkeypatch.setitem(sys.modules, "__main__", KernelMain())
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        trace = load_trace(tmp_path / "run", workers=2, use_cache=False)
    finally:
        stop.set()
        other.join()
    assert trace.ranks == [0, 1]
    pd.testing.assert_frame_equal(trace.events, load_trace(paths, workers=1, use_cache=False).events)


@pytest.mark.parametrize("before", [True, False])
def test_a_load_asks_for_no_huge_pages_and_leaves_numpy_as_it_found_it(tmp_path, monkeypatch, before):
    import numpy as np

    from perfkit.trace.loader import load

    switch = np._core.multiarray._set_madvise_hugepage
    seen = []
    inner = load._load_files

    def spy(*args, **kwargs):
        now = switch(False)  # reads the setting (and keeps it off)
        seen.append(now)
        switch(now)
        yield from inner(*args, **kwargs)

    monkeypatch.setattr(load, "_load_files", spy)
    original = switch(before)
    try:
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                                                     "tid": 1, "ts": 1, "dur": 2}]}))
        load_trace(path, use_cache=False)
        assert seen == [False] and switch(original) is before
    finally:
        switch(original)


def test_overlapping_loads_put_numpys_huge_pages_back_once_the_last_ends():
    """Loads in two threads: the first ends while the second still runs."""
    import numpy as np

    from perfkit.trace.loader.workers import small_pages

    switch = np._core.multiarray._set_madvise_hugepage
    original = switch(True)
    try:
        first, second = small_pages(), small_pages()
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert switch(False) is False  # still off for the second load
        second.__exit__(None, None, None)
        assert switch(original) is True
    finally:
        switch(original)
